package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

type pullAnswer struct {
	res  broker.PullResult
	err  error
	at   time.Time
	msgs []string
}

// startPull runs a Pull in the background and waits until it is held on
// its queue.
func startPull(t *testing.T, ctx context.Context, b *broker.Broker, req broker.PullRequest) <-chan pullAnswer {
	t.Helper()
	done := make(chan pullAnswer, 1)
	go func() {
		res, err := b.Pull(ctx, req)
		a := pullAnswer{res: res, err: err, at: time.Now()}
		if err == nil {
			a.msgs, a.err = decodeBodies(&res) // no require off the test goroutine
		}
		done <- a
	}()
	require.Eventually(t, func() bool { return b.Watched(req.Topic, req.QueueID) }, 5*time.Second, time.Millisecond)
	return done
}

func decodeBodies(res *broker.PullResult) ([]string, error) {
	defer res.Release()
	var out []string
	for _, r := range res.Records {
		m, _, err := message.Decode(r.B)
		if err != nil {
			return nil, err
		}
		out = append(out, string(m.Body))
	}
	return out, nil
}

func await(t *testing.T, done <-chan pullAnswer) pullAnswer {
	t.Helper()
	return awaitWithin(t, done, 10*time.Second)
}

func awaitWithin(t *testing.T, done <-chan pullAnswer, d time.Duration) pullAnswer {
	t.Helper()
	select {
	case a := <-done:
		return a
	case <-time.After(d):
		require.FailNow(t, "pull did not return")
		return pullAnswer{}
	}
}

func TestLongPollWokenBySend(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 2)
	// Woken by the send, not by the end of its hold (nor by a poll every
	// second or so): the answer comes within a small part of the hold,
	// however busy the machine.
	const hold = time.Minute
	for _, offset := range []int64{0, 1} { // an empty queue, then the queue's end
		done := startPull(t, t.Context(), b, broker.PullRequest{Topic: "T", QueueID: 1, Offset: offset, Hold: hold})
		start := time.Now()
		send(t, b, newMsg("T", 1, "hello", ""))
		a := awaitWithin(t, done, hold)
		require.NoError(t, a.err)
		latency := a.at.Sub(start)
		t.Logf("offset %d: held pull answered %s after the send", offset, latency)
		assert.Less(t, latency, hold/60)
		assert.Equal(t, store.Found, a.res.Status)
		assert.Equal(t, []string{"hello"}, a.msgs)
		assert.Equal(t, offset+1, a.res.NextOffset)
	}
}

func TestLongPollHoldExpires(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 1)
	start := time.Now()
	res, err := b.Pull(t.Context(), broker.PullRequest{Topic: "T", Hold: 150 * time.Millisecond})
	elapsed := time.Since(start)
	require.NoError(t, err)
	assert.Equal(t, store.NoMessageInQueue, res.Status)
	assert.Empty(t, res.Records)
	assert.GreaterOrEqual(t, elapsed, 150*time.Millisecond)
	assert.Less(t, elapsed, time.Second)
}

func TestLongPollMaxHold(t *testing.T) {
	cfg := testConfig(t)
	cfg.LongPollingMaxHold = 100 * time.Millisecond
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)
	start := time.Now()
	_, err := b.Pull(t.Context(), broker.PullRequest{Topic: "T", Hold: time.Minute})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), time.Second, "held at most longPollingMaxHold")
}

