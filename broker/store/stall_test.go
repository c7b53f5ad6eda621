package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/testutil"
	"github.com/gantrymq/gantry/message"
)

// stallBound is the MaxDispatchStall of stalledStore.
const stallBound = 200 * time.Millisecond

// stalledStore opens a store on mem whose index can never allocate a
// file (a full disk refusing it): the dispatcher stops at the first
// record. It returns the store's config, the fault's remover and the
// store's clock, which only the test moves.
func stalledStore(t *testing.T, mem *fsx.MemFS) (store.Config, *fsx.Faults, *testutil.Clock) {
	t.Helper()
	faults := &fsx.Faults{}
	faults.Add(fsx.Fault{Op: fsx.OpAllocate, Path: "index", Err: syscall.ENOSPC})
	cfg := testConfig(t, "/store", fsx.WithFaults(mem, faults))
	cfg.MaxDispatchStall = stallBound
	clock := testutil.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	cfg.Now = clock.Now
	return cfg, faults, clock
}

// putUntilRefused stores messages from index from on: 1,200 (four
// segments of stalledStore's log) while the stall is younger than
// MaxDispatchStall (the clock stands still), then, the clock moved past
// it, until Put refuses them. It returns what it
// stored and the refusal.
func putUntilRefused(t *testing.T, s *store.Store, clock *testutil.Clock, from int) ([]store.PutResult, error) {
	t.Helper()
	var out []store.PutResult
	put := func(i int) error {
		res, err := putMsgs(t.Context(), s, []*message.Message{msg(i)})
		out = append(out, res...)
		return err
	}
	i := from
	for ; i < from+1200; i++ {
		if err := put(i); err != nil {
			return out, err
		}
	}
	require.Eventually(t, func() bool { return s.DispatchState().Stalled }, 10*time.Second, time.Millisecond,
		"the dispatcher stalls")
	clock.Advance(stallBound)
	for ; i < from+1300; i++ {
		if err := put(i); err != nil {
			return out, err
		}
	}
	t.Fatal("Put never refused a message while the dispatcher was stalled")
	return nil, nil
}

// A dispatcher that cannot index (no room for the index's file) stalls:
// the store says so, refuses Put with ErrDispatchStalled once the stall
// lasted MaxDispatchStall, and forced cleaning deletes none of the records
// it has not dispatched. Once there is room again the dispatcher resumes on
// its own, Put accepts messages again and every acknowledged message is
// readable.
func TestDispatchStallRefusesPutsAndHoldsForcedCleaning(t *testing.T) {
	mem := fsx.NewMemFS()
	cfg, faults, clock := stalledStore(t, mem)
	s := openStore(t, cfg)
	defer s.Close()

	acked, err := putUntilRefused(t, s, clock, 0)
	require.ErrorIs(t, err, store.ErrDispatchStalled)
	assert.Contains(t, err.Error(), "no space left on device", "the refusal says why")
	require.Greater(t, len(acked), 100, "acknowledged until the stall lasted MaxDispatchStall")
	d := s.DispatchState()
	assert.True(t, d.Stalled)
	assert.True(t, d.Refusing)
	assert.Zero(t, d.Dispatched)
	assert.Equal(t, s.CommitLog().MaxOffset(), d.LagBytes)
	require.ErrorIs(t, d.Err, syscall.ENOSPC)
	assert.Contains(t, d.String(), "dispatch stalled")

	segs := len(mustList(t, mem, "/store/commitlog"))
	require.Greater(t, segs, 2, "several sealed segments")
	mem.SetUsage(func(int64) fsx.Usage { return fsx.Usage{Total: 100, Free: 5} }) // 95 % used: forced cleaning
	res, err := s.CommitLog().Clean()
	require.NoError(t, err)
	assert.Empty(t, res.Deleted, "forced cleaning deletes no record the dispatcher has not passed")
	assert.NotEmpty(t, res.Held)
	assert.Zero(t, s.CommitLog().MinOffset())

	mem.SetUsage(nil)
	_, err = s.CommitLog().Clean() // the disk-full flag goes with the space
	require.NoError(t, err)
	faults.Clear()
	require.Eventually(t, func() bool { return !s.DispatchState().Stalled }, 10*time.Second, 10*time.Millisecond,
		"the dispatcher resumes on its own once the index has room")
	waitDispatched(t, s)
	assert.Empty(t, s.DispatchState().String())
	for _, r := range acked {
		m, err := s.MessageByOffsetID(r.MsgID)
		require.NoError(t, err)
		got, err := s.MessageByQueueOffset(m.Topic, m.QueueID, r.QueueOffset)
		require.NoError(t, err, "acknowledged message %s is readable from its queue", r.MsgID)
		assert.Equal(t, r.PhysicalOffset, got.PhysicalOffset)
	}
	_, err = putMsgs(t.Context(), s, []*message.Message{msg(len(acked))})
	require.NoError(t, err, "Put accepts messages again")
}

