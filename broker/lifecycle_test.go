package broker_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/message"
)

// topicGone asserts that nothing of topic T's first incarnation is left:
// no config, no queue files, no offsets of any group.
func topicGone(t *testing.T, b *broker.Broker, cfg broker.Config, groups ...string) {
	t.Helper()
	_, ok := b.Topic("T")
	assert.False(t, ok, "config")
	_, err := os.Stat(filepath.Join(cfg.StorePathRootDir, "consumequeue", "T"))
	assert.True(t, os.IsNotExist(err), "queue files: %v", err)
	for _, g := range groups {
		for q := range int32(2) {
			_, ok := b.QueryOffset(g, "T", q)
			assert.False(t, ok, "offsets of %s", g)
		}
	}
	assert.Empty(t, b.Store().PendingTopicDeletions())
}

// After deleteTopic T + updateTopic T, no group, new or old, live or
// not, receives an old message or sees an old offset, and T's files are
// gone; across a restart too.
func TestDeleteTopicThenRecreate(t *testing.T) {
	cfg := testConfig(t)
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 2)
	for i := range 6 {
		send(t, b, newMsg("T", int32(i%2), "old", ""))
	}
	waitVisible(t, b, "T", 1, 3)
	require.NoError(t, b.CommitOffset("Live", "T", 0, 2))
	require.NoError(t, b.CommitOffset("Gone", "T", 1, 3))
	require.NoError(t, b.CommitClientOffset("Bcast", "c1", "T", 0, 1))
	require.NoError(t, b.DeleteGroup("Gone", true)) // its offsets stay, its config goes: not a live group
	_, ok := b.QueryOffset("Gone", "T", 1)
	require.True(t, ok)

	require.NoError(t, b.DeleteTopic("T"))
	topicGone(t, b, cfg, "Live", "Gone")
	_, ok = b.QueryClientOffset("Bcast", "c1", "T", 0)
	assert.False(t, ok, "broadcast offsets too")
	require.ErrorIs(t, b.DeleteTopic("T"), broker.ErrTopicNotFound, "nothing left to delete")

	createTopic(t, b, "T", 2)
	st, err := b.TopicStatus("T")
	require.NoError(t, err)
	for _, q := range st {
		assert.Zero(t, q.MinOffset)
		assert.Zero(t, q.MaxOffset)
	}
	for _, g := range []string{"New", "Live", "Gone"} {
		for q := range int32(2) {
			res, got := pull(t, b, broker.PullRequest{Group: g, Topic: "T", QueueID: q})
			assert.Empty(t, got, "%s/%d", g, q)
			assert.Zero(t, res.MaxOffset)
		}
	}
	r := send(t, b, newMsg("T", 0, "new", ""))
	assert.Equal(t, int64(0), r[0].QueueOffset)
	waitVisible(t, b, "T", 0, 1)
	_, got := pull(t, b, broker.PullRequest{Group: "New", Topic: "T"})
	assert.Equal(t, []string{"new"}, bodies(got))

	closeBroker(t, b)
	b = openBroker(t, cfg)
	_, got = pull(t, b, broker.PullRequest{Group: "New", Topic: "T"})
	assert.Equal(t, []string{"new"}, bodies(got))
	_, got = pull(t, b, broker.PullRequest{Group: "New", Topic: "T", QueueID: 1})
	assert.Empty(t, got)
}

// A deletion stopped after its tombstone was written, or after the store
// removed the queues, is finished by the next Open: the config and every
// group's offsets go too.
func TestDeleteTopicFinishedAtOpen(t *testing.T) {
	for _, storeDone := range []bool{false, true} {
		cfg := testConfig(t)
		b := openBroker(t, cfg)
		createTopic(t, b, "T", 2)
		send(t, b, newMsg("T", 0, "old", ""), newMsg("T", 1, "old", ""))
		waitVisible(t, b, "T", 1, 1)
		require.NoError(t, b.CommitOffset("G", "T", 0, 1))
		// The broker's own steps, stopped part way (the state a crash
		// leaves: the config and the offsets are still saved).
		require.NoError(t, b.Store().BeginDeleteTopic("T"))
		if storeDone {
			require.NoError(t, b.Store().DeleteTopic("T"))
		}
		closeBroker(t, b)

		b = openBroker(t, cfg)
		topicGone(t, b, cfg, "G")
		createTopic(t, b, "T", 2)
		_, got := pull(t, b, broker.PullRequest{Group: "G", Topic: "T"})
		assert.Empty(t, got, "store part done: %v", storeDone)
	}
}

