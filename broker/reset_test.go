package broker_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/store"
)

// resetBroker is a broker on a fake clock with topic T (one queue of ten
// messages, the first five stored a minute before the others) and group
// G, which committed offset 10.
func resetBroker(t *testing.T) (*broker.Broker, *fakeClock, int64) {
	t.Helper()
	clock := newFakeClock()
	cfg := testConfig(t)
	cfg.Now = clock.Now
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)
	for i := range 10 {
		if i == 5 {
			clock.Advance(time.Minute)
		}
		send(t, b, newMsg("T", 0, fmt.Sprint(i), ""))
	}
	waitVisible(t, b, "T", 0, 10)
	require.NoError(t, b.CommitOffset("G", "T", 0, 10))
	return b, clock, clock.Now().UnixMilli()
}

func committed(t *testing.T, b *broker.Broker) int64 {
	t.Helper()
	off, ok := b.QueryOffset("G", "T", 0)
	require.True(t, ok)
	return off
}

// A reset holds against the members that have not heard of it: their
// commits of other offsets are ignored until the group pulls from the new
// offset, and after the grace period their pulls from elsewhere are
// answered "moved" to it.
func TestResetHoldsAgainstStaleMembers(t *testing.T) {
	b, clock, t1 := resetBroker(t)
	offs, err := b.ResetOffsetByTime("G", "T", t1)
	require.NoError(t, err)
	require.Equal(t, map[int32]int64{0: 5}, offs)

	require.NoError(t, b.CommitOffset("G", "T", 0, 10), "a stale commit succeeds...")
	assert.Equal(t, int64(5), committed(t, b), "...and changes nothing")
	res, msgs := pull(t, b, broker.PullRequest{Group: "G", Topic: "T", Offset: 8})
	assert.Equal(t, store.Found, res.Status, "within the grace period a pull from elsewhere is served")
	assert.Len(t, msgs, 2)
	assert.Equal(t, int64(5), committed(t, b))

	clock.Advance(21 * time.Second)
	res, msgs = pull(t, b, broker.PullRequest{Group: "G", Topic: "T", Offset: 8})
	assert.Equal(t, store.OffsetOverflowBadly, res.Status, "past the grace period, moved")
	assert.Equal(t, int64(5), res.NextOffset)
	assert.Equal(t, int64(10), res.MaxOffset)
	assert.Empty(t, msgs)
	res, _ = pull(t, b, broker.PullRequest{Group: "G", Topic: "T", Offset: 2})
	assert.Equal(t, store.OffsetTooSmall, res.Status)
	assert.Equal(t, int64(5), res.NextOffset)
	res, _ = pull(t, b, broker.PullRequest{Group: "Other", Topic: "T", Offset: 8})
	assert.Equal(t, store.Found, res.Status, "another group is not concerned")
	require.NoError(t, b.CommitOffset("G", "T", 0, 5), "the reset offset itself may be committed")

	_, msgs = pull(t, b, broker.PullRequest{Group: "G", Topic: "T", Offset: 5})
	assert.Equal(t, []string{"5", "6", "7", "8", "9"}, bodies(msgs))
	require.NoError(t, b.CommitOffset("G", "T", 0, 7))
	assert.Equal(t, int64(7), committed(t, b), "once pulled from the reset offset, commits count again")
	res, _ = pull(t, b, broker.PullRequest{Group: "G", Topic: "T", Offset: 8})
	assert.Equal(t, store.Found, res.Status)
}

// Nobody pulls the queue: the reset stops fencing commits after
// channelExpiredTimeout.
func TestResetFenceExpires(t *testing.T) {
	b, clock, t1 := resetBroker(t)
	_, err := b.ResetOffsetByTime("G", "T", t1)
	require.NoError(t, err)
	require.NoError(t, b.CommitOffset("G", "T", 0, 9))
	assert.Equal(t, int64(5), committed(t, b))
	clock.Advance(broker.DefaultChannelExpiredTimeout)
	require.NoError(t, b.CommitOffset("G", "T", 0, 9))
	assert.Equal(t, int64(9), committed(t, b))
}

// The group's watches and the reset hooks hear of a reset, with its
// offsets; a watch keeps the latest reset of each topic.
func TestResetTellsWatchesAndHooks(t *testing.T) {
	b, _, t1 := resetBroker(t)
	createTopic(t, b, "U", 2)
	heartbeat(t, b, "G", "c1")
	heartbeat(t, b, "H", "x")
	w := watch(t, b, "G", "c1")
	other := watch(t, b, "H", "x")
	var mu sync.Mutex
	var heard []broker.OffsetReset
	remove := b.AddOffsetResetHook(func(r broker.OffsetReset) { mu.Lock(); heard = append(heard, r); mu.Unlock() })

	_, err := b.ResetOffsetByTime("G", "T", 0)
	require.NoError(t, err)
	_, err = b.ResetOffsetByTime("G", "U", 0)
	require.NoError(t, err)
	_, err = b.ResetOffsetByTime("G", "T", t1)
	require.NoError(t, err)
	assert.True(t, pending(w))
	assert.False(t, pending(other))
	assert.Equal(t, []broker.OffsetReset{
		{Group: "G", Topic: "U", Timestamp: 0, Offsets: map[int32]int64{0: 0, 1: 0}},
		{Group: "G", Topic: "T", Timestamp: t1, Offsets: map[int32]int64{0: 5}},
	}, w.Resets(), "the latest of each topic, oldest first")
	assert.Empty(t, w.Resets(), "taken")
	assert.Empty(t, other.Resets())
	mu.Lock()
	assert.Len(t, heard, 3)
	assert.Equal(t, broker.OffsetReset{Group: "G", Topic: "T", Timestamp: t1, Offsets: map[int32]int64{0: 5}}, heard[2])
	mu.Unlock()

	remove()
	_, err = b.ResetOffsetByTime("G", "T", 0)
	require.NoError(t, err)
	mu.Lock()
	assert.Len(t, heard, 3, "removed")
	mu.Unlock()
}