func TestLongPollAnswersBeforeDeadline(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 1)
	// The hold ends deadlineMargin (50 ms) before the deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	before := time.Until(deadline)
	hold := b.HoldFor(ctx, 10*time.Second)
	after := time.Until(deadline)
	assert.LessOrEqual(t, hold, before-50*time.Millisecond)
	assert.GreaterOrEqual(t, hold, after-50*time.Millisecond)

	// Held to its end, the pull answers (empty), not the context's error,
	// even when the answering goroutine runs only after the deadline too
	// (a busy machine): the deadline's own wake-up loses to the hold's.
	res, err := b.Pull(ctx, broker.PullRequest{Topic: "T", Hold: 10 * time.Second})
	require.NoError(t, err, "the answer of a hold that ended")
	assert.Equal(t, store.NoMessageInQueue, res.Status)
	assert.False(t, time.Now().Before(deadline.Add(-50*time.Millisecond)), "held until the margin before the deadline")

	// A deadline closer than the safety margin: no hold at all.
	ctx, cancel = context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	assert.LessOrEqual(t, b.HoldFor(ctx, 10*time.Second), time.Duration(0))
	_, err = b.Pull(ctx, broker.PullRequest{Topic: "T", Hold: 10 * time.Second})
	require.NoError(t, err)
}

func TestLongPollCancelled(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := startPull(t, ctx, b, broker.PullRequest{Topic: "T", Hold: 10 * time.Second})
	cancel()
	a := await(t, done)
	require.ErrorIs(t, a.err, context.Canceled)
}

func TestLongPollOtherQueueNotWoken(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 2)
	createTopic(t, b, "U", 2)
	const hold = 300 * time.Millisecond
	start := time.Now()
	done := startPull(t, t.Context(), b, broker.PullRequest{Topic: "T", QueueID: 1, Hold: hold})
	send(t, b, newMsg("T", 0, "other queue", ""))
	send(t, b, newMsg("U", 1, "other topic", ""))
	assert.True(t, b.Watched("T", 1), "dispatches to other queues leave the watch in place")
	a := await(t, done)
	require.NoError(t, a.err)
	assert.Equal(t, store.NoMessageInQueue, a.res.Status)
	assert.Empty(t, a.msgs)
	assert.GreaterOrEqual(t, a.at.Sub(start), hold, "held for the whole hold")
}

func TestLongPollWokenByClose(t *testing.T) {
	b, err := broker.Open(t.Context(), testConfig(t))
	require.NoError(t, err)
	createTopic(t, b, "T", 1)
	done := startPull(t, t.Context(), b, broker.PullRequest{Topic: "T", Hold: 10 * time.Second})
	start := time.Now()
	require.NoError(t, b.Close(t.Context()))
	a := await(t, done)
	require.NoError(t, a.err)
	assert.Empty(t, a.msgs)
	assert.Less(t, a.at.Sub(start), time.Second)
}

func TestLongPollFilteredWake(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 1)
	done := startPull(t, t.Context(), b, broker.PullRequest{Topic: "T", Filter: "B", Hold: 5 * time.Second})
	send(t, b, newMsg("T", 0, "a", "A"))
	a := await(t, done)
	require.NoError(t, a.err)
	assert.Equal(t, store.NoMatchedMessage, a.res.Status, "woken, nothing matched: the consumer moves on")
	assert.Equal(t, int64(1), a.res.NextOffset)
}

// TestConcurrentSendPull runs long-polling consumers against concurrent
// producers: every message arrives once, in order, per queue.
func TestConcurrentSendPull(t *testing.T) {
	b := openBroker(t, testConfig(t))
	const queues, perQueue = 4, 200
	createTopic(t, b, "T", queues)
	var wg sync.WaitGroup
	got := make([][]string, queues)
	errs := make(chan error, 2*queues)
	for q := range int32(queues) {
		wg.Go(func() {
			for i := range perQueue {
				if _, err := b.Send(t.Context(), "T", []*message.Message{newMsg("T", q, fmt.Sprint(i), "")}); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			var off int64
			for len(got[q]) < perQueue {
				res, err := b.Pull(t.Context(), broker.PullRequest{Topic: "T", QueueID: q, Offset: off, Hold: 2 * time.Second})
				if err != nil {
					errs <- err
					return
				}
				off = res.NextOffset
				ms, err := decodeBodies(&res)
				if err != nil {
					errs <- err
					return
				}
				got[q] = append(got[q], ms...)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for q := range queues {
		require.Len(t, got[q], perQueue)
		for i, body := range got[q] {
			assert.Equal(t, fmt.Sprint(i), body)
		}
	}
}
