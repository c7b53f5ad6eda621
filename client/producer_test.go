package client

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/message"
)

// storedMessage decodes the record of a send result on broker b.
func storedMessage(t *testing.T, b *fakeBroker, topic string, r SendResult) *message.Message {
	t.Helper()
	recs := b.records(topic, r.QueueID)
	require.Less(t, r.QueueOffset, int64(len(recs)))
	m, _, err := message.Decode(recs[r.QueueOffset])
	require.NoError(t, err)
	return m
}

func TestSendSingle(t *testing.T) {
	b := startBroker(t, "a", 4, "T")
	ns := startNameServer(t, b)
	p := newTestProducer(t, testConfig(t, ns), WithProducerGroup("pg"))

	msg := &Message{Topic: "T", Body: []byte("hello"), Tags: "tagA", Keys: []string{"k1", "k2"}, Properties: map[string]string{"color": "red"}}
	res, err := p.Send(t.Context(), msg)
	require.NoError(t, err)
	r := res
	assert.Equal(t, "a", r.Broker)
	assert.Len(t, r.UniqKey, 32)
	assert.Equal(t, r.QueueID, msg.QueueID)

	m := storedMessage(t, b, "T", r)
	assert.Equal(t, []byte("hello"), m.Body)
	assert.Equal(t, "tagA", m.Tags())
	assert.Equal(t, []string{"k1", "k2"}, m.Keys())
	assert.Equal(t, r.UniqKey, m.UniqKey())
	assert.Equal(t, r.MsgID, m.OffsetMsgID())
	color, _ := m.Properties.Get("color")
	assert.Equal(t, "red", color)
	assert.Equal(t, []string{"pg"}, b.groupsSent())
}

func TestSendBatch(t *testing.T) {
	b := startBroker(t, "a", 4, "T")
	ns := startNameServer(t, b)
	p := newTestProducer(t, testConfig(t, ns))

	msgs := []*Message{{Topic: "T", Body: []byte("1")}, {Topic: "T", Body: []byte("2")}, {Topic: "T", Body: []byte("3")}}
	res, err := p.SendBatch(t.Context(), msgs)
	require.NoError(t, err)
	require.Len(t, res, 3)
	for i, r := range res {
		assert.Equal(t, res[0].QueueID, r.QueueID, "one batch goes to one queue")
		assert.Equal(t, res[0].QueueOffset+int64(i), r.QueueOffset)
		assert.Equal(t, []byte(fmt.Sprint(i+1)), storedMessage(t, b, "T", r).Body)
	}
	assert.Equal(t, int64(1), b.sendRequests.Load())
	assert.Equal(t, int64(1), b.streams.Load(), "sent on SendStream")
}

