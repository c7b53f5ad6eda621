package client

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/message"
)

// holdSends makes b's SendRequests wait until the returned release is
// called (at the latest when the test ends).
func holdSends(t *testing.T, b *fakeBroker) (release func()) {
	hold := make(chan struct{})
	b.configure(func(b *fakeBroker) { b.hold = hold })
	var once sync.Once
	release = func() {
		once.Do(func() {
			b.configure(func(b *fakeBroker) { b.hold = nil })
			close(hold)
		})
	}
	t.Cleanup(release) // before the fake's server stops (cleanups run last first)
	return release
}

// Trap 1: a ShardingKey keeps its order with no option: the default
// selector hashes it.
func TestDefaultSelectorHonoursShardingKey(t *testing.T) {
	a := startBroker(t, "a", 4, "T")
	b := startBroker(t, "b", 4, "T")
	p := newTestProducer(t, testConfig(t, startNameServer(t, a, b)))
	for k := range 10 {
		key := fmt.Sprint("order-", k)
		h := fnv.New32a()
		_, _ = h.Write([]byte(key))
		want := int(h.Sum32() % 8) // queues a#0..3, b#0..3
		for range 3 {
			res, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x"), ShardingKey: key})
			require.NoError(t, err)
			got := int(res.QueueID)
			if res.Broker == "b" {
				got += 4
			}
			require.Equal(t, want, got, "key %s", key)
		}
	}
	counts := map[string]int{}
	for range 8 {
		res, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
		require.NoError(t, err)
		counts[fmt.Sprint(res.Broker, res.QueueID)]++
	}
	assert.Len(t, counts, 8, "without a key: round-robin")
}

// Trap 1: RoundRobin chosen explicitly refuses a ShardingKey instead of
// losing its order; a batch's keys must agree under the default selector.
func TestShardingKeyRefused(t *testing.T) {
	a := startBroker(t, "a", 4, "T")
	ns := startNameServer(t, a)
	rr := newTestProducer(t, testConfig(t, ns), WithQueueSelector(&RoundRobin{}))
	_, err := rr.Send(t.Context(), &Message{Topic: "T", Body: []byte("x"), ShardingKey: "order-1"})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), `"order-1"`)
	assert.Contains(t, err.Error(), "RoundRobin")

	var got error
	done := make(chan struct{})
	rr.SendAsync(t.Context(), &Message{Topic: "T", Body: []byte("x"), ShardingKey: "order-1"}, func(_ *Message, _ SendResult, err error) {
		got = err
		close(done)
	})
	<-done
	require.ErrorIs(t, got, ErrInvalidArgument)
	require.ErrorIs(t, rr.SendOneway(t.Context(), &Message{Topic: "T", Body: []byte("x"), ShardingKey: "k"}), ErrInvalidArgument)
	_, err = rr.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
	require.NoError(t, err, "without a key RoundRobin works")

	p := newTestProducer(t, testConfig(t, ns))
	_, err = p.SendBatch(t.Context(), []*Message{{Topic: "T", Body: []byte("x"), ShardingKey: "k1"}, {Topic: "T", Body: []byte("y"), ShardingKey: "k2"}})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), `"k2"`)
	res, err := p.SendBatch(t.Context(), []*Message{{Topic: "T", Body: []byte("x")}, {Topic: "T", Body: []byte("y"), ShardingKey: "k1"}})
	require.NoError(t, err)
	one, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("z"), ShardingKey: "k1"})
	require.NoError(t, err)
	assert.Equal(t, one.QueueID, res[0].QueueID, "a batch goes to the queue of its key")
}

// uniqKeys decodes the client message ids of a request's records.
func uniqKeys(t *testing.T, req *gantryv1.SendRequest) []string {
	var keys []string
	for _, recs := range req.GetRecords() {
		for len(recs) > 0 {
			m, n, err := message.Decode(recs)
			require.NoError(t, err)
			keys = append(keys, m.UniqKey())
			recs = recs[n:]
		}
	}
	return keys
}