// deleteSubGroup with cleanup (cleanOffset) removes the group's offsets
// and its retry and dead-letter topics with their dead letters; a client
// using the name again inherits nothing.
func TestDeleteGroupWithCleanup(t *testing.T) {
	cfg := testConfig(t)
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)
	send(t, b, newMsg("T", 0, "a", ""), newMsg("T", 0, "b", ""))
	waitVisible(t, b, "T", 0, 2)
	_, got := pull(t, b, broker.PullRequest{Group: "G", Topic: "T"})
	require.Len(t, got, 2)
	for _, m := range got {
		_, err := b.SendBack(t.Context(), broker.SendBackRequest{Group: "G", PhysicalOffset: m.PhysicalOffset, DelayLevel: -1})
		require.NoError(t, err)
	}
	waitVisible(t, b, broker.DLQTopic("G"), 0, 2)
	require.NoError(t, b.CommitOffset("G", "T", 0, 2))
	require.NoError(t, b.CommitOffset("G", broker.DLQTopic("G"), 0, 1))
	// A retry topic with a message in it (as a due retry leaves it).
	_, err := b.ResendDLQ(t.Context(), broker.DLQResendRequest{DLQSelect: broker.DLQSelect{
		DLQFilter: broker.DLQFilter{Group: "G"}, Offsets: []int64{0}}, ToRetry: true})
	require.NoError(t, err)
	waitVisible(t, b, broker.RetryTopic("G"), 0, 1)

	require.NoError(t, b.DeleteGroup("G", true), "without cleanup")
	_, ok := b.Topic(broker.DLQTopic("G"))
	assert.True(t, ok, "without cleanup the group's topics stay")

	require.NoError(t, b.DeleteGroup("G", false))
	for _, topic := range []string{broker.RetryTopic("G"), broker.DLQTopic("G")} {
		_, ok := b.Topic(topic)
		assert.False(t, ok, topic)
		_, maxOff := b.Store().QueueOffsets(topic, 0)
		assert.Zero(t, maxOff, topic)
		_, err := os.Stat(filepath.Join(cfg.StorePathRootDir, "consumequeue", topic))
		assert.True(t, os.IsNotExist(err), "%s: %v", topic, err)
	}
	_, ok = b.QueryOffset("G", "T", 0)
	assert.False(t, ok)
	for _, s := range b.DLQStats() {
		assert.NotEqual(t, "G", s.Group, "dead-letter counts go")
	}
	require.ErrorIs(t, b.DeleteGroup("G", false), broker.ErrGroupNotFound, "nothing left")

	// The name used again starts empty: a new dead letter is at offset 0.
	_, got = pull(t, b, broker.PullRequest{Group: "G", Topic: "T"})
	require.Len(t, got, 2, "no offset inherited")
	_, err = b.SendBack(t.Context(), broker.SendBackRequest{Group: "G", PhysicalOffset: got[0].PhysicalOffset, DelayLevel: -1})
	require.NoError(t, err)
	waitVisible(t, b, broker.DLQTopic("G"), 0, 1)
	_, dl := pull(t, b, broker.PullRequest{Topic: broker.DLQTopic("G")})
	require.Len(t, dl, 1)
	assert.Equal(t, int64(0), dl[0].QueueOffset)
}

// A message parked with a delay for a topic that is then deleted and
// created again is dropped when it falls due, not delivered into the new
// topic.
func TestDeleteTopicDropsParkedMessages(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 1)
	m := newMsg("T", 0, "delayed", "")
	m.Properties = append(m.Properties, message.Property{Key: message.PropDelay, Value: "1"}) // 1 s
	send(t, b, m)
	require.NoError(t, b.DeleteTopic("T"))
	createTopic(t, b, "T", 1)
	require.Eventually(t, func() bool {
		off, ok := b.Store().Metadata().DelayOffset(1)
		return ok && off >= 1
	}, 10*time.Second, 10*time.Millisecond, "the level's message fell due")
	_, maxOff := b.Store().QueueOffsets("T", 0)
	assert.Zero(t, maxOff, "dropped, not delivered into the new topic")
}
