package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A member the broker does not list (the broker restarted moments ago and
// has not had its heartbeat yet) gets no share computed: computed without
// it, the share would be nothing, and letting every queue go would rewind
// them to their committed offsets. It keeps its queues (the error) and
// heartbeats at once.
func TestShareNeedsTheClientListed(t *testing.T) {
	b := startBroker(t, "a", 4, "T")
	ns := startNameServer(t, b)
	cfg := testConfig(t, ns)
	cfg.ClientID = "me"
	p := unstartedPushConsumer(t, cfg)

	b.configure(func(b *fakeBroker) { b.members = []string{"other"} })
	_, err := p.share(t.Context(), "T")
	require.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorContains(t, err, "does not list this client (me)")
	select {
	case <-p.hbKick:
	default:
		t.Error("no heartbeat asked for")
	}

	b.configure(func(b *fakeBroker) { b.members = []string{"me", "other"} })
	mine, err := p.share(t.Context(), "T")
	require.NoError(t, err)
	assert.Len(t, mine, 2, "half of the 4 queues")
}

// unstartedPushConsumer is a push consumer of group g with a handler that
// succeeds, never started: tests call its parts. Its connections close at
// the end of the test.
func unstartedPushConsumer(t *testing.T, cfg Config) *PushConsumer {
	t.Helper()
	p, err := NewPushConsumer(t.Context(), cfg, "g", func(context.Context, []*MessageExt) ConsumeResult { return ConsumeSuccess })
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.c.close() })
	return p
}

// A rebalance takes the members from the broker's group watch while it is
// open, and asks the broker (GetConsumerList) only without one.
func TestMembersFromTheGroupWatch(t *testing.T) {
	b := startBroker(t, "a", 4, "T")
	ns := startNameServer(t, b)
	cfg := testConfig(t, ns)
	cfg.ClientID = "me"
	p := unstartedPushConsumer(t, cfg)
	b.configure(func(b *fakeBroker) { b.members = []string{"asked"} })

	p.setWatched(b.addr, []string{"w2", "me", "w1"})
	rt, err := p.c.routes.get(t.Context(), "T")
	require.NoError(t, err)
	ids, err := p.members(t.Context(), rt)
	require.NoError(t, err)
	assert.Equal(t, []string{"me", "w1", "w2"}, ids, "the watch's list, sorted")
	ids[0] = "changed"
	ids, err = p.members(t.Context(), rt)
	require.NoError(t, err)
	assert.Equal(t, []string{"me", "w1", "w2"}, ids, "a caller's change does not reach the cached list")
	mine, err := p.share(t.Context(), "T")
	require.NoError(t, err)
	assert.Len(t, mine, 2, "a third of 4 queues, rounded up for the first member")

	p.setWatched(b.addr, nil) // the stream ended
	ids, err = p.members(t.Context(), rt)
	require.NoError(t, err)
	assert.Equal(t, []string{"asked"}, ids, "asked the broker")
}
