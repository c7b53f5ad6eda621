package embedded_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/message"
)

// fakeClock is the broker's injected clock: tests move it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// retryCluster is a cluster on a fake clock whose clients and locks do
// not expire while the clock jumps hours.
func retryCluster(t *testing.T, clk *fakeClock, topic string) *pushCluster {
	t.Helper()
	c, err := embedded.Start(t.Context(), embedded.Options{NoAutoCreateTopics: true, Broker: func(cfg *broker.Config) {
		cfg.Now = clk.Now
		cfg.ChannelExpiredTimeout = 1000 * time.Hour
		cfg.QueueLockTTL = 1000 * time.Hour
	}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}}
	p, err := client.NewProducer(t.Context(), cfg)
	require.NoError(t, err)
	a, err := client.NewAdmin(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(); a.Close() })
	require.NoError(t, a.CreateTopic(t.Context(), client.TopicConfig{Name: topic, ReadQueueNums: 1, WriteQueueNums: 1}))
	require.Eventually(t, func() bool { _, err := a.Route(t.Context(), topic); return err == nil }, 5*time.Second, 10*time.Millisecond)
	return &pushCluster{c: c, cfg: cfg, p: p, admin: a}
}

// delivery is one handling of a message, on the broker's clock.
type delivery struct {
	at             time.Time
	topic, uniq    string
	reconsumeTimes int32
}

// handled counts what a push consumer finished with (handled or sent
// back): the sum of its commit offsets.
func handledSoFar(c *client.PushConsumer) int64 {
	var n int64
	for _, s := range c.Stats() {
		n += s.CommitOffset
	}
	return n
}

// A handler that always fails gets the message 1 + 16 times, each retry
// after the ladder's delay (10 s, 30 s, 1 m, ... 2 h on the broker's
// clock), and then the message is in %DLQ%<group> once, with its original
// topic, id and 16 failures.
func TestRetryLadderToDeadLetter(t *testing.T) {
	clk := newFakeClock()
	pc := retryCluster(t, clk, "Pay")
	var mu sync.Mutex
	var got []delivery
	c := pc.consumer(t, "pay-1", "pay", "Pay", "*", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got = append(got, delivery{at: clk.Now(), topic: m.Topic, uniq: m.UniqKey, reconsumeTimes: m.ReconsumeTimes})
		}
		return client.ConsumeRetryLater
	})
	defer c.Shutdown(context.Background())
	res, err := pc.p.Send(t.Context(), &client.Message{Topic: "Pay", Body: []byte("charge 42"), Keys: []string{"order-42"}})
	require.NoError(t, err)

	levels, err := broker.ParseDelayLevels(broker.DefaultMessageDelayLevel)
	require.NoError(t, err)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	for k := 0; k < 17; k++ {
		require.Eventually(t, func() bool { return count() == k+1 }, 10*time.Second, time.Millisecond, "delivery %d", k+1)
		// Wait until the consumer sent it back, then move the clock to the
		// retry's time.
		require.Eventually(t, func() bool { return handledSoFar(c) == int64(k+1) }, 10*time.Second, time.Millisecond)
		if k < 16 {
			clk.Advance(levels[3+k-1])
		}
	}
	clk.Advance(3 * time.Hour)
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	require.Len(t, got, 17, "1 + 16 deliveries, then none")
	for k, d := range got {
		assert.Equal(t, "Pay", d.topic, "delivery %d sees the original topic", k)
		assert.Equal(t, res[0].UniqKey, d.uniq, "delivery %d keeps the message id", k)
		assert.Equal(t, int32(k), d.reconsumeTimes)
		if k > 0 {
			want := levels[3+k-2]
			assert.InDelta(t, want.Seconds(), d.at.Sub(got[k-1].at).Seconds(), 1, "retry %d after %s", k, want)
		}
	}
	mu.Unlock()

	// The dead letter.
	pull, err := client.NewPullConsumer(t.Context(), pc.cfg, "inspect")
	require.NoError(t, err)
	defer pull.Close()
	qs, err := pull.Queues(t.Context(), "%DLQ%pay")
	require.NoError(t, err)
	require.Len(t, qs, 1)
	r, err := pull.Pull(t.Context(), qs[0], 0, 10, "", 0)
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	dl := r.Messages[0]
	assert.Equal(t, "charge 42", string(dl.Body))
	assert.Equal(t, "Pay", dl.Property(message.PropDLQOriginTopic))
	assert.Equal(t, res[0].UniqKey, dl.Property(message.PropDLQOriginMessageID))
	assert.Equal(t, res[0].UniqKey, dl.UniqKey)
	assert.Equal(t, int32(16), dl.ReconsumeTimes)
	assert.Equal(t, []string{"order-42"}, dl.Keys())
	assert.Contains(t, dl.Property(message.PropDLQReason), "RETRY_LATER")
}

// A handler that fails the first 3 times gets the message 4 times and it
// is never dead-lettered.
func TestRetryThenSuccess(t *testing.T) {
	clk := newFakeClock()
	pc := retryCluster(t, clk, "Ship")
	var n atomic.Int64
	c := pc.consumer(t, "ship-1", "ship", "Ship", "*", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		if n.Add(1) <= 3 {
			return client.ConsumeRetryLater
		}
		return client.ConsumeSuccess
	})
	defer c.Shutdown(context.Background())
	_, err := pc.p.Send(t.Context(), &client.Message{Topic: "Ship", Body: []byte("parcel")})
	require.NoError(t, err)
	levels, err := broker.ParseDelayLevels(broker.DefaultMessageDelayLevel)
	require.NoError(t, err)
	for k := 0; k < 4; k++ {
		require.Eventually(t, func() bool { return n.Load() == int64(k+1) }, 10*time.Second, time.Millisecond)
		require.Eventually(t, func() bool { return handledSoFar(c) == int64(k+1) }, 10*time.Second, time.Millisecond)
		if k < 3 {
			clk.Advance(levels[3+k-1])
		}
	}
	clk.Advance(3 * time.Hour)
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, int64(4), n.Load())
	pull, err := client.NewPullConsumer(t.Context(), pc.cfg, "inspect")
	require.NoError(t, err)
	defer pull.Close()
	_, err = pull.Queues(t.Context(), "%DLQ%ship")
	assert.ErrorIs(t, err, client.ErrTopicNotFound, "no dead-letter topic: nothing was dead-lettered")
}
