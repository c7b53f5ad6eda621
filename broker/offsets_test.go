package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
)

func TestCommitQueryOffset(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 2)
	_, ok := b.QueryOffset("G", "T", 0)
	assert.False(t, ok)
	require.NoError(t, b.CommitOffset("G", "T", 0, 7))
	require.NoError(t, b.CommitOffset("G", "T", 1, 3))
	require.NoError(t, b.CommitOffset("G", "T", 0, 9))
	off, ok := b.QueryOffset("G", "T", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(9), off)
	off, _ = b.QueryOffset("G", "T", 1)
	assert.Equal(t, int64(3), off)
	_, ok = b.QueryOffset("Other", "T", 0)
	assert.False(t, ok)
	_, ok = b.Store().Metadata().Group("G")
	assert.True(t, ok, "the group was auto-created")
}

func TestCommitOffsetValidation(t *testing.T) {
	cfg := testConfig(t)
	off := false
	cfg.AutoCreateSubscriptionGroup = &off
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 2)
	tests := []struct {
		name, group, topic string
		queue              int32
		offset             int64
		wantErr            error
		wantMsg            string
	}{
		{"unknown group", "G", "T", 0, 1, broker.ErrGroupNotFound, `"G" (autoCreateSubscriptionGroup is off)`},
		{"bad group", "a b", "T", 0, 1, broker.ErrInvalidArgument, `group name "a b"`},
		{"unknown topic", "G", "Nope", 0, 1, broker.ErrTopicNotFound, `"Nope"`},
		{"bad topic", "G", "", 0, 1, broker.ErrInvalidTopic, `""`},
		{"queue out of range", "G", "T", 2, 1, broker.ErrInvalidArgument, "queue id 2"},
		{"negative offset", "G", "T", 0, -1, broker.ErrInvalidArgument, "offset -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := b.CommitOffset(tt.group, tt.topic, tt.queue, tt.offset)
			require.ErrorIs(t, err, tt.wantErr)
			assert.ErrorContains(t, err, tt.wantMsg)
		})
	}
}

func TestOffsetsPersistAcrossReopen(t *testing.T) {
	cfg := testConfig(t)
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 2)
	send(t, b, newMsg("T", 0, "x", ""))
	require.NoError(t, b.CommitOffset("G", "T", 1, 42))
	require.NoError(t, b.Close(t.Context()))

	b = openBroker(t, cfg)
	off, ok := b.QueryOffset("G", "T", 1)
	require.True(t, ok)
	assert.Equal(t, int64(42), off)
	_, ok = b.Topic("T")
	assert.True(t, ok)
	_, maxOff := b.Store().QueueOffsets("T", 0)
	assert.Equal(t, int64(1), maxOff)
}

func TestOffsetsSavedPeriodically(t *testing.T) {
	cfg := testConfig(t)
	cfg.FlushConsumerOffsetInterval = 20 * time.Millisecond
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)
	require.NoError(t, b.CommitOffset("G", "T", 0, 5))
	// The save loop writes consumerOffset.json without a Close.
	require.Eventually(t, func() bool { return fileContains(t, cfg, `"T@G"`) }, 5*time.Second, 5*time.Millisecond)
}

func TestResetOffsetByTime(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig(t)
	cfg.Now = clock.Now
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 2)
	t0 := clock.Now().UnixMilli()
	for i := range 3 {
		send(t, b, newMsg("T", 0, fmt.Sprint(i), ""))
	}
	clock.Advance(time.Minute)
	t1 := clock.Now().UnixMilli()
	for i := range 2 {
		send(t, b, newMsg("T", 0, fmt.Sprint(i), ""), newMsg("T", 1, fmt.Sprint(i), ""))
	}
	waitVisible(t, b, "T", 0, 5)
	waitVisible(t, b, "T", 1, 2)
	require.NoError(t, b.CommitOffset("G", "T", 0, 0)) // creates the group
	tests := []struct {
		name string
		ts   int64
		want map[int32]int64
	}{
		{"before everything", t0 - 1, map[int32]int64{0: 0, 1: 0}},
		{"at the first batch", t0, map[int32]int64{0: 0, 1: 0}},
		{"between", t0 + 1, map[int32]int64{0: 3, 1: 0}},
		{"at the second batch", t1, map[int32]int64{0: 3, 1: 0}},
		{"after everything", t1 + 1, map[int32]int64{0: 5, 1: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := b.ResetOffsetByTime("G", "T", tt.ts)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			for q, off := range tt.want {
				committed, ok := b.QueryOffset("G", "T", q)
				assert.True(t, ok)
				assert.Equal(t, off, committed)
			}
		})
	}
	_, err := b.ResetOffsetByTime("G", "Nope", t0)
	require.ErrorIs(t, err, broker.ErrTopicNotFound)
}

// Resetting the offsets of a group the broker does not know is an error
// naming it: it must not create the group (a phantom group, with a lag
// metric), even with autoCreateSubscriptionGroup on.
func TestResetOffsetByTimeUnknownGroup(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 2)
	_, err := b.ResetOffsetByTime("Nope", "T", 0)
	require.ErrorIs(t, err, broker.ErrGroupNotFound)
	assert.ErrorContains(t, err, `"Nope"`)
	_, ok := b.Store().Metadata().Group("Nope")
	assert.False(t, ok, "the group was created")
	_, ok = b.QueryOffset("Nope", "T", 0)
	assert.False(t, ok, "an offset was committed")
}