// A dispatcher far behind the log refuses Put even while it is not
// failing: MaxDispatchLagBytes.
func TestDispatchLagRefusesPuts(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), nil)
	cfg.MaxDispatchLagBytes = 4 << 10
	s := openStore(t, cfg)
	defer s.Close()
	release := sync.OnceFunc(s.HoldDispatch())
	defer release() // before Close, which waits for the dispatcher
	var err error
	for i := 0; err == nil && i < 1000; i++ {
		_, err = putMsgs(t.Context(), s, []*message.Message{msg(i)})
	}
	require.ErrorIs(t, err, store.ErrDispatchStalled)
	assert.Contains(t, err.Error(), "bytes behind the log's end")
	assert.False(t, s.DispatchState().Stalled, "slow, not failing")
	release()
	waitDispatched(t, s)
	_, err = putMsgs(t.Context(), s, []*message.Message{msg(0)})
	require.NoError(t, err)
}

// A restart while the dispatcher cannot work opens the store stalled
// instead of failing: reads of what was dispatched work, Put is refused
// at once, a consumer at the queue's end in the log is told nothing is new
// (not that it is past the end), and once the index has room the
// recovered records are dispatched and new messages continue each queue's
// offsets, instead of Open failing with the index's ENOSPC.
func TestOpenWhileDispatchStalled(t *testing.T) {
	mem := fsx.NewMemFS()
	cfg, faults, clock := stalledStore(t, mem)
	s := openStore(t, cfg)
	acked, err := putUntilRefused(t, s, clock, 0)
	require.ErrorIs(t, err, store.ErrDispatchStalled)
	require.NoError(t, s.Close())

	s, err = store.Open(t.Context(), cfg)
	require.NoError(t, err, "a restart during a stall opens the store")
	defer s.Close()
	assert.Contains(t, s.Recovery().DispatchError, "no space left on device")
	assert.True(t, s.DispatchState().Refusing, "refusing at once")
	_, err = putMsgs(t.Context(), s, []*message.Message{msg(0)})
	require.ErrorIs(t, err, store.ErrDispatchStalled)

	ends := map[store.QueueKey]int64{}
	for i, r := range acked {
		k := store.QueueKey{Topic: msg(i).Topic, QueueID: msg(i).QueueID}
		ends[k] = max(ends[k], r.QueueOffset+1)
	}
	for k, end := range ends {
		assert.Equal(t, end, s.RecoveredQueueEnd(k.Topic, k.QueueID), "queue %s", k)
		g, err := s.Get(k.Topic, k.QueueID, end, 8, 1<<20, nil)
		require.NoError(t, err)
		assert.Equal(t, store.OffsetOverflowOne, g.Status, "queue %s: its messages are coming", k)
		assert.Equal(t, end, g.NextOffset)
	}

	faults.Clear()
	waitDispatched(t, s)
	res := putAll(t, s, len(acked), 60)
	for i, r := range res {
		k := store.QueueKey{Topic: msg(len(acked) + i).Topic, QueueID: msg(len(acked) + i).QueueID}
		require.Equal(t, ends[k], r.QueueOffset, "queue %s continues after the recovered records", k)
		ends[k]++
	}
	waitDispatched(t, s) // reference checks that queue offsets are dense in log order
}

