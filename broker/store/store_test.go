package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/consumequeue"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig(t *testing.T, root string, fs fsx.FS) store.Config {
	return store.Config{
		Root: root, FS: fs, QueueEntriesPerFile: 64, IndexSlots: 101, IndexEntries: 400,
		Log:    commitlog.Config{SegmentBytes: 64 << 10, CleanInterval: -1},
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

func openStore(t *testing.T, cfg store.Config) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), cfg)
	require.NoError(t, err)
	return s
}

var topics = []string{"Orders", "Payments", "Audit"}

func msg(i int) *message.Message {
	return &message.Message{
		Topic: topics[i%3], QueueID: int32(i % 4), BornTimestamp: int64(i),
		Body: fmt.Appendf(nil, "body-%d", i),
		Properties: message.Properties{
			{Key: message.PropTags, Value: []string{"TagA", "TagB", "TagC"}[(i/3)%3]},
			{Key: message.PropKeys, Value: fmt.Sprintf("k%d order-%d", i, i/10)},
		},
	}
}

// putMsgs stores msgs as the broker stores message structs: encoded once
// (Encode), then put (PutBatch).
func putMsgs(ctx context.Context, s *store.Store, msgs []*message.Message) ([]store.PutResult, error) {
	b, err := s.Encode(msgs)
	if err != nil {
		return nil, err
	}
	defer b.Release()
	return s.PutBatch(ctx, b)
}

// putAll stores n messages in batches of up to 5 and returns the results.
func putAll(t *testing.T, s *store.Store, from, n int) []store.PutResult {
	t.Helper()
	var out []store.PutResult
	rng := rand.New(rand.NewPCG(uint64(from), 1))
	for i := from; i < from+n; {
		k := min(1+rng.IntN(5), from+n-i)
		batch := make([]*message.Message, k)
		for j := range batch {
			batch[j] = msg(i + j)
		}
		res, err := putMsgs(t.Context(), s, batch)
		require.NoError(t, err)
		out = append(out, res...)
		i += k
	}
	return out
}

// waitDispatched waits until the dispatcher has passed the log's end (a
// record's index entries are written after its queue entry) and every
// queue holds what the log holds.
func waitDispatched(t *testing.T, s *store.Store) {
	t.Helper()
	require.Eventually(t, func() bool {
		return s.DispatchedOffset() >= s.CommitLog().MaxOffset() && equalQueues(s, reference(t, s))
	}, 5*time.Second, time.Millisecond)
}

// reference builds every queue's entries by walking the commit log.
func reference(t *testing.T, s *store.Store) map[store.QueueKey][]consumequeue.Entry {
	ref := map[store.QueueKey][]consumequeue.Entry{}
	cl := s.CommitLog()
	for off := cl.MinOffset(); ; {
		r, next, err := cl.ReadRecord(off)
		if errors.Is(err, commitlog.ErrOffsetTooBig) {
			return ref
		}
		require.NoError(t, err)
		m, _, err := message.Decode(r.B)
		require.NoError(t, err)
		if tx := m.SysFlag & message.TransactionMask; tx == message.TransactionPrepared || tx == message.TransactionRollback {
			r.Release()
			off = next
			continue // no queue entry
		}
		k := store.QueueKey{Topic: m.Topic, QueueID: m.QueueID}
		require.Equal(t, int64(len(ref[k])), m.QueueOffset, "queue offsets are dense in log order")
		ref[k] = append(ref[k], consumequeue.Entry{Offset: next - int64(len(r.B)), Size: int32(len(r.B)), TagsCode: message.TagsCode(m.Tags())})
		r.Release()
		off = next
	}
}

func equalQueues(s *store.Store, ref map[store.QueueKey][]consumequeue.Entry) bool {
	for k, want := range ref {
		for i, e := range want {
			m, err := s.MessageByQueueOffset(k.Topic, k.QueueID, int64(i))
			if err != nil || m.PhysicalOffset != e.Offset {
				return false
			}
		}
		if _, maxOff := s.QueueOffsets(k.Topic, k.QueueID); maxOff != int64(len(want)) {
			return false
		}
	}
	return true
}