// Trap 4: an indeterminate send names its queue and its messages' ids, for
// Send, SendBatch and SendAsync, whether the broker or the deadline made it
// indeterminate.
func TestIndeterminateErrorCarriesQueueAndKeys(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	var mu sync.Mutex
	var sent []string
	a.setFault(func(_ int64, req *gantryv1.SendRequest) *sendFault {
		mu.Lock()
		sent = uniqKeys(t, req)
		mu.Unlock()
		return &sendFault{code: codes.DeadlineExceeded, msg: "flush timeout", indeterminate: true}
	})
	p := newTestProducer(t, testConfig(t, startNameServer(t, a)))
	lastSent := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return sent
	}
	check := func(err error, n int) {
		t.Helper()
		var ind *IndeterminateError
		require.ErrorAs(t, err, &ind)
		assert.Equal(t, Queue{Topic: "T", BrokerName: "a", Broker: a.addr, ID: 0}, ind.Queue)
		require.Len(t, ind.UniqKeys, n)
		assert.Equal(t, lastSent(), ind.UniqKeys, "the ids of the messages sent, in order")
		assert.Contains(t, err.Error(), "QueryMessageByUniqKey")
		if n == 1 {
			assert.Contains(t, err.Error(), ind.UniqKeys[0], "the id to check")
		}
	}

	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
	check(err, 1)
	_, err = p.SendBatch(t.Context(), []*Message{{Topic: "T", Body: []byte("x")}, {Topic: "T", Body: []byte("y")}, {Topic: "T", Body: []byte("z")}})
	check(err, 3)
	errc := make(chan error, 1)
	p.SendAsync(t.Context(), &Message{Topic: "T", Body: []byte("x")}, func(_ *Message, _ SendResult, err error) { errc <- err })
	check(<-errc, 1)

	// The deadline passes after the request was written.
	release := holdSends(t, a)
	defer release()
	a.setFault(func(_ int64, req *gantryv1.SendRequest) *sendFault {
		mu.Lock()
		sent = uniqKeys(t, req)
		mu.Unlock()
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = p.Send(ctx, &Message{Topic: "T", Body: []byte("late")})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var ind *IndeterminateError
	require.ErrorAs(t, err, &ind)
	assert.Equal(t, Queue{Topic: "T", BrokerName: "a", Broker: a.addr, ID: 0}, ind.Queue)
	release() // the broker now reads the request and records its ids
	require.Eventually(t, func() bool { return slices.Equal(lastSent(), ind.UniqKeys) }, 5*time.Second, time.Millisecond)
}

// Trap 5: SendAsync past the buffer bound blocks instead of buffering
// without limit, and resumes when the broker answers.
func TestSendAsyncBlocksWhenBufferFull(t *testing.T) {
	a := startBroker(t, "a", 2, "T")
	release := holdSends(t, a)
	p := newTestProducer(t, testConfig(t, startNameServer(t, a)), WithMaxBuffered(4, 1<<20))

	const n = 10
	var accepted, done atomic.Int64
	var wg sync.WaitGroup
	wg.Add(n)
	cb := func(_ *Message, _ SendResult, err error) {
		assert.NoError(t, err)
		done.Add(1)
		wg.Done()
	}
	go func() {
		for i := range n {
			p.SendAsync(t.Context(), &Message{Topic: "T", Body: fmt.Appendf(nil, "%d", i)}, cb)
			accepted.Add(1)
		}
	}()
	require.Eventually(t, func() bool { return accepted.Load() == 4 }, 5*time.Second, time.Millisecond)
	require.Never(t, func() bool { return accepted.Load() > 4 }, 200*time.Millisecond, 5*time.Millisecond,
		"the fifth waits for room")
	assert.Zero(t, done.Load())
	release()
	wg.Wait()
	assert.Equal(t, int64(n), accepted.Load())
	assert.Equal(t, n, len(a.records("T", 0))+len(a.records("T", 1)))
}

// The byte bound: a send that does not fit waits; one larger than the
// bound goes alone; a wait that outlives ctx fails with ctx's error.
func TestMaxBufferedBytes(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	p := newTestProducer(t, testConfig(t, startNameServer(t, a)), WithMaxBuffered(100, 2500))
	big := make([]byte, 4000)
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: big})
	require.NoError(t, err, "larger than the bound, alone: admitted")

	release := holdSends(t, a)
	body := make([]byte, 1000)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		p.SendAsync(t.Context(), &Message{Topic: "T", Body: body}, func(_ *Message, _ SendResult, err error) {
			assert.NoError(t, err)
			wg.Done()
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = p.Send(ctx, &Message{Topic: "T", Body: body})
	require.ErrorIs(t, err, context.DeadlineExceeded, "a third 1,000 bytes do not fit in 2,500")
	var ind *IndeterminateError
	assert.False(t, errors.As(err, &ind), "never sent: definite")
	errc := make(chan error, 1)
	p.SendAsync(ctx, &Message{Topic: "T", Body: body}, func(_ *Message, _ SendResult, err error) { errc <- err })
	require.ErrorIs(t, <-errc, context.DeadlineExceeded)
	release()
	wg.Wait()
	assert.Len(t, a.records("T", 0), 3)
}

// Flush waits for the SendAsyncs accepted before it, callbacks included.
func TestFlushWaitsForPendingSendAsync(t *testing.T) {
	a := startBroker(t, "a", 2, "T")
	p := newTestProducer(t, testConfig(t, startNameServer(t, a)))
	require.NoError(t, p.Flush(t.Context()), "nothing pending")
	release := holdSends(t, a)

	const n = 5
	var done atomic.Int64
	for i := range n {
		p.SendAsync(t.Context(), &Message{Topic: "T", Body: fmt.Appendf(nil, "%d", i)}, func(_ *Message, _ SendResult, err error) {
			assert.NoError(t, err)
			done.Add(1)
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.Flush(ctx), context.DeadlineExceeded)

	flushed := make(chan error, 1)
	go func() { flushed <- p.Flush(t.Context()) }()
	require.Never(t, func() bool { return len(flushed) > 0 }, 100*time.Millisecond, 5*time.Millisecond)
	release()
	require.NoError(t, <-flushed)
	assert.Equal(t, int64(n), done.Load(), "every callback returned before Flush")
}

// Close with a context already cancelled still completes the sends in
// flight within its grace, and leaves no goroutine behind.
func TestCloseCancelledCtxDrains(t *testing.T) {
	a := startBroker(t, "a", 2, "T")
	a.configure(func(b *fakeBroker) { b.delay = 50 * time.Millisecond })
	ns := startNameServer(t, a)
	before := runtime.NumGoroutine()
	p, err := NewProducer(t.Context(), testConfig(t, ns))
	require.NoError(t, err)
	const n = 20
	var ok atomic.Int64
	for i := range n {
		p.SendAsync(t.Context(), &Message{Topic: "T", Body: fmt.Appendf(nil, "%d", i)}, func(_ *Message, _ SendResult, err error) {
			if assert.NoError(t, err) {
				ok.Add(1)
			}
		})
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.NoError(t, p.Close(ctx))
	assert.Equal(t, int64(n), ok.Load())
	assert.Equal(t, n, len(a.records("T", 0))+len(a.records("T", 1)))
	// Polled here, not by assert.Eventually, whose own goroutines count.
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines after Close")
}

// A Close whose ctx ends with sends still out fails them with ErrClosed
// (indeterminate when written), returns ctx's error, and still stops
// everything.
func TestCloseAbandonsAtCtxEnd(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	p, err := NewProducer(t.Context(), testConfig(t, startNameServer(t, a)))
	require.NoError(t, err)
	_, err = p.Send(t.Context(), &Message{Topic: "T", Body: []byte("warm")})
	require.NoError(t, err)
	holdSends(t, a)

	errs := make(chan error, 4)
	for range 3 {
		p.SendAsync(t.Context(), &Message{Topic: "T", Body: []byte("x")}, func(_ *Message, _ SendResult, err error) { errs <- err })
	}
	go func() {
		_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("y")})
		errs <- err
	}()
	require.Eventually(t, func() bool { return p.buf.pending() == 4 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err = p.Close(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "4 messages not completed")
	for range 4 {
		assert.ErrorIs(t, <-errs, ErrClosed)
	}
}

// Close wakes the sends waiting for room: they fail with ErrClosed.
func TestCloseWakesBlockedSends(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	holdSends(t, a)
	p, err := NewProducer(t.Context(), testConfig(t, startNameServer(t, a)), WithMaxBuffered(1, 1<<20))
	require.NoError(t, err)
	errs := make(chan error, 3)
	cb := func(_ *Message, _ SendResult, err error) { errs <- err }
	p.SendAsync(t.Context(), &Message{Topic: "T", Body: []byte("in")}, cb)
	go p.SendAsync(t.Context(), &Message{Topic: "T", Body: []byte("waits")}, cb)
	go func() {
		_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("waits too")})
		errs <- err
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.Close(ctx), context.DeadlineExceeded)
	for range 3 {
		assert.ErrorIs(t, <-errs, ErrClosed)
	}
}

// Warm-up loads the routes and connects before NewProducer returns; a
// missing topic or a wrong nameserver fails it, naming them.
func TestWarmUp(t *testing.T) {
	a := startBroker(t, "a", 2, "T", "U")
	ns := startNameServer(t, a)
	p := newTestProducer(t, testConfig(t, ns), WithWarmUp("T", "U"))
	assert.NotNil(t, p.c.routes.cached("T"))
	assert.NotNil(t, p.c.routes.cached("U"))
	cc, err := p.c.pool.get(a.addr)
	require.NoError(t, err)
	assert.Equal(t, connectivity.Ready, cc.GetState())

	lazy := newTestProducer(t, testConfig(t, ns))
	assert.Nil(t, lazy.c.routes.cached("T"), "without WithWarmUp NewProducer is lazy")

	_, err = NewProducer(t.Context(), testConfig(t, ns), WithWarmUp("T", "Missing"))
	require.ErrorIs(t, err, ErrTopicNotFound)
	assert.Contains(t, err.Error(), `"Missing"`)

	dead := startNameServer(t, a)
	dead.srv.Stop()
	cfg := testConfig(t, dead)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err = NewProducer(ctx, cfg, WithWarmUp("T"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), dead.addr)

	_, err = NewProducer(t.Context(), testConfig(t, ns), WithWarmUp("bad topic"))
	require.ErrorIs(t, err, ErrInvalidArgument)
}