func TestSendRejectsInvalidInput(t *testing.T) {
	b := startBroker(t, "a", 1, "T")
	ns := startNameServer(t, b)
	p := newTestProducer(t, testConfig(t, ns))
	tests := []struct {
		name string
		msgs []*Message
	}{
		{"none", nil},
		{"nil", []*Message{nil}},
		{"two topics", []*Message{{Topic: "T", Body: []byte("x")}, {Topic: "U", Body: []byte("x")}}},
		{"empty body", []*Message{{Topic: "T"}}},
		{"bad topic", []*Message{{Topic: "a b", Body: []byte("x")}}},
		{"key with space", []*Message{{Topic: "T", Body: []byte("x"), Keys: []string{"a b"}}}},
		{"separator in property", []*Message{{Topic: "T", Body: []byte("x"), Properties: map[string]string{"k": "\x01"}}}},
		{"body too large", []*Message{{Topic: "T", Body: make([]byte, MaxBodyBytes+1)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.SendBatch(t.Context(), tt.msgs)
			require.ErrorIs(t, err, ErrInvalidArgument)
		})
	}
	assert.Zero(t, b.sendRequests.Load())
}

func TestSendAsync(t *testing.T) {
	b := startBroker(t, "a", 4, "T")
	ns := startNameServer(t, b)
	p := newTestProducer(t, testConfig(t, ns))

	const n = 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	results := map[string]SendResult{}
	for i := range n {
		wg.Add(1)
		body := fmt.Sprint("m", i)
		p.SendAsync(t.Context(), &Message{Topic: "T", Body: []byte(body)}, func(_ *Message, r SendResult, err error) {
			defer wg.Done()
			assert.NoError(t, err)
			mu.Lock()
			results[body] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(t, results, n)
	for body, r := range results {
		assert.Equal(t, []byte(body), storedMessage(t, b, "T", r).Body)
	}

	var got error
	p.SendAsync(t.Context(), &Message{Topic: "T"}, func(_ *Message, _ SendResult, err error) { got = err })
	assert.ErrorIs(t, got, ErrInvalidArgument, "an invalid message is reported at once")
}

func TestSendOneway(t *testing.T) {
	b := startBroker(t, "a", 1, "T")
	ns := startNameServer(t, b)
	p := newTestProducer(t, testConfig(t, ns))

	require.NoError(t, p.SendOneway(t.Context(), &Message{Topic: "T", Body: []byte("fire")}))
	require.Eventually(t, func() bool { return len(b.records("T", 0)) == 1 }, 5*time.Second, 5*time.Millisecond)
	m, _, err := message.Decode(b.records("T", 0)[0])
	require.NoError(t, err)
	assert.Equal(t, []byte("fire"), m.Body)
}

func TestSendOnewayFlushedByClose(t *testing.T) {
	b := startBroker(t, "a", 1, "T")
	ns := startNameServer(t, b)
	p, err := NewProducer(t.Context(), testConfig(t, ns))
	require.NoError(t, err)
	for range 10 {
		require.NoError(t, p.SendOneway(t.Context(), &Message{Topic: "T", Body: []byte("x")}))
	}
	require.NoError(t, p.Close(context.Background()))
	assert.Len(t, b.records("T", 0), 10, "Close lets the broker answer what was written")
}

func TestRoundRobinTwoBrokers(t *testing.T) {
	a := startBroker(t, "a", 2, "T")
	b := startBroker(t, "b", 2, "T")
	ns := startNameServer(t, a, b)
	p := newTestProducer(t, testConfig(t, ns))

	counts := map[string]int{}
	for range 12 {
		res, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
		require.NoError(t, err)
		counts[fmt.Sprint(res.Broker, "#", res.QueueID)]++
	}
	assert.Equal(t, map[string]int{"a#0": 3, "a#1": 3, "b#0": 3, "b#1": 3}, counts)
}

func TestByShardingKey(t *testing.T) {
	a := startBroker(t, "a", 4, "T")
	b := startBroker(t, "b", 4, "T")
	ns := startNameServer(t, a, b)
	p := newTestProducer(t, testConfig(t, ns), WithQueueSelector(&ByShardingKey{}))

	used := map[string]bool{}
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
			assert.Equal(t, want, got, "key %s", key)
			used[fmt.Sprint(got)] = true
		}
	}
	assert.Greater(t, len(used), 1, "keys spread over queues")
}

func TestCustomSelector(t *testing.T) {
	a := startBroker(t, "a", 2, "T")
	b := startBroker(t, "b", 2, "T")
	ns := startNameServer(t, a, b)
	last := SelectorFunc(func(_ string, qs []Queue, _ *Message) Queue { return qs[len(qs)-1] })
	p := newTestProducer(t, testConfig(t, ns), WithQueueSelector(last))
	for range 3 {
		res, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
		require.NoError(t, err)
		assert.Equal(t, "b", res.Broker)
		assert.Equal(t, int32(1), res.QueueID)
	}

	bogus := SelectorFunc(func(string, []Queue, *Message) Queue { return Queue{Topic: "T", BrokerName: "zz", Broker: "x:1"} })
	p2 := newTestProducer(t, testConfig(t, ns), WithQueueSelector(bogus))
	_, err := p2.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestRetryAvoidsFailedBroker(t *testing.T) {
	a := startBroker(t, "a", 2, "T")
	b := startBroker(t, "b", 2, "T")
	a.setFault(func(int64, *gantryv1.SendRequest) *sendFault {
		return &sendFault{code: codes.Unavailable, msg: "not ready"}
	})
	ns := startNameServer(t, a, b)
	p := newTestProducer(t, testConfig(t, ns), WithQueueSelector(first))

	for range 3 {
		res, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
		require.NoError(t, err)
		assert.Equal(t, "b", res.Broker)
	}
	assert.Equal(t, int64(1), a.sendRequests.Load(), "a failed once, then was avoided")
	assert.Equal(t, int64(3), b.sendRequests.Load())
}

func TestRetryAfterConnectionRefused(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	b := startBroker(t, "b", 1, "T")
	ns := startNameServer(t, a, b)
	a.srv.Stop() // still in the route, but nobody listens
	p := newTestProducer(t, testConfig(t, ns), WithQueueSelector(first))

	res, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
	require.NoError(t, err)
	assert.Equal(t, "b", res.Broker)
}

func TestRetryOnceThenSucceedSameBroker(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	a.setFault(func(n int64, _ *gantryv1.SendRequest) *sendFault {
		if n == 1 {
			return &sendFault{code: codes.Unavailable, msg: "not ready"}
		}
		return nil
	})
	ns := startNameServer(t, a)
	p := newTestProducer(t, testConfig(t, ns))
	res, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
	require.NoError(t, err, "the only broker is tried again")
	assert.Equal(t, "a", res.Broker)
	assert.Equal(t, int64(2), a.sendRequests.Load())
}

func TestDiskFullGoesElsewhereOnly(t *testing.T) {
	full := func(int64, *gantryv1.SendRequest) *sendFault {
		return &sendFault{code: codes.ResourceExhausted, msg: "disk full"}
	}
	t.Run("other broker", func(t *testing.T) {
		a := startBroker(t, "a", 1, "T")
		b := startBroker(t, "b", 1, "T")
		a.setFault(full)
		ns := startNameServer(t, a, b)
		p := newTestProducer(t, testConfig(t, ns), WithQueueSelector(first))
		res, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
		require.NoError(t, err)
		assert.Equal(t, "b", res.Broker)
	})
	t.Run("single broker", func(t *testing.T) {
		a := startBroker(t, "a", 1, "T")
		a.setFault(full)
		ns := startNameServer(t, a)
		p := newTestProducer(t, testConfig(t, ns))
		_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
		require.ErrorIs(t, err, ErrDiskFull)
		assert.Equal(t, int64(1), a.sendRequests.Load(), "never retried on the same broker")
	})
}

func TestInvalidArgumentNotRetried(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	b := startBroker(t, "b", 1, "T")
	a.setFault(func(int64, *gantryv1.SendRequest) *sendFault {
		return &sendFault{code: codes.InvalidArgument, msg: "property DELAY refused"}
	})
	ns := startNameServer(t, a, b)
	p := newTestProducer(t, testConfig(t, ns), WithQueueSelector(first))
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
	require.ErrorIs(t, err, ErrInvalidArgument)
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, a.addr, se.Addr)
	assert.Equal(t, int64(1), a.sendRequests.Load())
	assert.Zero(t, b.sendRequests.Load())
}

func TestNoPermissionNotRetried(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	a.addTopic("T", 1, 1, 6)
	a.setFault(func(int64, *gantryv1.SendRequest) *sendFault {
		return &sendFault{code: codes.PermissionDenied, msg: "not writable"}
	})
	ns := startNameServer(t, a)
	p := newTestProducer(t, testConfig(t, ns))
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
	require.ErrorIs(t, err, ErrNoPermission)
	assert.Equal(t, int64(1), a.sendRequests.Load())
}

func TestIndeterminateNotRetried(t *testing.T) {
	flushTimeout := func(n int64, _ *gantryv1.SendRequest) *sendFault {
		if n == 1 {
			return &sendFault{code: codes.DeadlineExceeded, msg: "flush timeout", indeterminate: true}
		}
		return nil
	}
	for _, unary := range []bool{false, true} {
		t.Run(fmt.Sprint("unary=", unary), func(t *testing.T) {
			a := startBroker(t, "a", 1, "T")
			a.setFault(flushTimeout)
			ns := startNameServer(t, a)
			opts := []ProducerOption{}
			if unary {
				opts = append(opts, WithUnarySend())
			}
			p := newTestProducer(t, testConfig(t, ns), opts...)
			_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
			var ind *IndeterminateError
			require.ErrorAs(t, err, &ind)
			assert.Equal(t, a.addr, ind.Broker)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.False(t, IsRetryable(err))
			assert.Equal(t, int64(1), a.sendRequests.Load())
		})
	}
	t.Run("RetryIndeterminate", func(t *testing.T) {
		a := startBroker(t, "a", 1, "T")
		a.setFault(flushTimeout)
		ns := startNameServer(t, a)
		p := newTestProducer(t, testConfig(t, ns), WithRetryIndeterminate(true))
		_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
		require.NoError(t, err)
		assert.Equal(t, int64(2), a.sendRequests.Load())
	})
}

func TestBrokenStreamIsIndeterminateAndReopened(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	a.setFault(func(n int64, _ *gantryv1.SendRequest) *sendFault {
		if n == 1 {
			return &sendFault{code: codes.Unavailable, msg: "connection reset", breakStream: true}
		}
		return nil
	})
	ns := startNameServer(t, a)
	p := newTestProducer(t, testConfig(t, ns))
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
	var ind *IndeterminateError
	require.ErrorAs(t, err, &ind, "the request was written before the stream broke")
	assert.Equal(t, int64(1), a.sendRequests.Load())

	_, err = p.Send(t.Context(), &Message{Topic: "T", Body: []byte("y")})
	require.NoError(t, err)
	assert.Equal(t, int64(2), a.streams.Load(), "a new stream")
}

func TestUnaryFallbackWithoutSendStream(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	a.configure(func(b *fakeBroker) { b.noStream = true })
	ns := startNameServer(t, a)
	p := newTestProducer(t, testConfig(t, ns))
	for range 3 {
		_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
		require.NoError(t, err)
	}
	assert.Zero(t, a.streams.Load())
	assert.Equal(t, int64(3), a.sendRequests.Load())
	assert.Len(t, a.records("T", 0), 3)
}

func TestLargeRequestGoesUnary(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	ns := startNameServer(t, a)
	p := newTestProducer(t, testConfig(t, ns))
	big := make([]byte, largeRequestBytes+1)
	res, err := p.Send(t.Context(), &Message{Topic: "T", Body: big})
	require.NoError(t, err)
	assert.Len(t, storedMessage(t, a, "T", res).Body, len(big))
	assert.Zero(t, a.streams.Load(), "a large request never risks the shared stream")
	_, err = p.Send(t.Context(), &Message{Topic: "T", Body: []byte("small")})
	require.NoError(t, err)
	assert.Equal(t, int64(1), a.streams.Load())
}

func TestBackoffNeverPassesDeadline(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	a.setFault(func(int64, *gantryv1.SendRequest) *sendFault {
		return &sendFault{code: codes.Unavailable, msg: "not ready"}
	})
	ns := startNameServer(t, a)
	maxJitter := func(n int64) int64 { return n - 1 } // sleeps ~50, 100, 200 ms...
	p := newTestProducer(t, testConfig(t, ns), WithRetries(1000), withRandom(maxJitter))
	_, err := p.c.routes.get(t.Context(), "T") // read the route first
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	before := a.sendRequests.Load()
	_, err = p.Send(ctx, &Message{Topic: "T", Body: []byte("x")})
	elapsed := time.Since(start)
	require.ErrorIs(t, err, ErrUnavailable, "the last attempt's error, not the deadline")
	assert.Less(t, elapsed, 100*time.Millisecond, "gave up instead of sleeping past the deadline")
	assert.Equal(t, int64(2), a.sendRequests.Load()-before, "attempt, 50 ms, attempt, then 100 ms would pass the deadline")
}

func TestBackoffDelay(t *testing.T) {
	o := defaultProducerOptions()
	o.random = func(n int64) int64 { return n }
	want := []time.Duration{50, 100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		assert.Equal(t, w*time.Millisecond, o.backoffDelay(i+1), "retry %d", i+1)
	}
	var got []int64
	o.random = func(n int64) int64 { got = append(got, n); return 0 }
	assert.Zero(t, o.backoffDelay(100))
	assert.Equal(t, []int64{int64(time.Second)}, got)
}

func TestTopicNotFoundRefreshesRouteOnce(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	a.setFault(func(int64, *gantryv1.SendRequest) *sendFault {
		return &sendFault{code: codes.NotFound, msg: "topic T not found"}
	})
	ns := startNameServer(t, a)
	p := newTestProducer(t, testConfig(t, ns))
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
	require.ErrorIs(t, err, ErrTopicNotFound)
	assert.Equal(t, int64(2), a.sendRequests.Load())
	assert.Equal(t, int64(2), ns.routeCalls.Load(), "first read and one refresh")

	// A topic no nameserver knows (and no TBW102 route to create it by) is
	// a definite error at once: asking again cannot help.
	for _, async := range []bool{false, true} {
		before := ns.routeCalls.Load()
		if async {
			errc := make(chan error, 1)
			p.SendAsync(t.Context(), &Message{Topic: "Unknown", Body: []byte("x")}, func(_ *Message, _ SendResult, err error) { errc <- err })
			err = <-errc
		} else {
			_, err = p.Send(t.Context(), &Message{Topic: "Unknown", Body: []byte("x")})
		}
		require.ErrorIs(t, err, ErrTopicNotFound, "the nameserver does not know it")
		assert.Equal(t, int64(2), ns.routeCalls.Load()-before, "async=%t: the topic's route and TBW102's, once", async)
	}
	assert.Equal(t, int64(2), a.sendRequests.Load(), "nothing sent")
}

func TestRouteKeptWhenNameServersDown(t *testing.T) {
	a := startBroker(t, "a", 2, "T")
	ns := startNameServer(t, a)
	cfg := testConfig(t, ns)
	cfg.RouteRefresh = 10 * time.Millisecond
	p := newTestProducer(t, cfg)
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("before")})
	require.NoError(t, err)

	ns.srv.Stop()
	require.Eventually(t, func() bool { return p.c.routes.refreshFailures.Load() >= 2 }, 10*time.Second, 5*time.Millisecond)
	for range 4 {
		res, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("after")})
		require.NoError(t, err)
		assert.Equal(t, "a", res.Broker)
	}
	_, err = p.Send(t.Context(), &Message{Topic: "Other", Body: []byte("x")})
	require.ErrorIs(t, err, ErrUnavailable, "an uncached topic needs a nameserver")
}