// A store whose log lost records before they were dispatched (forced
// cleaning without DeleteFloor) opens: each queue resumes at its
// first record still in the log, instead of failing with "consume queue
// is missing entries".
func TestOpenSkipsQueueOffsetsDeletedBeforeDispatch(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir, nil)
	s := openStore(t, cfg)
	res := putAll(t, s, 0, 2000)
	require.NoError(t, s.Close())

	// Only the first two entries of each queue were dispatched, and the
	// first three segments are gone.
	queues, err := filepath.Glob(filepath.Join(dir, "consumequeue", "*", "*"))
	require.NoError(t, err)
	for _, q := range queues {
		files, err := os.ReadDir(q)
		require.NoError(t, err)
		for i, f := range files {
			b, err := os.ReadFile(filepath.Join(q, f.Name()))
			require.NoError(t, err)
			from := 0
			if i == 0 {
				from = 40
			}
			clear(b[from:])
			require.NoError(t, os.WriteFile(filepath.Join(q, f.Name()), b, 0o644))
		}
	}
	require.NoError(t, os.Remove(filepath.Join(dir, "dispatch.json")))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "index")))
	segs := mustList(t, fsx.OS, filepath.Join(dir, "commitlog"))
	require.Greater(t, len(segs), 4)
	for _, name := range segs[:3] {
		require.NoError(t, os.Remove(filepath.Join(dir, "commitlog", name)))
	}

	s, err = store.Open(t.Context(), cfg)
	require.NoError(t, err, "the store opens")
	defer s.Close()
	assert.Positive(t, s.Recovery().SkippedEntries)
	logMin := s.CommitLog().MinOffset()
	first := map[store.QueueKey]int64{}
	for i, r := range res {
		k := store.QueueKey{Topic: msg(i).Topic, QueueID: msg(i).QueueID}
		if _, ok := first[k]; !ok && r.PhysicalOffset >= logMin {
			first[k] = r.QueueOffset
		}
	}
	for k, want := range first {
		minOff, _ := s.QueueOffsets(k.Topic, k.QueueID)
		assert.Equal(t, want, minOff, "queue %s starts at its first record in the log", k)
		g, err := s.Get(k.Topic, k.QueueID, minOff, 1, 1<<20, nil)
		require.NoError(t, err)
		require.Equal(t, store.Found, g.Status)
		g.Release()
	}
	more := putAll(t, s, len(res), 12)
	for i, r := range more {
		k := store.QueueKey{Topic: msg(len(res) + i).Topic, QueueID: msg(len(res) + i).QueueID}
		_, maxOff := s.QueueOffsets(k.Topic, k.QueueID)
		assert.Less(t, r.QueueOffset, maxOff+1)
	}
}

// A filesystem that cannot hold an index file and two segments is refused
// at Open, with a message that says what is needed.
func TestOpenRefusesFilesystemTooSmallForTheIndex(t *testing.T) {
	mem := fsx.NewMemFS()
	mem.SetUsage(func(used int64) fsx.Usage { return fsx.Usage{Total: 64 << 20, Free: 64<<20 - used} })
	cfg := testConfig(t, "/store", mem)
	cfg.IndexSlots, cfg.IndexEntries = 0, 0 // the defaults: a 420 MB file
	cfg.Log.SegmentBytes = 8 << 20
	_, err := store.Open(t.Context(), cfg)
	require.ErrorIs(t, err, store.ErrTooSmall)
	var se *store.SpaceError
	require.True(t, errors.As(err, &se))
	assert.Equal(t, int64(420_000_040), se.IndexFileBytes)
	assert.Equal(t, 5_000_000, se.IndexSlots)
	assert.Equal(t, 20_000_000, se.IndexEntries)
	assert.True(t, strings.Contains(err.Error(), "index file of 400.5 MiB"), err.Error())

	cfg.IndexSlots, cfg.IndexEntries = 100_000, 400_000 // 8.4 MB
	s := openStore(t, cfg)
	require.NoError(t, s.Close())
}

func mustList(t *testing.T, fsys fsx.FS, dir string) []string {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	slices.Sort(names)
	return names
}