func TestPutGetLookups(t *testing.T) {
	s := openStore(t, testConfig(t, t.TempDir(), nil))
	defer s.Close()
	res := putAll(t, s, 0, 300)
	waitDispatched(t, s)
	for i, r := range res {
		assert.Equal(t, int32(i%4), r.QueueID)
		m, err := s.MessageByOffsetID(r.MsgID)
		require.NoError(t, err)
		assert.Equal(t, msg(i).Body, m.Body)
		assert.Equal(t, r.QueueOffset, m.QueueOffset)
		assert.Equal(t, r.UniqKey, m.UniqKey())
	}
	// Get a whole queue in batches of 7.
	var got []string
	for off := int64(0); ; {
		g, err := s.Get("Orders", 0, off, 7, 1<<20, nil)
		require.NoError(t, err)
		if g.Status == store.OffsetOverflowOne {
			break
		}
		require.Equal(t, store.Found, g.Status)
		for _, rec := range g.Records {
			m, _, err := message.Decode(rec.B)
			require.NoError(t, err)
			got = append(got, string(m.Body))
		}
		g.Release()
		off = g.NextOffset
	}
	var want []string
	for i := range 300 {
		if m := msg(i); m.Topic == "Orders" && m.QueueID == 0 {
			want = append(want, string(m.Body))
		}
	}
	assert.Equal(t, want, got)

	// Tag filter on the tags code.
	tagB := message.TagsCode("TagB")
	g, err := s.Get("Payments", 1, 0, 1000, 1<<20, func(c int64) bool { return c == tagB })
	require.NoError(t, err)
	for _, rec := range g.Records {
		m, _, _ := message.Decode(rec.B)
		assert.Equal(t, "TagB", m.Tags())
	}
	g.Release()

	// Keys and UNIQ_KEY.
	ms, err := s.MessagesByKey("Orders", "order-3", 0, time.Now().Add(time.Hour).UnixMilli(), 100)
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	for _, m := range ms {
		assert.Contains(t, m.Keys(), "order-3")
	}
	ms, err = s.MessagesByKey(topics[7%3], res[7].UniqKey, 0, time.Now().Add(time.Hour).UnixMilli(), 10)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	assert.Equal(t, msg(7).Body, ms[0].Body)

	// Statuses.
	g, _ = s.Get("Orders", 0, 1<<40, 1, 1, nil)
	assert.Equal(t, store.OffsetOverflowBadly, g.Status)
	g, _ = s.Get("Nope", 0, 0, 1, 1, nil)
	assert.Equal(t, store.NoMessageInQueue, g.Status)
	off, err := s.OffsetAtTime("Orders", 0, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(0), off)
}

func TestReopenKeepsQueuesAndCounters(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), nil)
	s := openStore(t, cfg)
	putAll(t, s, 0, 200)
	require.NoError(t, s.Close())
	s = openStore(t, cfg)
	defer s.Close()
	assert.False(t, s.Recovery().Rebuilt)
	putAll(t, s, 200, 100)
	waitDispatched(t, s) // reference() also checks queue offsets stay dense across the restart
}

// Deleting consumequeue/ and index/ rebuilds them at start, equal to before.
func TestRebuildDeletedDerivedData(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(t, root, nil)
	s := openStore(t, cfg)
	res := putAll(t, s, 0, 400)
	require.NoError(t, s.Close())
	require.NoError(t, os.RemoveAll(filepath.Join(root, "consumequeue")))
	require.NoError(t, os.RemoveAll(filepath.Join(root, "index")))
	s = openStore(t, cfg)
	defer s.Close()
	assert.True(t, s.Recovery().Rebuilt, s.Recovery().RebuildReason)
	assert.True(t, equalQueues(s, reference(t, s)))
	ms, err := s.MessagesByKey(topics[9%3], res[9].UniqKey, 0, time.Now().Add(time.Hour).UnixMilli(), 10)
	require.NoError(t, err)
	require.Len(t, ms, 1)
}

// A process killed mid-stream (MemFS snapshot: the page cache survives)
// reopens with every queue equal to the reference built from the log.
func TestCrashMidDispatch(t *testing.T) {
	mem := fsx.NewMemFS()
	cfg := testConfig(t, "/store", mem)
	cfg.FlushInterval = 5 * time.Millisecond
	s := openStore(t, cfg)
	for round := range 5 {
		putAll(t, s, round*100, 100)
		waitDispatched(t, s)
		// The queues are complete, but the dispatcher may still be writing
		// the last record's index entries: hold it while the state is copied.
		release := s.HoldDispatch()
		snap, crash := mem.Snapshot(), mem.Crash(nil) // a kill, and a power cut: only what was synced
		release()
		scfg := cfg
		scfg.FS = snap
		s2 := openStore(t, scfg)
		assert.True(t, equalQueues(s2, reference(t, s2)), "round %d", round)
		require.NoError(t, s2.Close())
		scfg.FS = crash
		s3 := openStore(t, scfg)
		assert.True(t, equalQueues(s3, reference(t, s3)), "round %d (power cut)", round)
		require.NoError(t, s3.Close())
	}
	require.NoError(t, s.Close())
}