func TestConcurrentSendsCoalesce(t *testing.T) {
	a := startBroker(t, "a", 4, "T")
	a.configure(func(b *fakeBroker) { b.delay = 2 * time.Millisecond })
	ns := startNameServer(t, a)
	p := newTestProducer(t, testConfig(t, ns))
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("warm")})
	require.NoError(t, err)
	base := a.sendRequests.Load()

	const n = 1000
	results := make([]SendResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = p.Send(t.Context(), &Message{Topic: "T", Body: fmt.Appendf(nil, "m%d", i)})
		})
	}
	wg.Wait()
	requests := a.sendRequests.Load() - base
	t.Logf("%d sends in %d requests", n, requests)
	assert.Less(t, requests, int64(n/5))

	seen := map[string]bool{}
	for i, r := range results {
		require.NoError(t, errs[i])
		m := storedMessage(t, a, "T", r)
		assert.Equal(t, fmt.Appendf(nil, "m%d", i), m.Body)
		assert.Equal(t, r.UniqKey, m.UniqKey())
		pos := fmt.Sprint(r.QueueID, "/", r.QueueOffset)
		assert.False(t, seen[pos], "two results at %s", pos)
		seen[pos] = true
	}
}

func TestCoalescedInvalidMessageFailsAlone(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	a.configure(func(b *fakeBroker) { b.delay = 50 * time.Millisecond })
	ns := startNameServer(t, a)
	p := newTestProducer(t, testConfig(t, ns))
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("warm")})
	require.NoError(t, err)

	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("first")})
		assert.NoError(t, err)
	})
	require.Eventually(t, func() bool { return a.sendRequests.Load() == 2 }, 5*time.Second, time.Millisecond)
	errs := make([]error, 5)
	for i := range errs {
		body := "ok"
		if i == 2 {
			body = "invalid" // the fake refuses this body
		}
		wg.Go(func() { _, errs[i] = p.Send(t.Context(), &Message{Topic: "T", Body: []byte(body)}) })
	}
	wg.Wait()
	for i, err := range errs {
		if i == 2 {
			assert.ErrorIs(t, err, ErrInvalidArgument)
		} else {
			assert.NoError(t, err, "send %d", i)
		}
	}
	assert.Len(t, a.records("T", 0), 6)
}

