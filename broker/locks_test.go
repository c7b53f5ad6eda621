package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
)

func qref(topic string, id int32) broker.QueueRef { return broker.QueueRef{Topic: topic, QueueID: id} }

// lockBroker opens a broker on a fake clock with topic T (4 queues) and a
// queue lock TTL of 60 s.
func lockBroker(t *testing.T) (*broker.Broker, *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	cfg := testConfig(t)
	cfg.Now, cfg.QueueLockTTL = clock.Now, time.Minute
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 4)
	return b, clock
}

func TestLockQueues(t *testing.T) {
	b, clock := lockBroker(t)
	q0, q1, q2, q3 := qref("T", 0), qref("T", 1), qref("T", 2), qref("T", 3)
	steps := []struct {
		name    string
		advance time.Duration
		group   string
		client  string
		unlock  bool
		queues  []broker.QueueRef
		want    []broker.QueueRef // what the lock call returns
		held    map[broker.QueueRef]string
	}{
		{name: "grant free queues", client: "c1", queues: []broker.QueueRef{q0, q1, q0},
			want: []broker.QueueRef{q0, q1}, held: map[broker.QueueRef]string{q0: "c1", q1: "c1"}},
		{name: "another client is refused while held", client: "c2", queues: []broker.QueueRef{q0, q1, q2},
			want: []broker.QueueRef{q2}, held: map[broker.QueueRef]string{q0: "c1", q1: "c1", q2: "c2"}},
		{name: "renew before the TTL", advance: 59 * time.Second, client: "c1", queues: []broker.QueueRef{q0},
			want: []broker.QueueRef{q0}, held: map[broker.QueueRef]string{q0: "c1", q1: "c1", q2: "c2"}},
		{name: "a lock expires after the TTL", advance: time.Second, client: "c2", queues: []broker.QueueRef{q0, q1},
			want: []broker.QueueRef{q1}, held: map[broker.QueueRef]string{q0: "c1", q1: "c2"}},
		{name: "unlock by a non-holder is ignored", client: "c2", unlock: true, queues: []broker.QueueRef{q0, q3},
			held: map[broker.QueueRef]string{q0: "c1", q1: "c2"}},
		{name: "unlock by the holder", client: "c1", unlock: true, queues: []broker.QueueRef{q0},
			held: map[broker.QueueRef]string{q1: "c2"}},
		{name: "an unlocked queue is free", client: "c2", queues: []broker.QueueRef{q0},
			want: []broker.QueueRef{q0}, held: map[broker.QueueRef]string{q0: "c2", q1: "c2"}},
		{name: "groups lock apart", group: "H", client: "c1", queues: []broker.QueueRef{q0},
			want: []broker.QueueRef{q0}, held: map[broker.QueueRef]string{q0: "c2", q1: "c2"}},
		{name: "everything expires", advance: time.Minute, client: "c3", queues: []broker.QueueRef{q3},
			want: []broker.QueueRef{q3}, held: map[broker.QueueRef]string{q3: "c3"}},
	}
	for _, s := range steps {
		clock.Advance(s.advance)
		group := s.group
		if group == "" {
			group = "G"
		}
		if s.unlock {
			require.NoError(t, b.UnlockQueues(group, s.client, s.queues), s.name)
		} else {
			got, err := b.LockQueues(group, s.client, s.queues)
			require.NoError(t, err, s.name)
			assert.Equal(t, s.want, got, s.name)
		}
		assert.Equal(t, s.held, b.QueueLocks("G"), s.name)
	}
	assert.Equal(t, map[broker.QueueRef]string{}, b.QueueLocks("H"), "H's lock expired too")
}

func TestQueueLocksGoWithTheirClient(t *testing.T) {
	b, clock := lockBroker(t)
	for _, id := range []string{"c1", "c2"} {
		require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: id, Group: "G"}))
	}
	_, err := b.LockQueues("G", "c1", []broker.QueueRef{qref("T", 0), qref("T", 1)})
	require.NoError(t, err)
	_, err = b.LockQueues("G", "c2", []broker.QueueRef{qref("T", 2)})
	require.NoError(t, err)
	_, err = b.LockQueues("H", "c1", []broker.QueueRef{qref("T", 0)})
	require.NoError(t, err)

	b.UnregisterClient("G", "c1")
	assert.Equal(t, map[broker.QueueRef]string{qref("T", 2): "c2"}, b.QueueLocks("G"), "released on unregister")
	assert.Equal(t, map[broker.QueueRef]string{qref("T", 0): "c1"}, b.QueueLocks("H"), "only that group's")
	got, err := b.LockQueues("G", "c2", []broker.QueueRef{qref("T", 0)})
	require.NoError(t, err)
	assert.Equal(t, []broker.QueueRef{qref("T", 0)}, got)

	// c2 renews its locks but stops heartbeating: it expires after 120 s,
	// and its locks go with it although they were renewed.
	for range 4 {
		clock.Advance(30 * time.Second)
		_, err := b.LockQueues("G", "c2", []broker.QueueRef{qref("T", 0), qref("T", 2)})
		require.NoError(t, err)
	}
	assert.Len(t, b.QueueLocks("G"), 2)
	assert.Empty(t, b.ConsumerList("G"), "c2 expired")
	assert.Empty(t, b.QueueLocks("G"), "released on expiry")
}

