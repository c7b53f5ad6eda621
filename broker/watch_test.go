package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
)

// pending reports whether a change is pending on w, consuming it.
func pending(w *broker.GroupWatch) bool {
	select {
	case <-w.Changed():
		return true
	default:
		return false
	}
}

func heartbeat(t *testing.T, b *broker.Broker, group string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: id, Group: group}))
	}
}

func watch(t *testing.T, b *broker.Broker, group, clientID string) *broker.GroupWatch {
	t.Helper()
	w, err := b.WatchGroup(group, clientID)
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return w
}

func TestWatchGroupMembership(t *testing.T) {
	var changes changeLog
	cfg := testConfig(t)
	cfg.OnConsumersChanged = changes.add
	b := openBroker(t, cfg)
	heartbeat(t, b, "G", "c1")
	heartbeat(t, b, "H", "x")
	w := watch(t, b, "G", "c1")
	changes.take()

	assert.Equal(t, []string{"c1"}, w.Members(), "the current membership at once")
	assert.False(t, pending(w), "nothing changed since the watch opened")

	heartbeat(t, b, "G", "c2")
	assert.True(t, pending(w), "a join")
	assert.Equal(t, []string{"c1", "c2"}, w.Members())

	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "c2", Group: "G", Ordered: true,
		Assigned: []broker.QueueRef{{Topic: "T", QueueID: 1}}, Subscriptions: []broker.Subscription{{Topic: "T"}}}))
	heartbeat(t, b, "H", "y")
	assert.False(t, pending(w), "a refresh, even with new fields, and another group's join are no change")

	b.UnregisterClient("G", "c2")
	assert.True(t, pending(w), "a leave")
	assert.Equal(t, []string{"c1"}, w.Members())
	assert.Equal(t, []string{"G", "H", "G"}, changes.take())
}

func TestWatchGroupCoalesces(t *testing.T) {
	b := openBroker(t, testConfig(t))
	heartbeat(t, b, "G", "c0")
	w := watch(t, b, "G", "c0")
	heartbeat(t, b, "G", "c1", "c2", "c3") // nobody reads: the broker must not wait
	b.UnregisterClient("G", "c1")
	assert.Len(t, w.Changed(), 1, "one pending change, however many happened")
	assert.True(t, pending(w))
	assert.Equal(t, []string{"c0", "c2", "c3"}, w.Members(), "the latest membership")
	assert.False(t, pending(w))
}

func TestWatchGroupRefused(t *testing.T) {
	b := openBroker(t, testConfig(t))
	heartbeat(t, b, "G", "c1")
	tests := []struct {
		name, group, client string
		wantErr             error
		wantMsg             string
	}{
		{"no heartbeat", "G", "c2", broker.ErrNotRegistered, `client "c2" of group "G": send a heartbeat first`},
		{"heartbeat into another group", "H", "c1", broker.ErrNotRegistered, `"c1" of group "H"`},
		{"no client id", "G", "", broker.ErrInvalidArgument, "without a client id"},
		{"bad group", "a b", "c1", broker.ErrInvalidArgument, `group name "a b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.WatchGroup(tt.group, tt.client)
			require.ErrorIs(t, err, tt.wantErr)
			assert.ErrorContains(t, err, tt.wantMsg)
		})
	}
}

// A client stays registered while any of its watches is open; the end of
// its last one unregisters it at once, releases its locks and tells the
// other watches.
func TestWatchEndUnregisters(t *testing.T) {
	var changes changeLog
	cfg := testConfig(t)
	cfg.OnConsumersChanged = changes.add
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 2)
	heartbeat(t, b, "G", "c1", "c2")
	w1 := watch(t, b, "G", "c1")
	w2a := watch(t, b, "G", "c2")
	w2b := watch(t, b, "G", "c2")
	_, err := b.LockQueues("G", "c2", []broker.QueueRef{qref("T", 0)})
	require.NoError(t, err)
	changes.take()

	w2a.Close()
	assert.Equal(t, []string{"c1", "c2"}, b.ConsumerList("G"), "c2's second watch keeps it registered")
	assert.Equal(t, map[broker.QueueRef]string{qref("T", 0): "c2"}, b.QueueLocks("G"))
	assert.False(t, pending(w1))

	w2b.Close()
	assert.Equal(t, []string{"c1"}, b.ConsumerList("G"), "the last watch's end unregisters")
	assert.Empty(t, b.QueueLocks("G"), "and releases the locks")
	assert.True(t, pending(w1), "the others are told")
	assert.Equal(t, []string{"c1"}, w1.Members())
	assert.Equal(t, []string{"G"}, changes.take())

	w2b.Close() // idempotent
	heartbeat(t, b, "G", "c2")
	w2c := watch(t, b, "G", "c2")
	assert.True(t, pending(w1), "c2 is back")
	w2c.Close()
	assert.Equal(t, []string{"c1"}, b.ConsumerList("G"))
}

// Heartbeats still decide liveness: a silent client expires with a watch
// open, the watches hear of it, and its next heartbeat brings it back.
func TestWatchedClientExpires(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig(t)
	cfg.Now = clock.Now
	b := openBroker(t, cfg)
	heartbeat(t, b, "G", "c1", "c2")
	w1 := watch(t, b, "G", "c1")
	w2 := watch(t, b, "G", "c2")
	clock.Advance(100 * time.Second)
	heartbeat(t, b, "G", "c1")
	clock.Advance(20 * time.Second)
	assert.Equal(t, []string{"c1"}, b.ConsumerList("G"), "c2 expired")
	assert.True(t, pending(w1))
	assert.True(t, pending(w2))
	heartbeat(t, b, "G", "c2")
	assert.True(t, pending(w1))
	assert.Equal(t, []string{"c1", "c2"}, w1.Members())
}

func TestWatchEndsOnClose(t *testing.T) {
	b := openBroker(t, testConfig(t))
	heartbeat(t, b, "G", "c1")
	w := watch(t, b, "G", "c1")
	require.NoError(t, b.Close(context.Background()))
	select {
	case _, ok := <-w.Changed():
		assert.False(t, ok, "closed, not a change")
	case <-time.After(5 * time.Second):
		t.Fatal("Changed was not closed by Close")
	}
	_, err := b.WatchGroup("G", "c1")
	require.ErrorIs(t, err, broker.ErrShuttingDown)
	w.Close() // after Close: fine
}