func TestCloseCompletesPendingAsyncSends(t *testing.T) {
	a := startBroker(t, "a", 2, "T")
	a.configure(func(b *fakeBroker) { b.delay = 20 * time.Millisecond })
	ns := startNameServer(t, a)
	p, err := NewProducer(t.Context(), testConfig(t, ns))
	require.NoError(t, err)

	const n = 50
	var done atomic.Int64
	var out closeOutcomes
	for i := range n {
		p.SendAsync(t.Context(), &Message{Topic: "T", Body: fmt.Appendf(nil, "%d", i)}, func(_ *Message, _ SendResult, err error) {
			out.count(t, i, err)
			done.Add(1)
		})
	}
	require.NoError(t, p.Close(context.Background()))
	assert.Equal(t, int64(n), done.Load(), "every callback ran before Close returned")
	assert.Equal(t, int64(n), out.ok.Load()+out.closed.Load())
	assert.Equal(t, int(out.ok.Load()), len(a.records("T", 0))+len(a.records("T", 1)))

	var got error
	p.SendAsync(t.Context(), &Message{Topic: "T", Body: []byte("late")}, func(_ *Message, _ SendResult, err error) { got = err })
	require.ErrorIs(t, got, ErrClosed)
	_, err = p.Send(t.Context(), &Message{Topic: "T", Body: []byte("late")})
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, p.SendOneway(t.Context(), &Message{Topic: "T", Body: []byte("late")}), ErrClosed)
	require.ErrorIs(t, p.Close(context.Background()), ErrClosed)
}

