package store_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/index"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// keyedMsg is a message of topic with UNIQ_KEY uniq and the extra
// property pairs props.
func keyedMsg(topic, uniq string, props ...string) *message.Message {
	m := &message.Message{Topic: topic, Body: []byte("b"), Properties: message.Properties{{Key: message.PropUniqKey, Value: uniq}}}
	for i := 0; i+1 < len(props); i += 2 {
		m.Properties = append(m.Properties, message.Property{Key: props[i], Value: props[i+1]})
	}
	return m
}

// anyRecord is a FindByKey match that accepts every candidate.
func anyRecord(message.View) bool { return true }

// recordKey is a FindByKey match that accepts a record of topic (or parked
// for it) whose IDEMPOTENCY_KEY, else UNIQ_KEY, is key.
func recordKey(topic, key string) func(message.View) bool {
	return func(v message.View) bool {
		var uniq, idem, real []byte
		for k, val := range v.All() {
			switch string(k) {
			case message.PropUniqKey:
				uniq = val
			case message.PropIdempotencyKey:
				idem = val
			case message.PropRealTopic:
				real = val
			}
		}
		if len(idem) == 0 {
			idem = uniq
		}
		return (string(v.Topic()) == topic || string(real) == topic) && string(idem) == key
	}
}

// FindByKey finds a record by its UNIQ_KEY, its KEYS and its
// IDEMPOTENCY_KEY, a parked one under its REAL_TOPIC, the oldest that
// match accepts first, only within the time range, and with the result
// Put reported.
func TestFindByKey(t *testing.T) {
	var now atomic.Int64
	now.Store(1_700_000_000_000)
	cfg := testConfig(t, t.TempDir(), nil)
	cfg.Now = func() time.Time { return time.UnixMilli(now.Load()) }
	s := openStore(t, cfg)
	defer s.Close()
	put := func(m *message.Message) store.PutResult {
		t.Helper()
		res, err := putMsgs(t.Context(), s, []*message.Message{m})
		require.NoError(t, err)
		return res[0]
	}
	plain := put(keyedMsg("Orders", "U1", message.PropKeys, "k1 shared"))
	idem := put(keyedMsg("Orders", "U2", message.PropIdempotencyKey, "pay-2", message.PropKeys, "shared"))
	parked := put(keyedMsg("SCHEDULE_TOPIC_XXXX", "U3", message.PropRealTopic, "Orders", message.PropIdempotencyKey, "pay-3"))
	retry := put(keyedMsg("SCHEDULE_TOPIC_XXXX", "U5", message.PropRealTopic, "%RETRY%g", message.PropKeys, "k5"))
	now.Add(2000)
	later := put(keyedMsg("Orders", "U4", message.PropKeys, "shared"))
	other := put(keyedMsg("Payments", "U1"))
	require.Eventually(t, func() bool { return s.DispatchedOffset() == s.CommitLog().MaxOffset() }, 5*time.Second, time.Millisecond)

	all := int64(1 << 62)
	find := func(topic, key string, begin int64, match func(message.View) bool) (store.PutResult, bool) {
		t.Helper()
		r, ok, err := s.FindByKey(topic, []byte(key), begin, all, match)
		require.NoError(t, err)
		return r, ok
	}
	r, ok := find("Orders", "U1", 0, anyRecord)
	require.True(t, ok)
	assert.Equal(t, plain, r, "the result Put reported")
	r, ok = find("Payments", "U1", 0, anyRecord)
	require.True(t, ok)
	assert.Equal(t, other, r, "keys count per topic")
	r, ok = find("Orders", "k1", 0, anyRecord)
	require.True(t, ok)
	assert.Equal(t, plain.PhysicalOffset, r.PhysicalOffset, "by KEYS")
	r, ok = find("Orders", "pay-2", 0, anyRecord)
	require.True(t, ok)
	assert.Equal(t, idem, r, "by IDEMPOTENCY_KEY")
	r, ok = find("Orders", "pay-3", 0, recordKey("Orders", "pay-3"))
	require.True(t, ok)
	assert.Equal(t, parked, r, "a parked record under its REAL_TOPIC")
	_, ok = find("Orders", "U3", 0, anyRecord)
	assert.False(t, ok, "a parked record is indexed under REAL_TOPIC by its IDEMPOTENCY_KEY only")
	r, ok = find("SCHEDULE_TOPIC_XXXX", "U3", 0, anyRecord)
	require.True(t, ok)
	assert.Equal(t, parked, r, "and under its own topic as before")

	for _, tk := range [][2]string{{"SCHEDULE_TOPIC_XXXX", "U5"}, {"SCHEDULE_TOPIC_XXXX", "k5"}, {"%RETRY%g", "U5"}} {
		_, ok = find(tk[0], tk[1], 0, anyRecord)
		assert.False(t, ok, "a parked retry is not indexed: %s#%s", tk[0], tk[1])
	}
	got, err := s.MessageByOffsetID(retry.MsgID)
	require.NoError(t, err, "it is stored all the same")
	assert.Equal(t, "U5", got.UniqKey())

	r, ok = find("Orders", "shared", 0, anyRecord)
	require.True(t, ok)
	assert.Equal(t, plain.PhysicalOffset, r.PhysicalOffset, "the oldest first")
	r, ok = find("Orders", "shared", 0, func(v message.View) bool { return v.QueueOffset() > plain.QueueOffset })
	require.True(t, ok)
	assert.Equal(t, idem.PhysicalOffset, r.PhysicalOffset, "the oldest that match accepts")
	r, ok = find("Orders", "shared", later.StoreTimestamp, anyRecord)
	require.True(t, ok)
	assert.Equal(t, later, r, "only within the range")
	_, ok = find("Orders", "shared", later.StoreTimestamp+1, anyRecord)
	assert.False(t, ok)
	_, ok = find("Orders", "nope", 0, anyRecord)
	assert.False(t, ok)
}

