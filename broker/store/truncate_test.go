package store_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// TestReopenAfterLogTruncation: a replica's store is closed, its commit
// log cut (commitlog.Truncate, as a rejoining replica does) and the store
// reopened: the consume-queue and index entries of the cut records are
// gone, the kept ones answer as before, and each queue's next message
// takes the queue offset the first cut one had.
func TestReopenAfterLogTruncation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash bool // the store was not closed: no clean dispatch checkpoint
	}{
		{"after a clean close", false},
		{"after a crash", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := fsx.NewMemFS()
			cfg := testConfig(t, "/store", mem)
			s := openStore(t, cfg)
			res := putAll(t, s, 0, 400) // several log segments, every queue's files
			waitDispatched(t, s)
			fs := mem
			if tc.crash {
				require.NoError(t, s.CommitLog().Flush())
				fs = mem.Crash(nil)
				cfg.FS = fs
			}
			require.NoError(t, s.Close())

			cut := 250
			at := res[cut].PhysicalOffset
			lc := cfg.Log
			lc.Dir, lc.StateDir, lc.FS = filepath.Join(cfg.Root, "commitlog"), cfg.Root, fs
			rep, err := commitlog.Truncate(t.Context(), lc, at, "test")
			require.NoError(t, err)
			require.Equal(t, len(res)-cut, rep.Records)

			s = openStore(t, cfg)
			defer s.Close()
			require.Equal(t, at, s.CommitLog().MaxOffset())
			waitDispatched(t, s) // every queue equals the one built from the log

			firstCut := map[store.QueueKey]int64{}
			kept := map[store.QueueKey]int64{}
			for i, r := range res {
				k := store.QueueKey{Topic: topics[i%3], QueueID: r.QueueID}
				if i < cut {
					kept[k] = r.QueueOffset + 1
					continue
				}
				if _, ok := firstCut[k]; !ok {
					firstCut[k] = r.QueueOffset
				}
			}
			far := time.Now().Add(time.Hour).UnixMilli()
			for i, r := range res {
				ms, err := s.MessagesByKey(topics[i%3], fmt.Sprintf("k%d", i), 0, far, 10)
				require.NoError(t, err)
				if i < cut {
					require.Len(t, ms, 1, "message %d was kept", i)
					assert.Equal(t, r.PhysicalOffset, ms[0].PhysicalOffset)
				} else {
					assert.Empty(t, ms, "message %d was cut: its index entry is gone", i)
				}
			}
			for k, next := range firstCut {
				_, maxOff := s.QueueOffsets(k.Topic, k.QueueID)
				require.Equal(t, kept[k], maxOff, "queue %v ends after its kept entries", k)
				require.Equal(t, next, maxOff)
				m := msg(0)
				m.Topic, m.QueueID = k.Topic, k.QueueID
				got, err := putMsgs(t.Context(), s, []*message.Message{m})
				require.NoError(t, err)
				assert.Equal(t, next, got[0].QueueOffset, "queue %v: the next message takes the first cut one's queue offset", k)
			}
			waitDispatched(t, s)
		})
	}
}

// TestReplicaFromMastersFirstSegment: a replica whose log is reset to
// start where its master's retained log does (ResetLog) and then takes
// the master's bytes from there builds every queue from the queue offset
// of its first record there: each message answers at the master's queue
// offset, and the queues end where the master's do.
func TestReplicaFromMastersFirstSegment(t *testing.T) {
	master := openStore(t, testConfig(t, t.TempDir(), nil))
	defer master.Close()
	res := putAll(t, master, 0, 1500) // several segments of 64 KiB
	waitDispatched(t, master)
	seg := master.CommitLog().SegmentBytes()
	from := 2 * seg
	require.Greater(t, master.CommitLog().MaxOffset(), from+seg, "the master's log spans more than 3 segments")

	cfg := testConfig(t, t.TempDir(), nil)
	rep, err := store.ResetLog(t.Context(), cfg, from, "test")
	require.NoError(t, err)
	assert.Zero(t, rep.Records, "an empty replica")
	replica := openStore(t, cfg)
	require.Equal(t, from, replica.CommitLog().MinOffset())
	buf := make([]byte, 256<<10)
	for off := from; off < master.CommitLog().MaxOffset(); {
		data, next, err := master.CommitLog().CopyReplica(off, buf, len(buf))
		require.NoError(t, err)
		_, err = replica.CommitLog().AppendReplica(t.Context(), off, data)
		require.NoError(t, err)
		off = next
	}
	require.Eventually(t, func() bool { return replica.DispatchedOffset() >= master.CommitLog().MaxOffset() }, 5*time.Second, time.Millisecond)

	held := 0
	for i, r := range res {
		m, err := replica.MessageByQueueOffset(topics[i%3], r.QueueID, r.QueueOffset)
		if r.PhysicalOffset < from {
			assert.Error(t, err, "message %d lies before the replica's log", i)
			continue
		}
		held++
		require.NoError(t, err, "message %d", i)
		assert.Equal(t, r.PhysicalOffset, m.PhysicalOffset)
		assert.Equal(t, msg(i).Body, m.Body)
	}
	assert.Positive(t, held)
	for _, tp := range topics {
		for q := range int32(4) {
			_, want := master.QueueOffsets(tp, q)
			_, got := replica.QueueOffsets(tp, q)
			assert.Equal(t, want, got, "queue %s/%d ends where the master's does", tp, q)
		}
	}
	// Reopened, it recovers the same queues.
	require.NoError(t, replica.Close())
	replica = openStore(t, cfg)
	defer replica.Close()
	m, err := replica.MessageByQueueOffset(topics[1499%3], res[1499].QueueID, res[1499].QueueOffset)
	require.NoError(t, err)
	assert.Equal(t, res[1499].PhysicalOffset, m.PhysicalOffset)
}
