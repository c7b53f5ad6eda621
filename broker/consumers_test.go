package broker_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
)

// changeLog records OnConsumersChanged calls.
type changeLog struct {
	mu     sync.Mutex
	groups []string
}

func (c *changeLog) add(g string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.groups = append(c.groups, g)
}

func (c *changeLog) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.groups
	c.groups = nil
	return out
}

func TestHeartbeatConsumerList(t *testing.T) {
	var changes changeLog
	cfg := testConfig(t)
	cfg.OnConsumersChanged = changes.add
	b := openBroker(t, cfg)
	subs := []broker.Subscription{{Topic: "T", Expression: "A || B"}}
	for _, id := range []string{"c2", "c1", "c3"} {
		require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: id, Group: "G", Subscriptions: subs}))
	}
	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "c1", Group: "G", Subscriptions: subs}))
	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "x", Group: "H"}))
	assert.Equal(t, []string{"c1", "c2", "c3"}, b.ConsumerList("G"))
	assert.Equal(t, []string{"x"}, b.ConsumerList("H"))
	assert.Empty(t, b.ConsumerList("Nobody"))
	assert.Equal(t, []string{"G", "G", "G", "H"}, changes.take(), "a refresh is not a change")

	cs := b.Consumers("G")
	require.Len(t, cs, 3)
	assert.Equal(t, "c1", cs[0].ClientID)
	assert.Equal(t, subs, cs[0].Subscriptions)

	b.UnregisterClient("G", "c2")
	b.UnregisterClient("G", "c2")
	assert.Equal(t, []string{"c1", "c3"}, b.ConsumerList("G"))
	assert.Equal(t, []string{"G"}, changes.take())

	tc, ok := b.Topic(broker.RetryTopic("G"))
	require.True(t, ok, "the group's retry topic is created")
	assert.Equal(t, int32(1), tc.WriteQueueNums)
	_, ok = b.Store().Metadata().Group("G")
	assert.True(t, ok, "the group is created")
}

func TestConsumerExpiry(t *testing.T) {
	clock := newFakeClock()
	var changes changeLog
	cfg := testConfig(t)
	cfg.Now, cfg.OnConsumersChanged = clock.Now, changes.add
	b := openBroker(t, cfg)
	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "old", Group: "G"}))
	clock.Advance(60 * time.Second)
	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "new", Group: "G"}))
	changes.take()

	clock.Advance(59 * time.Second)
	assert.Equal(t, []string{"new", "old"}, b.ConsumerList("G"), "119 s of silence")
	clock.Advance(time.Second)
	assert.Equal(t, []string{"new"}, b.ConsumerList("G"), "120 s of silence: expired")
	assert.Equal(t, []string{"G"}, changes.take())

	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "new", Group: "G"}))
	clock.Advance(119 * time.Second)
	assert.Equal(t, []string{"new"}, b.ConsumerList("G"), "a heartbeat refreshes")
	clock.Advance(time.Second)
	assert.Empty(t, b.ConsumerList("G"))
	assert.Equal(t, []string{"G"}, changes.take())
}

// Lookups skip the scan for silent clients until the first may have
// expired; joins and refreshes after a lookup still expire on time.
func TestConsumerExpiryBetweenLookups(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig(t)
	cfg.Now = clock.Now
	b := openBroker(t, cfg)
	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "a", Group: "G"}))
	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "r", Group: "G"}))
	assert.Equal(t, []string{"a", "r"}, b.ConsumerList("G"))
	clock.Advance(50 * time.Second)
	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "r", Group: "G"})) // refreshed: expires at 170 s
	clock.Advance(50 * time.Second)
	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "b", Group: "H"})) // joins: expires at 220 s
	assert.Equal(t, []string{"a", "r"}, b.ConsumerList("G"))
	clock.Advance(20*time.Second - time.Nanosecond)
	assert.Equal(t, []string{"a", "r"}, b.ConsumerList("G"))
	clock.Advance(time.Nanosecond) // 120 s
	assert.Equal(t, []string{"r"}, b.ConsumerList("G"))
	clock.Advance(50*time.Second - time.Nanosecond)
	assert.Equal(t, []string{"r"}, b.ConsumerList("G"))
	clock.Advance(time.Nanosecond) // 170 s
	assert.Empty(t, b.ConsumerList("G"))
	clock.Advance(50*time.Second - time.Nanosecond)
	assert.Equal(t, []string{"b"}, b.ConsumerList("H"))
	clock.Advance(time.Nanosecond) // 220 s
	assert.Empty(t, b.ConsumerList("H"))
}

