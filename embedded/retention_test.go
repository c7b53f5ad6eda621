package embedded_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/internal/testutil"
)

// limitsCluster is a one-broker cluster on clock with topic created with
// attrs, and a producer and an admin.
func limitsCluster(t *testing.T, clock *testutil.Clock, topic string, attrs map[string]string) *pushCluster {
	t.Helper()
	c, err := embedded.Start(t.Context(), embedded.Options{NoAutoCreateTopics: true, Broker: func(bc *broker.Config) { bc.Now = clock.Now }})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}}
	p, err := client.NewProducer(t.Context(), cfg, client.WithQueueSelector(&client.ByShardingKey{}))
	require.NoError(t, err)
	a, err := client.NewAdmin(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(context.Background()); a.Close() })
	require.NoError(t, a.CreateTopic(t.Context(), client.TopicConfig{Name: topic, ReadQueueNums: 1, WriteQueueNums: 1, Attributes: attrs}))
	require.Eventually(t, func() bool { _, err := a.Route(t.Context(), topic); return err == nil }, 5*time.Second, 10*time.Millisecond)
	return &pushCluster{c: c, cfg: cfg, p: p, admin: a}
}

// Expired messages (the producer's TTL, the topic's default) reach neither
// a pull consumer nor a push consumer; topicStatus shows the topic's TTL
// and the count, which a broker restart keeps.
func TestExpiredNeverDelivered(t *testing.T) {
	clock := testutil.NewClock(time.Now())
	pc := limitsCluster(t, clock, "Alarms", map[string]string{broker.AttrDefaultTTL: "60000"})
	var want []string
	for i := range 6 {
		m := &client.Message{Topic: "Alarms", Body: []byte("m" + strconv.Itoa(i))}
		switch i % 3 {
		case 0:
			m.TTL = time.Second
		case 1:
			want = append(want, string(m.Body)) // the topic's minute
		case 2:
			m.TTL = time.Hour
			want = append(want, string(m.Body))
		}
		_, err := pc.p.Send(t.Context(), m)
		require.NoError(t, err)
	}
	clock.Advance(2 * time.Second)

	pull, err := client.NewPullConsumer(t.Context(), pc.cfg, "puller")
	require.NoError(t, err)
	t.Cleanup(func() { pull.Close(context.Background()) })
	qs, err := pull.Queues(t.Context(), "Alarms")
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, maxOff, err := pull.QueueOffsets(t.Context(), qs[0]); return err == nil && maxOff == 6 },
		5*time.Second, time.Millisecond)
	var got []string
	for off := int64(0); off < 6; {
		res, err := pull.Pull(t.Context(), qs[0], off, client.PullOptions{MaxMessages: 2})
		require.NoError(t, err)
		for _, m := range res.Messages {
			got = append(got, string(m.Body))
		}
		require.Greater(t, res.NextOffset, off)
		off = res.NextOffset
	}
	assert.Equal(t, want, got, "pull")

	var mu sync.Mutex
	var pushed []string
	push := pc.consumer(t, "c1", "pusher", "Alarms", "*", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			pushed = append(pushed, string(m.Body))
		}
		return client.ConsumeSuccess
	}, client.WithCommitInterval(10*time.Millisecond))
	require.Eventually(t, func() bool {
		prog, err := pc.admin.ConsumerProgress(t.Context(), "pusher", "Alarms")
		return err == nil && len(prog) == 1 && prog[0].ConsumerOffset == 6
	}, 10*time.Second, 10*time.Millisecond, "the push consumer passed every message")
	require.NoError(t, push.Shutdown(t.Context()))
	mu.Lock()
	slices.Sort(pushed)
	assert.Equal(t, want, pushed, "push")
	mu.Unlock()

	status := func() client.QueueStatus {
		st, err := pc.admin.TopicStatus(t.Context(), "Alarms")
		require.NoError(t, err)
		require.Len(t, st, 1)
		return st[0]
	}
	lim := status().Limits
	assert.Equal(t, client.QueueLimits{DefaultTTL: time.Minute, Expired: 2}, lim)

	require.NoError(t, pc.c.StopBroker(t.Context()))
	require.NoError(t, pc.c.StartBroker(t.Context()))
	assert.Equal(t, int64(2), status().Limits.Expired, "the count survives a restart")
	clock.Advance(time.Minute)
	res, err := pull.Pull(t.Context(), qs[0], 0, client.PullOptions{})
	require.NoError(t, err)
	var left []string
	for _, m := range res.Messages {
		left = append(left, string(m.Body))
	}
	assert.Equal(t, []string{"m2", "m5"}, left, "only the hour-long TTLs are left")
}

// A send to a full refusing queue fails with ErrBacklogFull, naming the
// limit, and is not retried; a full drop-oldest queue keeps its newest
// messages. Both hold through a broker restart.
func TestBacklogLimitsThroughClient(t *testing.T) {
	clock := testutil.NewClock(time.Now())
	pc := limitsCluster(t, clock, "Commands", map[string]string{broker.AttrMaxBacklog: "2", broker.AttrBacklogPolicy: broker.PolicyRefuse})
	require.NoError(t, pc.admin.CreateTopic(t.Context(), client.TopicConfig{Name: "Telemetry", ReadQueueNums: 1, WriteQueueNums: 1,
		Attributes: map[string]string{broker.AttrMaxBacklog: "3"}}))
	require.Eventually(t, func() bool { _, err := pc.admin.Route(t.Context(), "Telemetry"); return err == nil }, 5*time.Second, 10*time.Millisecond)
	for i := range 2 {
		_, err := pc.p.Send(t.Context(), &client.Message{Topic: "Commands", Body: []byte("c" + strconv.Itoa(i))})
		require.NoError(t, err)
	}
	for i := range 5 {
		_, err := pc.p.Send(t.Context(), &client.Message{Topic: "Telemetry", Body: []byte("t" + strconv.Itoa(i))})
		require.NoError(t, err)
	}
	refused := func() {
		t.Helper()
		_, err := pc.p.Send(t.Context(), &client.Message{Topic: "Commands", Body: []byte("over")})
		require.ErrorIs(t, err, client.ErrBacklogFull)
		assert.False(t, client.IsRetryable(err))
		assert.False(t, errors.Is(err, client.ErrDiskFull))
		assert.Contains(t, err.Error(), "queue.max.backlog=2")
	}
	refused()
	check := func() {
		t.Helper()
		var st []client.QueueStatus
		var err error
		require.Eventually(t, func() bool {
			st, err = pc.admin.TopicStatus(t.Context(), "Commands")
			return err == nil && st[0].MaxOffset == 2
		}, 5*time.Second, time.Millisecond)
		assert.Equal(t, client.QueueLimits{MaxBacklog: 2, BacklogPolicy: "refuse", Backlog: 2}, st[0].Limits)
		require.Eventually(t, func() bool {
			st, err = pc.admin.TopicStatus(t.Context(), "Telemetry")
			return err == nil && st[0].MaxOffset == 5
		}, 5*time.Second, time.Millisecond)
		assert.Equal(t, int64(2), st[0].MinOffset)
		assert.Equal(t, client.QueueLimits{MaxBacklog: 3, BacklogPolicy: "drop-oldest", Backlog: 3, Dropped: 2}, st[0].Limits)
	}
	check()
	require.NoError(t, pc.c.StopBroker(t.Context()))
	require.NoError(t, pc.c.StartBroker(t.Context()))
	refused()
	check()
}