func TestFailedBrokersExpire(t *testing.T) {
	f := newFailedBrokers()
	now := time.Unix(1000, 0)
	f.now = func() time.Time { return now }
	qs := []Queue{{Broker: "a"}, {Broker: "b"}}
	f.add("a")
	assert.Equal(t, []Queue{{Broker: "b"}}, f.filter(qs))
	now = now.Add(failedBrokerExpiry)
	assert.Equal(t, qs, f.filter(qs))
}

func TestIdleQueueSenderRetires(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	ns := startNameServer(t, a)
	p := newTestProducer(t, testConfig(t, ns))
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
	require.NoError(t, err)

	p.mu.Lock()
	require.Len(t, p.queues, 1)
	var s *queueSender
	for _, qs := range p.queues {
		s = qs
	}
	p.mu.Unlock()
	require.True(t, p.retire(s))
	p.mu.Lock()
	assert.Empty(t, p.queues)
	p.mu.Unlock()
	require.ErrorIs(t, s.enqueue(newSendOp(t.Context(), nil, 0, 0, 1)), errSenderIdle)
	close(s.quit) // the retired sender's goroutine is still running in this test: stop it
	_, err = p.Send(t.Context(), &Message{Topic: "T", Body: []byte("y")})
	require.NoError(t, err, "a new sender takes over")
}

