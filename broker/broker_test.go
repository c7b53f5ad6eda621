package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/message"
)

func TestOpenRejectsBadConfig(t *testing.T) {
	cfg := testConfig(t)
	cfg.BrokerIP1 = "not-an-ip"
	_, err := broker.Open(t.Context(), cfg)
	require.ErrorIs(t, err, broker.ErrInvalidConfig)
	assert.ErrorContains(t, err, "brokerIP1")
}

func TestCloseRejectsLaterCalls(t *testing.T) {
	b, err := broker.Open(t.Context(), testConfig(t))
	require.NoError(t, err)
	createTopic(t, b, "T", 1)
	assert.True(t, b.Ready())
	require.NoError(t, b.Close(t.Context()))
	assert.False(t, b.Ready())

	_, err = b.Send(t.Context(), "T", []*message.Message{newMsg("T", 0, "x", "")})
	assert.ErrorIs(t, err, broker.ErrShuttingDown)
	assert.False(t, broker.IsIndeterminate(err))
	_, err = b.Pull(t.Context(), broker.PullRequest{Topic: "T"})
	assert.ErrorIs(t, err, broker.ErrShuttingDown)
	assert.ErrorIs(t, b.CreateOrUpdateTopic(metadata.TopicConfig{TopicName: "U", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}), broker.ErrShuttingDown)
	assert.ErrorIs(t, b.DeleteTopic("T"), broker.ErrShuttingDown)
	assert.ErrorIs(t, b.Heartbeat(broker.Heartbeat{ClientID: "c", Group: "G"}), broker.ErrShuttingDown)
	_, err = b.TopicStatus("T")
	assert.ErrorIs(t, err, broker.ErrShuttingDown)
	assert.False(t, b.Status().Ready)
	assert.ErrorIs(t, b.Close(t.Context()), broker.ErrShuttingDown, "a second Close")
}

// blockedCall starts a CreateOrUpdateTopic whose OnTopicsChanged hook
// blocks until release is closed: a call in flight for as long as the test
// wants.
func blockedCall(t *testing.T) (b *broker.Broker, release chan struct{}, done <-chan error) {
	t.Helper()
	entered, release := make(chan struct{}), make(chan struct{})
	cfg := testConfig(t)
	cfg.OnTopicsChanged = func() {
		close(entered)
		<-release
	}
	b, err := broker.Open(t.Context(), cfg)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		errc <- b.CreateOrUpdateTopic(metadata.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6})
	}()
	<-entered
	return b, release, errc
}

func TestCloseWaitsForCallsInFlight(t *testing.T) {
	b, release, callDone := blockedCall(t)
	closed := make(chan error, 1)
	go func() { closed <- b.Close(context.Background()) }()
	require.Eventually(t, func() bool { return !b.Ready() }, 5*time.Second, time.Millisecond)
	select {
	case err := <-closed:
		require.FailNow(t, "Close returned with a call in flight", "err: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-callDone)
	require.NoError(t, <-closed)
}

func TestCloseCtxEndsWhileCallsInFlight(t *testing.T) {
	b, release, callDone := blockedCall(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := b.Close(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "calls in flight")
	assert.False(t, b.Ready())
	close(release)
	require.NoError(t, <-callDone)
	require.NoError(t, b.Close(context.Background()), "a later Close finishes the job")
}

func TestStatus(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig(t)
	cfg.Now = clock.Now
	cfg.BrokerName, cfg.BrokerClusterName, cfg.NamesrvAddr = "b1", "C1", []string{"127.0.0.1:9876"}
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 2)
	createTopic(t, b, "U", 1)
	send(t, b, newMsg("T", 1, "x", ""), newMsg("T", 1, "y", ""))
	clock.Advance(time.Minute)
	send(t, b, newMsg("T", 1, "z", ""))
	waitVisible(t, b, "T", 1, 3)
	pull(t, b, broker.PullRequest{Topic: "T", QueueID: 1})

	s := b.Status()
	assert.Equal(t, "b1", s.BrokerName)
	assert.Equal(t, "C1", s.ClusterName)
	assert.Equal(t, int64(0), s.BrokerID)
	assert.Equal(t, "127.0.0.1:10911", s.BrokerAddr)
	assert.Equal(t, ":8081", s.GRPCListenAddr)
	assert.Equal(t, ":5557", s.HTTPListenAddr)
	assert.Equal(t, []string{"127.0.0.1:9876"}, s.NamesrvAddr)
	assert.True(t, s.Ready)
	assert.Equal(t, int64(0), s.MinLogOffset)
	assert.Positive(t, s.MaxLogOffset)
	assert.LessOrEqual(t, s.FlushedOffset, s.MaxLogOffset)
	assert.Equal(t, 2, s.Topics)
	assert.Equal(t, int64(3), s.MessagesPut)
	assert.Equal(t, int64(3), s.MessagesGot)
	assert.Equal(t, time.Minute, s.Uptime)

	qs, err := b.TopicStatus("T")
	require.NoError(t, err)
	want := []broker.QueueStatus{
		{QueueID: 0},
		{QueueID: 1, MinOffset: 0, MaxOffset: 3, LastStoreTimestamp: clock.Now().UnixMilli(), Backlog: 3}, // no group consumed any
	}
	assert.Equal(t, want, qs)
	_, err = b.TopicStatus("Nope")
	assert.ErrorIs(t, err, broker.ErrTopicNotFound)
}