func TestLockQueuesValidation(t *testing.T) {
	b, _ := lockBroker(t)
	require.NoError(t, b.CreateOrUpdateTopic(metadata.TopicConfig{
		TopicName: "R", ReadQueueNums: 2, WriteQueueNums: 4, Perm: metadata.PermRead | metadata.PermWrite,
	}))
	tests := []struct {
		name          string
		group, client string
		queues        []broker.QueueRef
		wantErr       error
		wantMsg       string
	}{
		{"no client id", "G", "", []broker.QueueRef{qref("T", 0)}, broker.ErrInvalidArgument, "without a client id"},
		{"bad group", "a b", "c", []broker.QueueRef{qref("T", 0)}, broker.ErrInvalidArgument, `group name "a b"`},
		{"unknown topic", "G", "c", []broker.QueueRef{qref("T", 0), qref("Nope", 0)}, broker.ErrTopicNotFound, `"Nope"`},
		{"bad topic", "G", "c", []broker.QueueRef{qref("a b", 0)}, broker.ErrInvalidTopic, `"a b"`},
		{"negative queue", "G", "c", []broker.QueueRef{qref("T", -1)}, broker.ErrInvalidArgument, "queue id -1"},
		{"beyond the queues", "G", "c", []broker.QueueRef{qref("T", 4)}, broker.ErrInvalidArgument, `queue id 4: topic "T" has read queues 0..3`},
		{"a write-only queue", "G", "c", []broker.QueueRef{qref("R", 2)}, broker.ErrInvalidArgument, `queue id 2: topic "R" has read queues 0..1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.LockQueues(tt.group, tt.client, tt.queues)
			require.ErrorIs(t, err, tt.wantErr)
			assert.ErrorContains(t, err, tt.wantMsg)
			err = b.UnlockQueues(tt.group, tt.client, tt.queues)
			require.ErrorIs(t, err, tt.wantErr)
		})
	}
	assert.Empty(t, b.QueueLocks("G"), "a refused request locks nothing")

	require.NoError(t, b.Close(context.Background()))
	_, err := b.LockQueues("G", "c", []broker.QueueRef{qref("T", 0)})
	require.ErrorIs(t, err, broker.ErrShuttingDown)
	require.ErrorIs(t, b.UnlockQueues("G", "c", nil), broker.ErrShuttingDown)
}

// A commit of a queue's offset by a client that lost the queue's lock to
// another is refused: a member killed with its commit in flight, whose
// commit the broker handles only after the queue's new owner locked it and
// read its start offset, cannot move that offset under it (the new owner
// would skip or repeat what it does not know was handled).
func TestCommitHeldOffset(t *testing.T) {
	b, clock := lockBroker(t)
	q := qref("T", 1)
	committed := func() int64 {
		t.Helper()
		off, ok := b.QueryOffset("G", "T", 1)
		require.True(t, ok)
		return off
	}
	_, err := b.LockQueues("G", "dead", []broker.QueueRef{q})
	require.NoError(t, err)
	require.NoError(t, b.CommitHeldOffset("G", "dead", "T", 1, 10), "the holder commits")
	require.NoError(t, b.UnlockQueues("G", "dead", []broker.QueueRef{q})) // its connection closed
	require.NoError(t, b.CommitHeldOffset("G", "dead", "T", 1, 12), "nobody holds it: a commit as before")
	got, err := b.LockQueues("G", "new", []broker.QueueRef{q})
	require.NoError(t, err)
	require.Equal(t, []broker.QueueRef{q}, got)
	start := committed()

	err = b.CommitHeldOffset("G", "dead", "T", 1, 15) // late, from the lost member
	require.ErrorIs(t, err, broker.ErrQueueLocked)
	assert.ErrorContains(t, err, `held by "new", not "dead"`)
	assert.Equal(t, start, committed(), "the new owner's start offset stays")
	require.NoError(t, b.CommitHeldOffset("G", "new", "T", 1, 13))
	assert.Equal(t, int64(13), committed())
	require.NoError(t, b.CommitOffset("G", "T", 1, 14), "commits without a holder are not checked")
	assert.Equal(t, int64(14), committed())

	clock.Advance(time.Minute) // "new"'s lock expired: nobody holds the queue
	require.NoError(t, b.CommitHeldOffset("G", "dead", "T", 1, 16))
	assert.Equal(t, int64(16), committed())
	require.ErrorIs(t, b.CommitHeldOffset("G", "", "T", 1, 17), broker.ErrInvalidArgument)
}