// Asynchronous sends whose attempts fail with a retryable error and wait
// for their retry when Close's ctx ends: each callback runs exactly once
// before Close returns, with ErrClosed (the retry it would need) or a
// result, and Close reports the abandoned sends with ctx's error.
func TestCloseFailsRetriesOfAsyncSends(t *testing.T) {
	a := startBroker(t, "a", 2, "T")
	a.configure(func(b *fakeBroker) { b.delay = 10 * time.Millisecond })
	a.setFault(func(n int64, _ *gantryv1.SendRequest) *sendFault {
		if n%2 == 1 {
			return &sendFault{code: codes.Unavailable, msg: "try again"}
		}
		return nil
	})
	p, err := NewProducer(t.Context(), testConfig(t, startNameServer(t, a)), WithBackoff(time.Minute, time.Minute),
		withRandom(func(n int64) int64 { return n - 1 })) // every retry waits a minute
	require.NoError(t, err)
	const n = 200
	var calls [n]atomic.Int32
	var out closeOutcomes
	for i := range n {
		p.SendAsync(t.Context(), &Message{Topic: "T", Body: fmt.Appendf(nil, "%d", i)}, func(_ *Message, _ SendResult, err error) {
			calls[i].Add(1)
			out.count(t, i, err)
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.Close(ctx), context.DeadlineExceeded, "sends were abandoned")
	for i := range n {
		require.Equal(t, int32(1), calls[i].Load(), "callbacks of message %d before Close returned", i)
	}
	assert.Equal(t, int64(n), out.ok.Load()+out.closed.Load())
	assert.Positive(t, out.closed.Load(), "some needed a retry")
}

// closeOutcomes counts the callbacks of asynchronous sends racing Close:
// a result, or ErrClosed; any other error fails the test.
type closeOutcomes struct{ ok, closed atomic.Int64 }

func (o *closeOutcomes) count(t *testing.T, i int, err error) {
	switch {
	case err == nil:
		o.ok.Add(1)
	case errors.Is(err, ErrClosed):
		o.closed.Add(1)
	default:
		t.Errorf("message %d: unexpected error %v", i, err)
	}
}

// A Send alone in its request ends at its send timeout, or as soon as its
// context is cancelled, while the broker has not answered: indeterminate,
// since the request was written. Later sends go through once the broker
// answers again.
func TestLoneSendEndsWithItsContext(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	ns := startNameServer(t, a)
	short := newTestProducer(t, testConfig(t, ns), WithSendTimeout(100*time.Millisecond), WithRetries(0))
	long := newTestProducer(t, testConfig(t, ns), WithSendTimeout(time.Minute), WithRetries(0))
	for _, p := range []*Producer{short, long} {
		_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("warm")})
		require.NoError(t, err)
	}
	a.configure(func(b *fakeBroker) { b.delay = 3 * time.Second })

	start := time.Now()
	_, err := short.Send(t.Context(), &Message{Topic: "T", Body: []byte("timed out")})
	var ind *IndeterminateError
	require.ErrorAs(t, err, &ind)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second, "ended at the send timeout, not at the broker's answer")

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	start = time.Now()
	_, err = long.Send(ctx, &Message{Topic: "T", Body: []byte("cancelled")})
	require.ErrorAs(t, err, &ind)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), 2*time.Second, "ended at the cancel, not at the broker's answer")

	a.configure(func(b *fakeBroker) { b.delay = 0 })
	for _, p := range []*Producer{short, long} {
		require.Eventually(t, func() bool { // once the fake has answered the one before
			_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("after")})
			return err == nil
		}, 15*time.Second, 10*time.Millisecond)
	}
}

