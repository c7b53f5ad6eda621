package embedded_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/internal/testutil"
	"github.com/gantrymq/gantry/message"
)

// fakeClock is the broker's injected clock: tests move it.
type fakeClock = testutil.Clock

func newFakeClock() *fakeClock {
	return testutil.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
}

// retryCluster is a cluster on a fake clock whose clients and locks do
// not expire while the clock jumps hours.
func retryCluster(t *testing.T, clk *fakeClock, topic string) *pushCluster {
	t.Helper()
	return clockCluster(t, clk, topic, 1)
}

// clockCluster is a push cluster whose broker runs on clk, with client
// expiry and queue locks out of the way of clk's jumps.
func clockCluster(t *testing.T, clk *fakeClock, topic string, queues int32) *pushCluster {
	t.Helper()
	return startPushCluster(t, embedded.Options{NoAutoCreateTopics: true, Broker: func(cfg *broker.Config) {
		cfg.Now = clk.Now
		cfg.ChannelExpiredTimeout = 1000 * time.Hour
		cfg.QueueLockTTL = 1000 * time.Hour
	}}, topic, queues)
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
		assert.Equal(t, res.UniqKey, d.uniq, "delivery %d keeps the message id", k)
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
	defer pull.Close(context.Background())
	qs, err := pull.Queues(t.Context(), "%DLQ%pay")
	require.NoError(t, err)
	require.Len(t, qs, 1)
	r, err := pull.Pull(t.Context(), qs[0], 0, client.PullOptions{MaxMessages: 10})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	dl := r.Messages[0]
	assert.Equal(t, "charge 42", string(dl.Body))
	assert.Equal(t, "Pay", dl.Property(message.PropDLQOriginTopic))
	assert.Equal(t, res.UniqKey, dl.Property(message.PropDLQOriginMessageID))
	assert.Equal(t, res.UniqKey, dl.UniqKey)
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
	defer pull.Close(context.Background())
	_, err = pull.Queues(t.Context(), "%DLQ%ship")
	assert.ErrorIs(t, err, client.ErrTopicNotFound, "no dead-letter topic: nothing was dead-lettered")
}

// retryCounts is the size of the counts run: 100,000 messages, fewer under
// the race detector (GANTRY_RETRY_MESSAGES overrides).
func retryCounts(t *testing.T) int {
	n := 100_000
	if raceEnabled {
		n = 20_000
	}
	return testutil.EnvInt(t, "GANTRY_RETRY_MESSAGES", n)
}

// Of n messages, those with i%10 == 0 always fail and those with
// i%10 == 1 fail once: the run ends with exactly n/10 dead letters, every
// other message handled successfully exactly once, and the fail-once ones
// delivered twice.
func TestRetryCounts(t *testing.T) {
	clk := newFakeClock()
	pc := retryCluster(t, clk, "Jobs")
	n := retryCounts(t)
	var mu sync.Mutex
	deliveries := make([]int, n)
	successes := make([]int, n)
	var events atomic.Int64
	h := func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		events.Add(1)
		m := msgs[0]
		var i int
		if _, err := fmt.Sscanf(string(m.Body), "job-%d", &i); err != nil || i < 0 || i >= n {
			t.Errorf("foreign body %q", m.Body)
			return client.ConsumeSuccess
		}
		mu.Lock()
		defer mu.Unlock()
		deliveries[i]++
		switch {
		case i%10 == 0, i%10 == 1 && deliveries[i] == 1:
			return client.ConsumeRetryLater
		}
		successes[i]++
		return client.ConsumeSuccess
	}
	c := pc.consumer(t, "jobs-1", "jobs", "Jobs", "*", h)
	defer c.Shutdown(context.Background())
	pc.send(t, "Jobs", "job", 0, n, nil, nil)

	quiet := func() { // no handler call for 300 ms
		for last := int64(-1); ; {
			now := events.Load()
			if now == last {
				return
			}
			last = now
			time.Sleep(300 * time.Millisecond)
		}
	}
	levels, err := broker.ParseDelayLevels(broker.DefaultMessageDelayLevel)
	require.NoError(t, err)
	// Each round delivers a known number of messages; once they are all
	// handled or sent back (the consumer's commit offsets, retry queue
	// included, add up to every delivery so far), the clock moves to the
	// next rung of the ladder.
	want := int64(n)
	settle := func(round int) {
		require.Eventually(t, func() bool { return events.Load() == want && handledSoFar(c) == want },
			2*time.Minute, 5*time.Millisecond, "round %d: %d handler calls, %d settled, want %d", round, events.Load(), handledSoFar(c), want)
	}
	settle(0)
	for k := range 16 {
		clk.Advance(levels[3+k-1])
		want += int64(n / 10) // the always-failing ones
		if k == 0 {
			want += int64(n / 10) // and the fail-once ones, once
		}
		settle(k + 1)
	}
	clk.Advance(3 * time.Hour)
	quiet()

	mu.Lock()
	handled, dead := 0, 0
	for i := range n {
		switch i % 10 {
		case 0:
			require.Equal(t, 17, deliveries[i], "message %d: 1 + 16 deliveries", i)
			require.Zero(t, successes[i])
			dead++
		case 1:
			require.Equal(t, 2, deliveries[i], "message %d", i)
			require.Equal(t, 1, successes[i], "message %d", i)
		default:
			require.Equal(t, 1, deliveries[i], "message %d", i)
			require.Equal(t, 1, successes[i], "message %d", i)
		}
		handled += successes[i]
	}
	mu.Unlock()

	pull, err := client.NewPullConsumer(t.Context(), pc.cfg, "inspect")
	require.NoError(t, err)
	defer pull.Close(context.Background())
	qs, err := pull.Queues(t.Context(), "%DLQ%jobs")
	require.NoError(t, err)
	seen := map[string]bool{}
	for off := int64(0); ; {
		r, err := pull.Pull(t.Context(), qs[0], off, client.PullOptions{MaxMessages: 256})
		require.NoError(t, err)
		for _, m := range r.Messages {
			require.Equal(t, int32(16), m.ReconsumeTimes)
			require.Equal(t, "Jobs", m.Property(message.PropDLQOriginTopic))
			seen[string(m.Body)] = true
		}
		if r.Status != client.PullFound {
			break
		}
		off = r.NextOffset
	}
	require.Len(t, seen, n/10, "exactly the always-failing messages are dead letters, once each")
	fmt.Printf("retry counts: %d messages: %d handled successfully, %d dead letters, %d handler calls\n", n, handled, len(seen), events.Load())
}