func TestOffsetCallsAfterClose(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 1)
	require.NoError(t, b.Close(context.Background()))
	require.ErrorIs(t, b.CommitOffset("G", "T", 0, 1), broker.ErrShuttingDown)
	_, err := b.ResetOffsetByTime("G", "T", 0)
	require.ErrorIs(t, err, broker.ErrShuttingDown)
	_, err = b.CommitOffsets("G", "", "", []broker.OffsetCommit{{Topic: "T", Offset: 1}})
	require.ErrorIs(t, err, broker.ErrShuttingDown)
}

// CommitOffsets fails as a whole, committing nothing, when its group
// cannot be had; otherwise each entry is answered on its own.
func TestCommitOffsetsGroupChecked(t *testing.T) {
	cfg := testConfig(t)
	off := false
	cfg.AutoCreateSubscriptionGroup = &off
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 2)
	commits := []broker.OffsetCommit{{Topic: "T", QueueID: 0, Offset: 3}, {Topic: "T", QueueID: 5, Offset: 1}}
	_, err := b.CommitOffsets("Nope", "", "", commits)
	require.ErrorIs(t, err, broker.ErrGroupNotFound)
	_, ok := b.QueryOffset("Nope", "T", 0)
	assert.False(t, ok)

	b2 := openBroker(t, testConfig(t)) // auto-creation on
	createTopic(t, b2, "T", 2)
	errs, err := b2.CommitOffsets("G", "", "", commits)
	require.NoError(t, err)
	require.Len(t, errs, 2)
	assert.NoError(t, errs[0])
	assert.ErrorIs(t, errs[1], broker.ErrInvalidArgument)
	got, ok := b2.QueryOffset("G", "T", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(3), got)
}

// Broadcast consumption: each client has offsets of its own, beside the
// group's, checked like them, and kept across a restart.
func TestClientOffsets(t *testing.T) {
	cfg := testConfig(t)
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 2)
	const c1, c2 = "10.0.0.1@100", "10.0.0.2@200@unit" // client ids hold '@'
	require.NoError(t, b.CommitClientOffset("G", c1, "T", 0, 5))
	require.NoError(t, b.CommitClientOffset("G", c2, "T", 0, 9))
	require.NoError(t, b.CommitClientOffset("G", c1, "T", 1, 2))
	require.NoError(t, b.CommitOffset("G", "T", 0, 1))
	check := func(b *broker.Broker) {
		t.Helper()
		for _, tt := range []struct {
			client string
			queue  int32
			want   int64
			found  bool
		}{{c1, 0, 5, true}, {c2, 0, 9, true}, {c1, 1, 2, true}, {c2, 1, 0, false}, {"other", 0, 0, false}} {
			off, ok := b.QueryClientOffset("G", tt.client, "T", tt.queue)
			assert.Equal(t, tt.found, ok, "%s/%d", tt.client, tt.queue)
			assert.Equal(t, tt.want, off, "%s/%d", tt.client, tt.queue)
		}
		off, _ := b.QueryOffset("G", "T", 0)
		assert.Equal(t, int64(1), off, "the group's offset is apart")
	}
	check(b)
	require.NoError(t, b.Close(t.Context()))
	assert.True(t, fileContains(t, cfg, `"T@G@10.0.0.2@200@unit"`))
	check(openBroker(t, cfg))
}

func TestCommitClientOffsetValidation(t *testing.T) {
	cfg := testConfig(t)
	off := false
	cfg.AutoCreateSubscriptionGroup = &off
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 2)
	tests := []struct {
		name, group, client, topic string
		queue                      int32
		offset                     int64
		wantErr                    error
		wantMsg                    string
	}{
		{"no client id", "G", "", "T", 0, 1, broker.ErrInvalidArgument, "without a client id"},
		{"unknown group", "G", "c", "T", 0, 1, broker.ErrGroupNotFound, `"G" (autoCreateSubscriptionGroup is off)`},
		{"bad group", "a b", "c", "T", 0, 1, broker.ErrInvalidArgument, `group name "a b"`},
		{"unknown topic", "G", "c", "Nope", 0, 1, broker.ErrTopicNotFound, `"Nope"`},
		{"queue out of range", "G", "c", "T", 2, 1, broker.ErrInvalidArgument, "queue id 2"},
		{"negative offset", "G", "c", "T", 0, -1, broker.ErrInvalidArgument, "offset -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := b.CommitClientOffset(tt.group, tt.client, tt.topic, tt.queue, tt.offset)
			require.ErrorIs(t, err, tt.wantErr)
			assert.ErrorContains(t, err, tt.wantMsg)
		})
	}
	require.NoError(t, b.Close(context.Background()))
	require.ErrorIs(t, b.CommitClientOffset("G", "c", "T", 0, 1), broker.ErrShuttingDown)
}