// A record with an IDEMPOTENCY_KEY equal to its UNIQ_KEY or to one of its
// KEYS gets no extra index entry, and is still found by it.
func TestFindByKeyIndexesOnce(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), nil)
	s := openStore(t, cfg)
	defer s.Close()
	res, err := putMsgs(t.Context(), s, []*message.Message{
		keyedMsg("Orders", "U1", message.PropIdempotencyKey, "U1"),
		keyedMsg("Orders", "U2", message.PropIdempotencyKey, "k", message.PropKeys, "j k"),
	})

	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.DispatchedOffset() == s.CommitLog().MaxOffset() }, 5*time.Second, time.Millisecond)
	for i, key := range []string{"U1", "k"} {
		r, ok, err := s.FindByKey("Orders", []byte(key), 0, 1<<62, anyRecord)
		require.NoError(t, err)
		require.True(t, ok, key)
		assert.Equal(t, res[i], r, key)
	}
	require.NoError(t, s.Close())
	// Entries: U1; j, k, U2. One more would have put the UNIQ_KEY of the
	// first record in the index twice; the index files say how many.
	entries := indexEntries(t, cfg.Root)
	assert.Equal(t, 4, entries)
}

// Open returns with every recovered record dispatched and indexed: after
// a clean close, or rebuilt from the whole log without the index or the
// dispatch checkpoint.
func TestFindByKeyAfterReopen(t *testing.T) {
	for _, drop := range []string{"", "index", "dispatch.json"} {
		t.Run("drop="+drop, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir(), nil)
			s := openStore(t, cfg)
			var want []store.PutResult
			for i := range 60 {
				res, err := putMsgs(t.Context(), s, []*message.Message{keyedMsg("Orders", fmt.Sprint("U", i),
					message.PropIdempotencyKey, fmt.Sprint("pay-", i))})

				require.NoError(t, err)
				want = append(want, res[0])
			}
			require.NoError(t, s.Close())
			if drop != "" {
				require.NoError(t, os.RemoveAll(filepath.Join(cfg.Root, drop)))
			}

			s = openStore(t, cfg)
			defer s.Close()
			assert.Equal(t, drop != "", s.Recovery().Rebuilt)
			assert.Equal(t, s.CommitLog().MaxOffset(), s.DispatchedOffset(), "Open dispatches every record")
			for i, w := range want {
				key := fmt.Sprint("pay-", i)
				r, ok, err := s.FindByKey("Orders", []byte(key), 0, 1<<62, recordKey("Orders", key))
				require.NoError(t, err)
				require.True(t, ok, key)
				assert.Equal(t, w, r, key)
			}
		})
	}
}

// indexEntries counts the entries of the index files under root.
func indexEntries(t *testing.T, root string) int {
	t.Helper()
	dir := filepath.Join(root, "index")
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	n := 0
	for _, e := range names {
		h, err := index.ScanFile(fsx.OS, filepath.Join(dir, e.Name()), nil, nil)
		require.NoError(t, err)
		n += int(h.Count) - 1
	}
	return n
}

// WaitDispatched returns once the dispatcher has passed the offset, woken
// by it however long the deadline, and reports false when the deadline
// passes first.
func TestWaitDispatched(t *testing.T) {
	s := openStore(t, testConfig(t, t.TempDir(), nil))
	defer s.Close()
	release := sync.OnceFunc(s.HoldDispatch())
	defer release() // before Close, which waits for the dispatcher
	putAll(t, s, 0, 10)
	end := s.PutEnd()
	require.Less(t, s.DispatchedOffset(), end, "the dispatcher is held")
	assert.False(t, s.WaitDispatched(t.Context(), end, 10*time.Millisecond), "the deadline passes first")

	done := make(chan bool)
	go func() { done <- s.WaitDispatched(t.Context(), end, time.Minute) }()
	release()
	assert.True(t, <-done, "woken by the dispatcher")
	assert.GreaterOrEqual(t, s.DispatchedOffset(), end)
	assert.True(t, s.WaitDispatched(t.Context(), end, 0), "already passed")
}