// Prepared and rolled-back transactional messages are stored with queue
// offset 0 and get no consume-queue entry; the queue stays dense.
func TestTransactionalHalfMessagesTakeNoQueueOffset(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), nil)
	s := openStore(t, cfg)
	defer func() { _ = s.Close() }()
	var batch []*message.Message
	for i, flag := range []int32{0, message.TransactionPrepared, 0, message.TransactionRollback, message.TransactionCommit, 0} {
		m := msg(0)
		m.SysFlag, m.Body = flag, fmt.Appendf(nil, "tx-%d", i)
		batch = append(batch, m)
	}
	res, err := putMsgs(t.Context(), s, batch)
	require.NoError(t, err)
	var offs []int64
	for _, r := range res {
		offs = append(offs, r.QueueOffset)
	}
	assert.Equal(t, []int64{0, 0, 1, 0, 2, 3}, offs)
	waitDispatched(t, s)
	_, maxOff := s.QueueOffsets("Orders", 0)
	assert.Equal(t, int64(4), maxOff)
	require.NoError(t, s.Close())
	s = openStore(t, cfg) // recovery re-dispatches nothing wrong
	_, maxOff = s.QueueOffsets("Orders", 0)
	assert.Equal(t, int64(4), maxOff)
}

// Open writes recovery-report.json with the commit log's and the store's
// findings; OnDispatch reports every queue's growth; under SyncFlush Put
// returns only once the messages are durable.
func TestRecoveryReportDispatchHookAndSyncFlush(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(t, root, nil)
	cfg.Log.FlushMode = commitlog.SyncFlush
	var mu sync.Mutex
	maxSeen := map[store.QueueKey]int64{}
	cfg.OnDispatch = func(topic string, qid int32, maxOff int64) {
		mu.Lock()
		defer mu.Unlock()
		k := store.QueueKey{Topic: topic, QueueID: qid}
		assert.Equal(t, maxSeen[k]+1, maxOff, "one call per message, in order")
		maxSeen[k] = maxOff
	}
	s := openStore(t, cfg)
	for i := range 50 {
		res, err := putMsgs(t.Context(), s, []*message.Message{msg(i)})
		require.NoError(t, err)
		assert.GreaterOrEqual(t, s.CommitLog().FlushedOffset(), res[0].PhysicalOffset+1, "durable before Put returns")
	}
	waitDispatched(t, s)
	mu.Lock()
	for k, n := range maxSeen {
		_, maxOff := s.QueueOffsets(k.Topic, k.QueueID)
		assert.Equal(t, maxOff, n)
	}
	mu.Unlock()
	require.NoError(t, s.Close())
	require.NoError(t, os.RemoveAll(filepath.Join(root, "index")))

	s = openStore(t, cfg)
	defer s.Close()
	b, err := os.ReadFile(filepath.Join(root, "recovery-report.json"))
	require.NoError(t, err)
	var rep map[string]any
	require.NoError(t, json.Unmarshal(b, &rep))
	assert.Equal(t, true, rep["commitLog"].(map[string]any)["clean"])
	assert.Equal(t, float64(12), rep["queues"])
	assert.Equal(t, "index empty", rep["rebuildReason"])
	assert.Equal(t, float64(50), rep["dispatchedRecords"])
}