// A slave's "not master" refusal sends the producer to the route at once:
// after a failover it names the new master, and the retry goes there.
func TestNotMasterFollowsTheNewMaster(t *testing.T) {
	old, newer := startBroker(t, "a", 1, "T"), startBroker(t, "a", 1, "T")
	ns := startNameServer(t, old)
	old.setFault(func(int64, *gantryv1.SendRequest) *sendFault {
		ns.setBrokers(newer) // the failover happened before this answer
		return &sendFault{code: codes.FailedPrecondition, msg: "broker: not master: broker a id 1 is a SLAVE; the master is at " + newer.addr}
	})
	p := newTestProducer(t, testConfig(t, ns))
	res, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
	require.NoError(t, err)
	assert.Equal(t, "a", res.Broker)
	assert.Equal(t, 2, res.Attempts)
	assert.Equal(t, int64(1), old.sendRequests.Load())
	assert.Equal(t, int64(1), newer.sendRequests.Load())
	assert.Equal(t, int64(2), ns.routeCalls.Load(), "first read and one refresh, at once")

	// Without retries the error says what happened.
	ns.setBrokers(old)
	_, err = p.c.routes.refresh(t.Context(), "T")
	require.NoError(t, err)
	old.setFault(func(int64, *gantryv1.SendRequest) *sendFault {
		return &sendFault{code: codes.FailedPrecondition, msg: "broker: not master: broker a id 1 is a SLAVE"}
	})
	one := newTestProducer(t, testConfig(t, ns), WithRetries(0))
	_, err = one.Send(t.Context(), &Message{Topic: "T", Body: []byte("y")})
	require.ErrorIs(t, err, ErrNotMaster)
	assert.True(t, IsRetryable(err))
}

