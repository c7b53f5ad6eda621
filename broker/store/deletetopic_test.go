package store_test

import (
	"errors"
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

// bodies returns every body of a queue, in order.
func bodies(t *testing.T, s *store.Store, topic string, qid int32) []string {
	t.Helper()
	var out []string
	for off := int64(0); ; {
		g, err := s.Get(topic, qid, off, 16, 1<<20, nil)
		require.NoError(t, err)
		if g.Status != store.Found {
			return out
		}
		for _, rec := range g.Records {
			m, _, err := message.Decode(rec.B)
			require.NoError(t, err)
			out = append(out, string(m.Body))
		}
		g.Release()
		off = g.NextOffset
	}
}

func deleteTopic(s *store.Store, topic string) error {
	if err := s.BeginDeleteTopic(topic); err != nil {
		return err
	}
	if err := s.DeleteTopic(topic); err != nil {
		return err
	}
	return s.EndDeleteTopic(topic)
}

func putOne(t *testing.T, s *store.Store, topic string, qid int32, body, key string) store.PutResult {
	t.Helper()
	res, err := putMsgs(t.Context(), s, []*message.Message{{Topic: topic, QueueID: qid, Body: []byte(body),
		Properties: message.Properties{{Key: message.PropKeys, Value: key}}}})
	require.NoError(t, err)
	return res[0]
}

// checkDeleted asserts that Orders shows none of its deleted messages,
// that its queue directories are gone, and that the other topics are whole.
func checkDeleted(t *testing.T, s *store.Store, mem *fsx.MemFS, others map[store.QueueKey]int64) {
	t.Helper()
	far := time.Now().Add(time.Hour).UnixMilli()
	for q := range int32(4) {
		minOff, maxOff := s.QueueOffsets("Orders", q)
		assert.Zero(t, minOff, "queue %d", q)
		assert.Zero(t, maxOff, "queue %d", q)
		assert.Empty(t, bodies(t, s, "Orders", q))
	}
	_, err := mem.ReadDir(filepath.Join("/store", "consumequeue", "Orders"))
	assert.Error(t, err, "the topic's queue directory is gone")
	ms, err := s.MessagesByKey("Orders", "order-0", 0, far, 100)
	require.NoError(t, err)
	assert.Empty(t, ms, "key lookups find no deleted message")
	found := false
	_, found, err = s.FindByKey("Orders", []byte("k0"), 0, far, func(message.View) bool { return true })
	require.NoError(t, err)
	assert.False(t, found)
	for k, n := range others {
		_, maxOff := s.QueueOffsets(k.Topic, k.QueueID)
		assert.Equal(t, n, maxOff, "%s is untouched", k)
	}
	ms, err = s.MessagesByKey("Payments", "k1", 0, far, 10)
	require.NoError(t, err)
	assert.Len(t, ms, 1, "other topics' lookups still work")
}

// settled returns a store holding 120 messages of msg, stopped cleanly
// once (the log synced, a dispatch checkpoint written) and opened again.
func settled(t *testing.T, cfg store.Config) *store.Store {
	t.Helper()
	s := openStore(t, cfg)
	putAll(t, s, 0, 120)
	waitDispatched(t, s)
	require.NoError(t, s.Close())
	return openStore(t, cfg)
}

func otherQueues(s *store.Store) map[store.QueueKey]int64 {
	out := map[store.QueueKey]int64{}
	for _, k := range s.Queues() {
		if k.Topic != "Orders" {
			_, out[k] = s.QueueOffsets(k.Topic, k.QueueID)
		}
	}
	return out
}

// A deleted topic's queues, files, counters and key lookups go; the name
// starts again at offset 0, across a restart, a power cut and a rebuild
// of every queue from the whole log.
func TestDeleteTopicStartsEmpty(t *testing.T) {
	mem := fsx.NewMemFS()
	cfg := testConfig(t, "/store", mem)
	cfg.FlushInterval = time.Hour
	cfg.Log.FlushMode = commitlog.SyncFlush
	s := settled(t, cfg)
	others := otherQueues(s)
	require.NoError(t, deleteTopic(s, "Orders"))
	require.NoError(t, deleteTopic(s, "Orders"), "idempotent")
	checkDeleted(t, s, mem, others)

	r := putOne(t, s, "Orders", 0, "new-0", "order-0")
	assert.Equal(t, int64(0), r.QueueOffset, "the name starts at offset 0")
	require.Eventually(t, func() bool { return len(bodies(t, s, "Orders", 0)) == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"new-0"}, bodies(t, s, "Orders", 0))
	var ms []*message.Message
	require.Eventually(t, func() bool { // the key index may follow the queue a little
		var err error
		ms, err = s.MessagesByKey("Orders", "order-0", 0, time.Now().Add(time.Hour).UnixMilli(), 100)
		require.NoError(t, err)
		return len(ms) == 1
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, "new-0", string(ms[0].Body))
	assert.Contains(t, s.DeletedTopics(), "Orders")
	assert.Empty(t, s.PendingTopicDeletions())

	crash := mem.Crash(nil) // a power cut: what was synced
	require.NoError(t, s.Close())
	for name, fs := range map[string]*fsx.MemFS{"clean stop": mem, "power cut": crash} {
		t.Run(name, func(t *testing.T) {
			c := cfg
			c.FS = fs
			s := openStore(t, c)
			defer s.Close()
			assert.Equal(t, []string{"new-0"}, bodies(t, s, "Orders", 0))
			r := putOne(t, s, "Orders", 0, "new-1", "x")
			assert.Equal(t, int64(1), r.QueueOffset)
			for q := int32(1); q < 4; q++ {
				_, maxOff := s.QueueOffsets("Orders", q)
				assert.Zero(t, maxOff)
			}
		})
	}

	// Without its derived data the store rebuilds every queue from the
	// whole log, which still holds the deleted records.
	snap := mem.Snapshot()
	require.NoError(t, store.RemoveTree(snap, "/store/consumequeue"))
	require.NoError(t, snap.Remove("/store/dispatch.json"))
	c := cfg
	c.FS = snap
	s = openStore(t, c)
	defer s.Close()
	assert.True(t, s.Recovery().Rebuilt)
	assert.Equal(t, []string{"new-0", "new-1"}, bodies(t, s, "Orders", 0))
	assert.Equal(t, others, otherQueues(s))
}

// A deletion stopped at each of its steps (an error there, then a kill or
// a power cut) is finished by the next Open: the queues and their files
// go, the name starts at 0, the other topics are whole, and the deletion
// is reported pending until EndDeleteTopic.
func TestDeleteTopicCrashMidway(t *testing.T) {
	for _, at := range []string{"begun", "fenced", "files-removed", "ended"} {
		t.Run(at, func(t *testing.T) {
			mem := fsx.NewMemFS()
			cfg := testConfig(t, "/store", mem)
			cfg.FlushInterval = time.Hour
			s := settled(t, cfg)
			others := otherQueues(s)
			stop := errors.New("crash")
			restore := store.SetDeleteStep(func(step string) error {
				if step == at {
					return stop
				}
				return nil
			})
			require.NoError(t, s.BeginDeleteTopic("Orders"))
			err := stop
			if at != "begun" {
				err = s.DeleteTopic("Orders")
				if at == "ended" {
					require.NoError(t, err)
					err = s.EndDeleteTopic("Orders")
				}
			}
			restore()
			if at != "ended" {
				require.ErrorIs(t, err, stop)
			}
			kill, cut := mem.Snapshot(), mem.Crash(nil)
			require.NoError(t, s.Close())
			for name, fs := range map[string]*fsx.MemFS{"kill": kill, "power cut": cut} {
				c := cfg
				c.FS = fs
				s := openStore(t, c)
				if at == "ended" {
					assert.Empty(t, s.PendingTopicDeletions(), name)
				} else {
					assert.Equal(t, []string{"Orders"}, s.PendingTopicDeletions(), name)
				}
				assert.False(t, s.Recovery().Rebuilt, "%s: %s", name, s.Recovery().RebuildReason)
				checkDeleted(t, s, fs, others)
				require.NoError(t, s.EndDeleteTopic("Orders"))
				assert.Empty(t, s.PendingTopicDeletions())
				r := putOne(t, s, "Orders", 2, "new", "k")
				assert.Equal(t, int64(0), r.QueueOffset, name)
				require.NoError(t, s.Close())
			}
		})
	}
}

// Records of a topic stored while its deletion runs are not lost to
// readers of the next incarnation's counters: the queue stays dense.
func TestDeleteTopicUnderLoad(t *testing.T) {
	s := openStore(t, testConfig(t, t.TempDir(), nil))
	defer s.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 300 {
			_, err := putMsgs(t.Context(), s, []*message.Message{{Topic: "Orders", QueueID: 0, Body: fmt.Appendf(nil, "%d", i)}})
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 5 {
		require.NoError(t, deleteTopic(s, "Orders"))
	}
	<-done
	require.Eventually(t, func() bool { return s.DispatchedOffset() >= s.CommitLog().MaxOffset() }, 5*time.Second, time.Millisecond)
	_, maxOff := s.QueueOffsets("Orders", 0)
	got := bodies(t, s, "Orders", 0)
	assert.Len(t, got, int(maxOff), "every offset of the surviving incarnation is readable")
}

// A tombstone is forgotten once retention has deleted every segment
// below it, not before.
func TestDeleteTopicTombstoneForgottenAfterRetention(t *testing.T) {
	mem := fsx.NewMemFS()
	cfg := testConfig(t, "/store", mem)
	cfg.Log.FileReservedTime = time.Nanosecond
	cfg.Log.DeleteWhen = "0;1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18;19;20;21;22;23"
	s := openStore(t, cfg)
	defer func() { _ = s.Close() }()
	putAll(t, s, 0, 300)
	waitDispatched(t, s)
	require.NoError(t, deleteTopic(s, "Orders"))
	s.ForgetDeleted()
	require.Contains(t, s.DeletedTopics(), "Orders", "the log still holds its records")
	before := s.DeletedTopics()["Orders"]

	for i := 0; s.CommitLog().MaxOffset() < before+2*s.CommitLog().SegmentBytes(); i++ {
		putOne(t, s, "Payments", 0, "filler", fmt.Sprint("f", i))
	}
	require.Eventually(t, func() bool { return s.DispatchedOffset() >= s.CommitLog().MaxOffset() }, 5*time.Second, time.Millisecond)
	_, err := s.CommitLog().Clean()
	require.NoError(t, err)
	require.GreaterOrEqual(t, s.CommitLog().MinOffset(), before)
	s.ForgetDeleted()
	assert.NotContains(t, s.DeletedTopics(), "Orders")
	saved, err := mem.ReadAll("/store/deletedTopics.json")
	require.NoError(t, err)
	assert.NotContains(t, string(saved), "Orders")
}