// PutBatch stores records the producer encoded, as it stores messages
// (Encode), taking each record's queue and UNIQ_KEY from the check that
// read it where it entered.
func TestPutBatch(t *testing.T) {
	s := openStore(t, testConfig(t, t.TempDir(), nil))
	defer s.Close()
	var batch []byte
	var recs []store.RecordInfo
	for i := range 5 {
		m := msg(i * 3) // Orders
		m.QueueID = int32(i % 2)
		var err error
		batch, err = message.AppendUnsealed(batch, m, fmt.Sprintf("U%d", i))
		require.NoError(t, err)
		recs = append(recs, store.RecordInfo{QueueID: m.QueueID, UniqKey: fmt.Appendf(nil, "U%d", i)})
	}
	res, err := s.PutBatch(t.Context(), store.Batch{Topic: "Orders", Pieces: [][]byte{batch[:0], batch}, Records: recs})
	require.NoError(t, err)
	require.Len(t, res, 5)
	assert.Equal(t, []int64{0, 0, 1, 1, 2}, []int64{res[0].QueueOffset, res[1].QueueOffset, res[2].QueueOffset, res[3].QueueOffset, res[4].QueueOffset})
	waitDispatched(t, s)
	for i, r := range res {
		m, err := s.MessageByOffsetID(r.MsgID)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("U%d", i), m.UniqKey())
		assert.Equal(t, msg(i*3).Body, m.Body)
	}
	ms, err := s.MessagesByKey("Orders", "U3", 0, time.Now().Add(time.Hour).UnixMilli(), 5)
	require.NoError(t, err)
	require.Len(t, ms, 1)

	// It refuses a count that does not match, a missing key and a record
	// that does not fit its piece.
	rec, err := message.AppendUnsealed(nil, msg(0), "U")
	require.NoError(t, err)
	info := func(keys ...string) []store.RecordInfo {
		out := make([]store.RecordInfo, len(keys))
		for i, k := range keys {
			out[i] = store.RecordInfo{UniqKey: []byte(k)}
		}
		return out
	}
	two := append(bytes.Clone(rec), rec...)
	_, err = s.PutBatch(t.Context(), store.Batch{Topic: "Orders", Pieces: [][]byte{two}, Records: info("U")})
	assert.ErrorContains(t, err, "more records")
	_, err = s.PutBatch(t.Context(), store.Batch{Topic: "Orders", Pieces: [][]byte{rec}, Records: info("U", "V")})
	assert.ErrorContains(t, err, "announced")
	_, err = s.PutBatch(t.Context(), store.Batch{Topic: "Orders", Pieces: [][]byte{rec}, Records: info("")})
	assert.ErrorContains(t, err, "UNIQ_KEY")
	_, err = s.PutBatch(t.Context(), store.Batch{Topic: "Orders", Pieces: [][]byte{rec[:40]}, Records: info("U")})
	assert.ErrorContains(t, err, "does not fit")
	_, err = s.PutBatch(t.Context(), store.Batch{Topic: "Orders", Pieces: [][]byte{rec}})
	assert.ErrorContains(t, err, "no records")
	res, err = s.PutBatch(t.Context(), store.Batch{Topic: "Orders", Pieces: [][]byte{rec}, Records: info("U")})
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Equal(t, "U", res[0].UniqKey)
	assert.Equal(t, int64(3), res[0].QueueOffset, "queue 0 held offsets 0, 1 and 2")
}

// Keep drops records of a batch (de-duplicated sends), their pieces, what
// the check read of them and, in a batch of several topics, their topics
// alike.
func TestBatchKeep(t *testing.T) {
	s := openStore(t, testConfig(t, t.TempDir(), nil))
	defer s.Close()
	msgs := []*message.Message{msg(0), msg(1), msg(2), msg(3), msg(4)} // Orders, Payments, Audit, Orders, Payments
	b, err := s.Encode(msgs)
	require.NoError(t, err)
	defer b.Release()
	kept := b.Keep(func(i int) bool { return i != 1 && i != 2 })
	require.Len(t, kept.Records, 3)
	res, err := s.PutBatch(t.Context(), kept)
	require.NoError(t, err)
	require.Len(t, res, 3)
	waitDispatched(t, s)
	for j, i := range []int{0, 3, 4} {
		m, err := s.MessageByOffsetID(res[j].MsgID)
		require.NoError(t, err)
		assert.Equal(t, msgs[i].Topic, m.Topic)
		assert.Equal(t, msgs[i].Body, m.Body)
		assert.Equal(t, res[j].UniqKey, m.UniqKey())
		assert.Equal(t, msgs[i].QueueID, res[j].QueueID)
	}
	_, maxOff := s.QueueOffsets("Audit", 2)
	assert.Zero(t, maxOff, "the dropped Audit record is not stored")
}

// A full disk refusing the index's next file stops dispatching; once it
// has room again, the records already in the log are dispatched without
// any further append (the dispatcher retries on its own). Closing while
// it cannot dispatch does not fail: the next start dispatches the rest.
func TestDispatchRetriesAfterDiskFull(t *testing.T) {
	faults := &fsx.Faults{}
	cfg := testConfig(t, t.TempDir(), fsx.WithFaults(fsx.OS, faults))
	s := openStore(t, cfg)
	putAll(t, s, 0, 20)
	waitDispatched(t, s)

	remove := faults.Add(fsx.Fault{Op: fsx.OpAllocate, Path: "index", Err: syscall.ENOSPC})
	putAll(t, s, 20, 300) // more index entries than one index file holds
	ref := reference(t, s)
	time.Sleep(300 * time.Millisecond)
	require.False(t, equalQueues(s, ref), "the index could not roll, so dispatch stopped")

	remove()
	require.Eventually(t, func() bool { return equalQueues(s, ref) }, 10*time.Second, 10*time.Millisecond,
		"records appended before the disk had room again are dispatched without another append")

	faults.Add(fsx.Fault{Op: fsx.OpAllocate, Path: "index", Err: syscall.ENOSPC})
	putAll(t, s, 320, 300)
	require.NoError(t, s.Close(), "closing with records not dispatched is not an error")
	faults.Clear()
	s = openStore(t, cfg)
	defer s.Close()
	waitDispatched(t, s)
}