// A route read while a group is between masters has no writable queue; a
// send then reads the route again with each retry and goes to the new
// master once it is registered, instead of failing until the next
// periodic refresh.
func TestNoWritableQueueReadsTheRouteAgain(t *testing.T) {
	between, master := startBroker(t, "a", 1), startBroker(t, "a", 1, "T")
	between.addTopic("T", 1, 1, PermRead) // only a read-only slave registered
	ns := startNameServer(t, between)
	var calls atomic.Int64
	ns.onRoute = func() {
		if calls.Add(1) == 2 {
			ns.setBrokers(master) // the new master registers
		}
	}
	p := newTestProducer(t, testConfig(t, ns))
	res, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
	require.NoError(t, err)
	assert.Equal(t, 2, res.Attempts)
	assert.Equal(t, int64(1), master.sendRequests.Load())

	// Without retries the error names it: retryable.
	ns.setBrokers(between)
	_, err = p.c.routes.refresh(t.Context(), "T")
	require.NoError(t, err)
	one := newTestProducer(t, testConfig(t, ns), WithRetries(0))
	_, err = one.Send(t.Context(), &Message{Topic: "T", Body: []byte("y")})
	require.ErrorIs(t, err, ErrNoQueue)
}

// A send to a broker that does not answer in time (a master cut off from
// everyone while another is elected) reads the route again soon, so the
// sends after it reach the new master without waiting for the periodic
// refresh.
func TestTimeoutReadsTheRouteAgain(t *testing.T) {
	old, newer := startBroker(t, "a", 1, "T"), startBroker(t, "a", 1, "T")
	ns := startNameServer(t, old)
	old.setFault(func(int64, *gantryv1.SendRequest) *sendFault {
		ns.setBrokers(newer) // the failover happened meanwhile
		return &sendFault{code: codes.DeadlineExceeded, msg: "deadline exceeded"}
	})
	p := newTestProducer(t, testConfig(t, ns))
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Eventually(t, func() bool { return ns.routeCalls.Load() >= 2 }, 10*time.Second, time.Millisecond, "the route is read again")
	require.Eventually(t, func() bool {
		_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("y")})
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	assert.Positive(t, newer.sendRequests.Load())
}

// Message.TTL is sent as TTL_MS in whole milliseconds; a negative one, or
// one under a millisecond or over 100 years, is refused before sending.
func TestMessageTTL(t *testing.T) {
	for _, tc := range []struct {
		ttl  time.Duration
		want string // TTL_MS, "" when refused
	}{
		{time.Minute, "60000"},
		{1500 * time.Microsecond, "1"},
		{time.Millisecond, "1"},
		{time.Microsecond, ""},
		{-time.Second, ""},
		{maxTTL + time.Millisecond, ""},
	} {
		m := &Message{Topic: "T", Body: []byte("x"), TTL: tc.ttl}
		_, err := validateMessage(m)
		if tc.want == "" {
			require.ErrorIs(t, err, ErrInvalidArgument, "%s", tc.ttl)
			assert.Contains(t, err.Error(), "TTL")
			continue
		}
		require.NoError(t, err, "%s", tc.ttl)
		rec := (&batch{topic: "T", msgs: []*Message{m}, props: make([]map[string]string, 1)}).record(0, nil, 0)
		v, ok := rec.Properties.Get(message.PropTTLMs)
		assert.True(t, ok)
		assert.Equal(t, tc.want, v, "%s", tc.ttl)
	}
}
