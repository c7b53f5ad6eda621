package embedded_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/message"
)

// settleRecorder records a push consumer's deliveries and the send-backs
// its client makes (their delay levels, by body).
type settleRecorder struct {
	mu        sync.Mutex
	calls     [][]string // bodies of each handler call
	times     map[string][]int32
	topics    map[string]string
	levels    []int32 // delay_level of every message sent back
	sentBacks int
}

func newSettleRecorder() *settleRecorder {
	return &settleRecorder{times: map[string][]int32{}, topics: map[string]string{}}
}

// intercept counts the send-backs of the clients made with cfg.
func (r *settleRecorder) intercept(cfg *client.Config) {
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if b, ok := req.(*gantryv1.SendBackBatchRequest); ok {
			r.mu.Lock()
			for _, sb := range b.GetRequests() {
				r.levels = append(r.levels, sb.GetDelayLevel())
			}
			r.sentBacks += len(b.GetRequests())
			r.mu.Unlock()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cfg.DialOptions = append(slices.Clone(cfg.DialOptions), grpc.WithChainUnaryInterceptor(count))
}

// record notes a handler call and returns its number (from 0).
func (r *settleRecorder) record(msgs []*client.MessageExt) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var bodies []string
	for _, m := range msgs {
		b := string(m.Body)
		bodies = append(bodies, b)
		r.times[b] = append(r.times[b], m.ReconsumeTimes)
		r.topics[b] = m.Topic
	}
	r.calls = append(r.calls, bodies)
	return len(r.calls) - 1
}

func (r *settleRecorder) deliveries() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		n += len(c)
	}
	return n
}

func (r *settleRecorder) snapshot() (calls [][]string, times map[string][]int32, levels []int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls), r.times, slices.Clone(r.levels)
}

// sendStored sends n messages "m-<i>" to topic and waits until they are
// dispatched to their queues: a pull then sees them all, and a handler
// gets them in one batch.
func sendStored(t *testing.T, pc *pushCluster, topic string, n int) {
	t.Helper()
	pc.send(t, topic, "m", 0, n, nil, nil)
	require.Eventually(t, func() bool {
		qs, err := pc.admin.TopicStatus(t.Context(), topic)
		var total int64
		for _, q := range qs {
			total += q.MaxOffset
		}
		return err == nil && total == int64(n)
	}, 10*time.Second, time.Millisecond)
}

// deadLetters returns the messages in group's dead-letter queue.
func deadLetters(t *testing.T, cfg client.Config, group string) []*client.MessageExt {
	t.Helper()
	pull, err := client.NewPullConsumer(t.Context(), cfg, "inspect")
	require.NoError(t, err)
	defer pull.Close(context.Background())
	qs, err := pull.Queues(t.Context(), "%DLQ%"+group)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	r, err := pull.Pull(t.Context(), qs[0], 0, client.PullOptions{MaxMessages: 100})
	require.NoError(t, err)
	return r.Messages
}

// A handler that calls RetryAfter(2s) on one message of a batch of 4 and
// returns ConsumeSuccess: only that message goes back to the broker, at
// delay level 2 (5 s, the smallest level of at least 2 s), and comes back
// through the retry topic once the broker's clock passed 5 s; the others
// are not delivered again. With ConsumeRetryLater the others go back on
// the retry ladder (level 0) and the marked one keeps its level.
func TestRetryAfterRetriesOnlyThatMessage(t *testing.T) {
	tests := []struct {
		name       string
		res        client.ConsumeResult
		wantLevels []int32
	}{
		{"rest succeeds", client.ConsumeSuccess, []int32{2}},
		{"rest fails", client.ConsumeRetryLater, []int32{0, 0, 0, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			pc := retryCluster(t, clk, "Settle")
			sendStored(t, pc, "Settle", 4)
			rec := newSettleRecorder()
			rec.intercept(&pc.cfg)
			c := pc.consumer(t, "c1", "settle", "Settle", "*", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
				rec.record(msgs)
				res := client.ConsumeSuccess
				for _, m := range msgs {
					if string(m.Body) == "m-2" && m.ReconsumeTimes == 0 {
						m.RetryAfter(2 * time.Second)
						res = tt.res
					}
				}
				return res
			}, client.WithConsumeBatchSize(4))
			defer c.Shutdown(context.Background())

			// Sent back and out of the queue, then due at level 2's delay.
			require.Eventually(t, func() bool { return handledSoFar(c) == 4 }, 10*time.Second, time.Millisecond)
			levels, err := broker.ParseDelayLevels(broker.DefaultMessageDelayLevel)
			require.NoError(t, err)
			clk.Advance(levels[1])
			if tt.res == client.ConsumeRetryLater {
				clk.Advance(levels[2]) // the ladder's first retry: level 3
			}
			want := 4 + len(tt.wantLevels)
			require.Eventually(t, func() bool { return rec.deliveries() == want }, 10*time.Second, time.Millisecond)
			time.Sleep(300 * time.Millisecond) // nothing more comes
			calls, times, got := rec.snapshot()
			assert.Equal(t, [][]string{{"m-0", "m-1", "m-2", "m-3"}}, calls[:1])
			slices.Sort(got)
			assert.Equal(t, tt.wantLevels, got, "delay levels sent back")
			assert.Equal(t, []int32{0, 1}, times["m-2"], "m-2 came back once, as a retry")
			assert.Equal(t, "Settle", rec.topics["m-2"], "the retry shows its original topic")
			for _, b := range []string{"m-0", "m-1", "m-3"} {
				if tt.res == client.ConsumeSuccess {
					assert.Equal(t, []int32{0}, times[b], "%s is handled once", b)
				} else {
					assert.Equal(t, []int32{0, 1}, times[b], "%s is retried on the ladder", b)
				}
			}
		})
	}
}