// A group with an exponential retry policy retries after 1 s, 2 s, 4 s,
// 4 s (capped), on the broker's clock, instead of the ladder.
func TestRetryExponentialPolicy(t *testing.T) {
	clk := newFakeClock()
	pc := retryCluster(t, clk, "Mail")
	require.NoError(t, pc.admin.CreateGroup(t.Context(), client.GroupConfig{Name: "mail",
		RetryPolicy: &client.RetryPolicy{Initial: time.Second, Max: 4 * time.Second, Multiplier: 2}}))
	groups, err := pc.admin.Groups(t.Context())
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.NotNil(t, groups[0].RetryPolicy)
	assert.Equal(t, 4*time.Second, groups[0].RetryPolicy.Max)

	var mu sync.Mutex
	var at []time.Time
	c := pc.consumer(t, "mail-1", "mail", "Mail", "*", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, clk.Now())
		if len(at) <= 4 {
			return client.ConsumeRetryLater
		}
		return client.ConsumeSuccess
	})
	defer c.Shutdown(context.Background())
	_, err = pc.p.Send(t.Context(), &client.Message{Topic: "Mail", Body: []byte("hello")})
	require.NoError(t, err)
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(at) }
	for k := 0; k < 5; k++ {
		require.Eventually(t, func() bool { return count() == k+1 }, 10*time.Second, time.Millisecond, "delivery %d", k+1)
		require.Eventually(t, func() bool { return handledSoFar(c) == int64(k+1) }, 10*time.Second, time.Millisecond)
		if k < 4 {
			// Move in small steps: the retry must not come before its time.
			for step := time.Duration(0); step < want[k]-250*time.Millisecond; step += 250 * time.Millisecond {
				clk.Advance(250 * time.Millisecond)
				time.Sleep(20 * time.Millisecond)
				require.Equal(t, k+1, count(), "retry %d came early", k+1)
			}
			clk.Advance(250 * time.Millisecond)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for k := 1; k < len(at); k++ {
		assert.InDelta(t, want[k-1].Seconds(), at[k].Sub(at[k-1]).Seconds(), 0.5, "retry %d", k)
	}
}

// A push consumer hands failed messages back in batches: while failures
// trickle in (one worker, 200 µs a message) a call gathers them for a few
// milliseconds and carries many, not one or a few.
func TestSendBackBatched(t *testing.T) {
	const n = 300
	pc := newPushCluster(t, "Burst", 4)
	pc.send(t, "Burst", "m", 0, n, nil, nil)
	var calls, sentBack atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*gantryv1.SendBackBatchRequest); ok {
			calls.Add(1)
			sentBack.Add(int64(len(r.GetRequests())))
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	pc.cfg.DialOptions = append(pc.cfg.DialOptions, grpc.WithChainUnaryInterceptor(count))
	var failed atomic.Int64
	c := pc.consumer(t, "c1", "burst", "Burst", "*", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		if msgs[0].ReconsumeTimes > 0 {
			return client.ConsumeSuccess
		}
		failed.Add(1)
		time.Sleep(200 * time.Microsecond)
		return client.ConsumeRetryLater
	}, client.WithConsumeConcurrency(1))
	require.Eventually(t, func() bool { return sentBack.Load() == n }, 30*time.Second, 10*time.Millisecond,
		"sent back %d of %d", sentBack.Load(), n)
	require.NoError(t, c.Shutdown(t.Context())) // after the last call's answer
	t.Logf("%d failed messages sent back in %d calls", sentBack.Load(), calls.Load())
	assert.EqualValues(t, n, failed.Load())
	assert.LessOrEqual(t, calls.Load()*3, sentBack.Load(), "at least 3 messages a call on average (about 1.3 without gathering)")
}
