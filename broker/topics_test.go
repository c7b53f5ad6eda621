package broker_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/message"
)

func TestCreateUpdateDeleteTopic(t *testing.T) {
	var changes atomic.Int32
	cfg := testConfig(t)
	cfg.OnTopicsChanged = func() { changes.Add(1) }
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 4)
	tc, ok := b.Topic("T")
	require.True(t, ok)
	assert.Equal(t, int32(4), tc.ReadQueueNums)
	assert.Equal(t, metadata.FilterSingleTag, tc.TopicFilterType)

	require.NoError(t, b.CreateOrUpdateTopic(metadata.TopicConfig{TopicName: "T", ReadQueueNums: 8, WriteQueueNums: 6, Perm: metadata.PermRead}))
	tc, _ = b.Topic("T")
	assert.Equal(t, int32(6), tc.WriteQueueNums)
	assert.Equal(t, int32(metadata.PermRead), tc.Perm)
	createTopic(t, b, "A", 1)
	var names []string
	for _, tc := range b.Topics() {
		names = append(names, tc.TopicName)
	}
	assert.Equal(t, []string{"A", "T"}, names)

	require.NoError(t, b.DeleteTopic("T"))
	_, ok = b.Topic("T")
	assert.False(t, ok)
	require.ErrorIs(t, b.DeleteTopic("T"), broker.ErrTopicNotFound)
	assert.Equal(t, int32(4), changes.Load(), "create, update, create, delete")
}

func TestCreateTopicValidation(t *testing.T) {
	b := openBroker(t, testConfig(t))
	tc := func(name string, r, w, perm int32) metadata.TopicConfig {
		return metadata.TopicConfig{TopicName: name, ReadQueueNums: r, WriteQueueNums: w, Perm: perm}
	}
	tests := []struct {
		name    string
		tc      metadata.TopicConfig
		wantErr error
		wantMsg string
	}{
		{"empty name", tc("", 1, 1, 6), broker.ErrInvalidTopic, `topic name ""`},
		{"bad char", tc("a.b", 1, 1, 6), broker.ErrInvalidTopic, `"a.b"`},
		{"too long", tc(strings.Repeat("x", 128), 1, 1, 6), broker.ErrInvalidTopic, "1 to 127"},
		{"no read queues", tc("T", 0, 1, 6), broker.ErrInvalidArgument, "readQueueNums 0"},
		{"too many write queues", tc("T", 1, 1025, 6), broker.ErrInvalidArgument, "writeQueueNums 1025 of topic \"T\": want 1..1024"},
		{"bad perm", tc("T", 1, 1, 8), broker.ErrInvalidArgument, "perm 8"},
		{"bad filter type", metadata.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6, TopicFilterType: "SQL"}, broker.ErrInvalidArgument, "topicFilterType"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := b.CreateOrUpdateTopic(tt.tc)
			require.ErrorIs(t, err, tt.wantErr)
			assert.ErrorContains(t, err, tt.wantMsg)
		})
	}
	assert.Empty(t, b.Topics())
}

func TestReservedTopics(t *testing.T) {
	b := openBroker(t, testConfig(t))
	for _, name := range []string{"TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_TRACE", "rmq_sys_x"} {
		t.Run(name, func(t *testing.T) {
			assert.True(t, broker.IsReservedTopic(name))
			err := b.CreateOrUpdateTopic(metadata.TopicConfig{TopicName: name, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6})
			require.ErrorIs(t, err, broker.ErrReservedTopic)
			assert.ErrorContains(t, err, "cannot be created or changed by users")
			require.ErrorIs(t, b.DeleteTopic(name), broker.ErrReservedTopic)
		})
	}
	for _, name := range []string{"rmq_sysx", "TBW1020", "%RETRY%G", "%DLQ%G", "Orders"} {
		assert.False(t, broker.IsReservedTopic(name), name)
	}
}

func TestDeleteTopicRemovesOffsets(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 1)
	createTopic(t, b, "U", 1)
	send(t, b, newMsg("T", 0, "stays", ""))
	waitVisible(t, b, "T", 0, 1)
	require.NoError(t, b.CommitOffset("G1", "T", 0, 1))
	require.NoError(t, b.CommitOffset("G2", "T", 0, 1))
	require.NoError(t, b.CommitOffset("G1", "U", 0, 1))
	require.NoError(t, b.DeleteTopic("T"))
	for _, g := range []string{"G1", "G2"} {
		_, ok := b.QueryOffset(g, "T", 0)
		assert.False(t, ok, g)
	}
	_, ok := b.QueryOffset("G1", "U", 0)
	assert.True(t, ok, "other topics keep their offsets")
	_, maxOff := b.Store().QueueOffsets("T", 0)
	assert.Zero(t, maxOff, "the topic's queues go")

	createTopic(t, b, "T", 1)
	_, ok = b.QueryOffset("G1", "T", 0)
	assert.False(t, ok, "a re-created topic starts without offsets")
}

// A topic is on disk before its creation is answered, whether an
// administrator created it or the broker did (auto-create, a group's retry
// topic): a crash right after must not lose it, and with it the messages
// already stored for it (found by the reliability suite's SIGKILL test).
func TestTopicSavedBeforeAnswer(t *testing.T) {
	cfg := testConfig(t)
	cfg.AutoCreateTopicEnable = true
	b := openBroker(t, cfg)
	saved := func() string {
		raw, err := os.ReadFile(filepath.Join(cfg.StorePathRootDir, "config", metadata.TopicsFile))
		require.NoError(t, err)
		return string(raw)
	}
	createTopic(t, b, "Admin", 2)
	assert.Contains(t, saved(), `"Admin"`)
	_, err := b.Send(t.Context(), "Auto", []*message.Message{{Topic: "Auto", QueueID: broker.BrokerPicksQueue, Body: []byte("x")}})
	require.NoError(t, err)
	assert.Contains(t, saved(), `"Auto"`)
	require.NoError(t, b.DeleteTopic("Admin"))
	assert.NotContains(t, saved(), `"Admin"`)
}