// DeadLetter of one message of a batch moves only it to the group's
// dead-letter queue, with its reason; the others are done.
func TestDeadLetterOneMessage(t *testing.T) {
	pc := newPushCluster(t, "Poison", 1)
	sendStored(t, pc, "Poison", 3)
	rec := newSettleRecorder()
	rec.intercept(&pc.cfg)
	c := pc.consumer(t, "c1", "poison", "Poison", "*", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		rec.record(msgs)
		for _, m := range msgs {
			if string(m.Body) == "m-1" {
				m.DeadLetter("cannot parse \x01 body")
			}
		}
		return client.ConsumeSuccess
	}, client.WithConsumeBatchSize(3))
	defer c.Shutdown(context.Background())
	require.Eventually(t, func() bool { return handledSoFar(c) == 3 }, 10*time.Second, time.Millisecond)
	dl := deadLetters(t, pc.cfg, "poison")
	require.Len(t, dl, 1)
	assert.Equal(t, "m-1", string(dl[0].Body))
	assert.Equal(t, "cannot parse   body", dl[0].Property(message.PropDLQReason))
	assert.Equal(t, "Poison", dl[0].Property(message.PropDLQOriginTopic))
	time.Sleep(300 * time.Millisecond) // nothing comes back
	assert.Equal(t, 3, rec.deliveries())
	_, _, levels := rec.snapshot()
	assert.Equal(t, []int32{-1}, levels)
}

// An ordered consumer walks the batch in order: DeadLetter dead-letters
// that message and goes on; at RetryAfter the queue pauses and hands that
// message and those after it again, the messages before it done.
func TestOrderedSettlement(t *testing.T) {
	pc := newPushCluster(t, "Seq", 1)
	sendStored(t, pc, "Seq", 4)
	rec := newSettleRecorder()
	c := pc.consumer(t, "c1", "seq", "Seq", "*", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		if rec.record(msgs) == 0 && len(msgs) == 4 {
			msgs[1].DeadLetter("bad")
			msgs[2].RetryAfter(10 * time.Millisecond)
			msgs[3].DeadLetter("dropped: handed again after m-2")
		}
		return client.ConsumeSuccess
	}, client.WithOrdered(), client.WithConsumeBatchSize(4))
	defer c.Shutdown(context.Background())
	require.Eventually(t, func() bool { return handledSoFar(c) == 4 }, 10*time.Second, time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	calls, times, _ := rec.snapshot()
	assert.Equal(t, [][]string{{"m-0", "m-1", "m-2", "m-3"}, {"m-2", "m-3"}}, calls)
	assert.Equal(t, []int32{0, 1}, times["m-2"])
	assert.Equal(t, []int32{0, 1}, times["m-3"])
	dl := deadLetters(t, pc.cfg, "seq")
	require.Len(t, dl, 1)
	assert.Equal(t, "m-1", string(dl[0].Body))
}

// In broadcasting RetryAfter hands the message again here, after d:
// nothing goes back to the broker.
func TestBroadcastRetryAfterIsLocal(t *testing.T) {
	pc := newPushCluster(t, "Fan", 1)
	sendStored(t, pc, "Fan", 3)
	rec := newSettleRecorder()
	rec.intercept(&pc.cfg)
	c := pc.consumer(t, "c1", "fan", "Fan", "*", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		rec.record(msgs)
		for _, m := range msgs {
			if string(m.Body) == "m-1" && m.ReconsumeTimes == 0 {
				m.RetryAfter(10 * time.Millisecond)
			}
		}
		return client.ConsumeSuccess
	}, client.WithConsumeModel(client.Broadcasting), client.WithConsumeBatchSize(3))
	defer c.Shutdown(context.Background())
	require.Eventually(t, func() bool { return rec.deliveries() == 4 }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return handledSoFar(c) == 3 }, 10*time.Second, time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	calls, times, levels := rec.snapshot()
	assert.Equal(t, [][]string{{"m-0", "m-1", "m-2"}, {"m-1"}}, calls)
	assert.Equal(t, []int32{0, 1}, times["m-1"])
	assert.Empty(t, levels, "nothing sent back")
}