func TestHeartbeatValidation(t *testing.T) {
	cfg := testConfig(t)
	off := false
	cfg.AutoCreateSubscriptionGroup = &off
	b := openBroker(t, cfg)
	tests := []struct {
		name    string
		hb      broker.Heartbeat
		wantErr error
		wantMsg string
	}{
		{"no client id", broker.Heartbeat{Group: "G"}, broker.ErrInvalidArgument, "without a client id"},
		{"bad group", broker.Heartbeat{ClientID: "c", Group: ""}, broker.ErrInvalidArgument, `group name ""`},
		{"bad topic", broker.Heartbeat{ClientID: "c", Group: "G", Subscriptions: []broker.Subscription{{Topic: "a b"}}}, broker.ErrInvalidTopic, `"a b"`},
		{"bad expression", broker.Heartbeat{ClientID: "c", Group: "G", Subscriptions: []broker.Subscription{{Topic: "T", Expression: "A||"}}}, broker.ErrInvalidArgument, "empty tag"},
		{"bad model", broker.Heartbeat{ClientID: "c", Group: "G", Model: 7}, broker.ErrInvalidArgument, "consume model 7"},
		{"bad assigned topic", broker.Heartbeat{ClientID: "c", Group: "G", Assigned: []broker.QueueRef{{Topic: "a b"}}}, broker.ErrInvalidTopic, `"a b"`},
		{"negative assigned queue", broker.Heartbeat{ClientID: "c", Group: "G", Assigned: []broker.QueueRef{{Topic: "T", QueueID: -1}}}, broker.ErrInvalidArgument, "assigned queue id -1"},
		{"unknown group", broker.Heartbeat{ClientID: "c", Group: "G"}, broker.ErrGroupNotFound, `"G"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := b.Heartbeat(tt.hb)
			require.ErrorIs(t, err, tt.wantErr)
			assert.ErrorContains(t, err, tt.wantMsg)
		})
	}
	assert.Empty(t, b.ConsumerList("G"))
	assert.False(t, slices.ContainsFunc(b.Topics(), func(tc metadata.TopicConfig) bool { return tc.TopicName == "%RETRY%G" }))
}

// A heartbeat replaces what the client said before; only a change of the
// set of client ids is a membership change.
func TestHeartbeatRefreshesFields(t *testing.T) {
	clock := newFakeClock()
	var changes changeLog
	cfg := testConfig(t)
	cfg.Now, cfg.OnConsumersChanged = clock.Now, changes.add
	b := openBroker(t, cfg)
	first := broker.Heartbeat{
		ClientID: "10.0.0.1@42", Group: "G", Model: broker.Broadcasting, Ordered: true, Addr: "10.0.0.1:5000",
		Subscriptions: []broker.Subscription{{Topic: "T", Expression: "*"}},
		Assigned:      []broker.QueueRef{{Topic: "T", QueueID: 0}, {Topic: "T", QueueID: 3}},
	}
	require.NoError(t, b.Heartbeat(first))
	t0 := clock.Now()
	assert.Equal(t, []broker.Consumer{{
		ClientID: "10.0.0.1@42", Addr: "10.0.0.1:5000", Model: broker.Broadcasting, Ordered: true, LastHeartbeat: t0,
		Subscriptions: first.Subscriptions, Assigned: first.Assigned,
	}}, b.Consumers("G"))

	clock.Advance(time.Second)
	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "10.0.0.1@42", Group: "G", Addr: "10.0.0.1:5001",
		Assigned: []broker.QueueRef{{Topic: "T", QueueID: 1}}}))
	cs := b.Consumers("G")
	require.Len(t, cs, 1)
	assert.Equal(t, broker.Consumer{ClientID: "10.0.0.1@42", Addr: "10.0.0.1:5001", Model: broker.Clustering,
		LastHeartbeat: t0.Add(time.Second), Assigned: []broker.QueueRef{{Topic: "T", QueueID: 1}}}, cs[0])
	cs[0].Assigned[0].QueueID = 9
	assert.Equal(t, int32(1), b.Consumers("G")[0].Assigned[0].QueueID, "callers get copies")
	assert.Equal(t, []string{"G"}, changes.take(), "the join only")
	assert.Equal(t, "CLUSTERING", broker.Clustering.String())
	assert.Equal(t, "BROADCASTING", broker.Broadcasting.String())
}

// The heartbeats of a batch create their groups and retry topics in one
// change of each table, saved once (one new topic data version, one
// OnTopicsChanged); a bad heartbeat fails alone.
func TestHeartbeatsCreateTogether(t *testing.T) {
	var topicChanges atomic.Int32
	cfg := testConfig(t)
	cfg.OnTopicsChanged = func() { topicChanges.Add(1) }
	b := openBroker(t, cfg)
	v0 := b.Store().Metadata().TopicsVersion().Counter
	errs, err := b.Heartbeats([]broker.Heartbeat{
		{ClientID: "c", Group: "G1"}, {ClientID: "c", Group: "bad group"}, {ClientID: "c", Group: "G2"}, {ClientID: "c", Group: "G1"},
	})
	require.NoError(t, err)
	require.Len(t, errs, 4)
	assert.NoError(t, errs[0])
	assert.ErrorIs(t, errs[1], broker.ErrInvalidArgument)
	assert.NoError(t, errs[2])
	assert.NoError(t, errs[3])
	for _, g := range []string{"G1", "G2"} {
		assert.Equal(t, []string{"c"}, b.ConsumerList(g))
		_, ok := b.Topic(broker.RetryTopic(g))
		assert.True(t, ok, "retry topic of %s", g)
	}
	assert.Equal(t, v0+1, b.Store().Metadata().TopicsVersion().Counter, "one change of the topic table")
	assert.Equal(t, int32(1), topicChanges.Load())
	assert.Equal(t, 2, b.Store().Metadata().GroupCount())
}

// maxGroupsPerHeartbeat refuses a whole batch; maxConsumerGroups refuses
// the creation of groups beyond it, by heartbeat or by offset commit, but
// not the use of those that exist.
func TestGroupLimits(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxGroupsPerHeartbeat, cfg.MaxConsumerGroups = 2, 3
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)
	_, err := b.Heartbeats([]broker.Heartbeat{{ClientID: "c", Group: "A"}, {ClientID: "c", Group: "B"}, {ClientID: "c", Group: "C"}})
	require.ErrorIs(t, err, broker.ErrTooManyGroups)
	assert.ErrorContains(t, err, "a heartbeat of 3 consumers: at most 2 (maxGroupsPerHeartbeat)")
	assert.Zero(t, b.Store().Metadata().GroupCount())

	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "c", Group: "A"}))
	require.NoError(t, b.CommitOffset("B", "T", 0, 0))
	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "c", Group: "C"}))
	err = b.Heartbeat(broker.Heartbeat{ClientID: "c", Group: "D"})
	require.ErrorIs(t, err, broker.ErrTooManyGroups)
	assert.ErrorContains(t, err, `group "D" not created: the broker has 3 groups, at most 3 (maxConsumerGroups)`)
	require.ErrorIs(t, b.CommitOffset("E", "T", 0, 0), broker.ErrTooManyGroups)
	require.NoError(t, b.CommitOffset("A", "T", 0, 1), "a group that exists is served")
	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "c2", Group: "A"}))
	assert.Equal(t, 3, b.Store().Metadata().GroupCount())
	_, ok := b.Topic(broker.RetryTopic("D"))
	assert.False(t, ok)
}
