package client

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/message"
)

// recordsIn counts the records of a SendRequest.
func recordsIn(t *testing.T, req *gantryv1.SendRequest) int {
	n := 0
	for _, c := range req.GetRecords() {
		ms, err := message.DecodeAll(c)
		assert.NoError(t, err)
		n += len(ms)
	}
	return n
}

// storedBodies returns the bodies stored in a queue of broker b, in order.
func storedBodies(t *testing.T, b *fakeBroker, topic string, qid int32) []string {
	t.Helper()
	var out []string
	for _, rec := range b.records(topic, qid) {
		m, _, err := message.Decode(rec)
		require.NoError(t, err)
		out = append(out, string(m.Body))
	}
	return out
}

// asyncBodies waits for SendAsync callbacks and collects what each stored.
type asyncBodies struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	results map[string]SendResult // by the body sent
	errs    map[string]error
}

func newAsyncBodies() *asyncBodies {
	return &asyncBodies{results: map[string]SendResult{}, errs: map[string]error{}}
}

// send sends body with SendAsync and returns once SendAsync has.
func (a *asyncBodies) send(ctx context.Context, p *Producer, m *Message) {
	a.wg.Add(1)
	sent := string(m.Body)
	p.SendAsync(ctx, m, func(_ *Message, r SendResult, err error) {
		defer a.wg.Done()
		a.mu.Lock()
		defer a.mu.Unlock()
		if err != nil {
			a.errs[sent] = err
			return
		}
		a.results[sent] = r
	})
}

// A SendAsync sends its message as it was when SendAsync returned: the
// caller may reuse the body's buffer at once, also when the first attempt
// fails and the message goes again.
func TestSendAsyncKeepsMessageAsSent(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	a.configure(func(b *fakeBroker) { b.delay = 20 * time.Millisecond })
	var failed atomic.Bool
	a.setFault(func(_ int64, req *gantryv1.SendRequest) *sendFault {
		if recordsIn(t, req) > 1 && failed.CompareAndSwap(false, true) { // the first coalesced request
			return &sendFault{code: codes.Unavailable, msg: "try again"}
		}
		return nil
	})
	p := newTestProducer(t, testConfig(t, startNameServer(t, a)), WithBackoff(time.Millisecond, 10*time.Millisecond))
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("warm")})
	require.NoError(t, err)

	out := newAsyncBodies()
	buf := make([]byte, 3)
	tags := []byte("tag-x")
	for i := range 30 {
		copy(buf, fmt.Sprintf("m%02d", i))
		tags[4] = byte('a' + i%26)
		out.send(t.Context(), p, &Message{Topic: "T", Body: buf, Tags: string(tags)})
		copy(buf, "XXX") // the caller's buffer, reused
	}
	out.wg.Wait()
	require.True(t, failed.Load(), "a coalesced request failed once")
	require.Empty(t, out.errs)
	require.Len(t, out.results, 30)
	retried := 0
	for body, r := range out.results {
		m := storedMessage(t, a, "T", r)
		assert.Equal(t, body, string(m.Body))
		var i int
		_, err := fmt.Sscanf(body, "m%02d", &i)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("tag-%c", 'a'+i%26), m.Tags())
		if r.Attempts > 1 {
			retried++
		}
	}
	assert.Positive(t, retried, "some went again after the failure")
}

// Ops that leave the queue before their request goes (a SendAsync whose
// context ended, a Send whose caller gave up) leave their chunk: the
// others' records are sent whole and in order.
func TestQueuedOpsLeaveTheirRequest(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	p := newTestProducer(t, testConfig(t, startNameServer(t, a)), WithRetries(0))
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("warm")})
	require.NoError(t, err)
	a.configure(func(b *fakeBroker) { b.delay = 300 * time.Millisecond })

	out := newAsyncBodies()
	out.send(t.Context(), p, &Message{Topic: "T", Body: []byte("first")}) // out, alone
	require.Eventually(t, func() bool { return a.sendRequests.Load() == 2 }, 5*time.Second, time.Millisecond)

	var kept []string
	var sends sync.WaitGroup
	var sendErr error
	for i := range 12 {
		body := fmt.Sprintf("m%02d-%s", i, bytes.Repeat([]byte{'x'}, 100*i))
		switch i % 3 {
		case 0:
			kept = append(kept, body)
			out.send(t.Context(), p, &Message{Topic: "T", Body: []byte(body)})
		case 1: // a SendAsync whose context ends while it is queued
			ctx, cancel := context.WithCancel(t.Context())
			out.send(ctx, p, &Message{Topic: "T", Body: []byte(body)})
			cancel()
		case 2: // a Send that gives up while it is queued
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
			sends.Go(func() {
				defer cancel()
				_, err := p.Send(ctx, &Message{Topic: "T", Body: []byte(body)})
				if i == 2 {
					sendErr = err
				}
			})
		}
	}
	sends.Wait()
	out.wg.Wait()
	assert.ErrorIs(t, sendErr, context.DeadlineExceeded)
	assert.Len(t, out.errs, 4)
	for body, err := range out.errs {
		assert.ErrorIs(t, err, context.Canceled, body)
	}
	got := storedBodies(t, a, "T", 0)[1:] // after "warm"
	assert.Equal(t, append([]string{"first"}, kept...), got)
	assert.Equal(t, int64(3), a.sendRequests.Load(), "warm, first, then the kept ones together")
}

// A request of more records than a chunk page holds, and a message larger
// than a page, go whole and in order.
func TestRequestOfManyPages(t *testing.T) {
	a := startBroker(t, "a", 1, "T")
	p := newTestProducer(t, testConfig(t, startNameServer(t, a)))
	_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("warm")})
	require.NoError(t, err)
	// The broker holds "first" until all 200 are queued behind it (with a
	// fixed delay instead, a busy machine's producer may send some first).
	hold := make(chan struct{})
	a.configure(func(b *fakeBroker) { b.hold = hold })

	out := newAsyncBodies()
	out.send(t.Context(), p, &Message{Topic: "T", Body: []byte("first")})
	require.Eventually(t, func() bool { return a.sendRequests.Load() == 2 }, 5*time.Second, time.Millisecond)
	want := []string{"first"}
	for i := range 200 {
		size := 1024
		if i == 100 {
			size = 3 * chunkPage / 2
		}
		body := fmt.Sprintf("%03d-%s", i, bytes.Repeat([]byte{byte('a' + i%26)}, size))
		want = append(want, body)
		out.send(t.Context(), p, &Message{Topic: "T", Body: []byte(body)})
	}
	close(hold)
	out.wg.Wait()
	require.Empty(t, out.errs)
	got := storedBodies(t, a, "T", 0)[1:] // after "warm"
	assert.Equal(t, want, got)
	assert.Equal(t, int64(3), a.sendRequests.Load(), "the 200 in one request")
}

// outgoing's encoding is a SendRequest's: proto.Unmarshal reads its
// topic, group, request id and records (one element of them all).
func TestOutgoingEncoding(t *testing.T) {
	c := &sendChunk{}
	var want []byte
	for i := range 100 {
		b, err := prepareAsync(&Message{Topic: "T", Body: bytes.Repeat([]byte{byte(i)}, 1000)})
		require.NoError(t, err)
		op := (&sendOp{}).initAsync(t.Context(), b, nil)
		require.NoError(t, c.add(op, 3))
		want = append(want, c.recs(op)...)
	}
	require.Greater(t, len(c.pages), 1)
	for _, o := range []*outgoing{
		{req: &gantryv1.SendRequest{Topic: "T", ProducerGroup: "G", RequestId: 42}, c: c},
		{req: &gantryv1.SendRequest{Topic: "T"}, c: c},
	} {
		data, err := o.TakeEncoding()
		require.NoError(t, err)
		var req gantryv1.SendRequest
		require.NoError(t, proto.Unmarshal(data.Materialize(), &req))
		data.Free()
		assert.Equal(t, o.req.GetTopic(), req.GetTopic())
		assert.Equal(t, o.req.GetProducerGroup(), req.GetProducerGroup())
		assert.Equal(t, o.req.GetRequestId(), req.GetRequestId())
		require.Len(t, req.GetRecords(), 1)
		assert.Equal(t, want, req.GetRecords()[0])
		ms, err := message.DecodeAll(req.GetRecords()[0])
		require.NoError(t, err)
		require.Len(t, ms, 100)
		assert.Equal(t, int32(3), ms[99].QueueID)

		unary := o.request()
		assert.Equal(t, want, bytes.Join(unary.GetRecords(), nil))
	}
	c.release()
	assert.Empty(t, c.pages)
}

// A SendAsync's batch is used again for a later one once its callback has
// returned: with sends made from the callbacks, two thousand messages
// through 32 batches or so each get their own result, their message
// stored as sent and their queue recorded in them.
func TestSendAsyncRecycledBatches(t *testing.T) {
	a := startBroker(t, "a", 4, "T")
	p := newTestProducer(t, testConfig(t, startNameServer(t, a)))
	const total, window = 2000, 32
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		next    int
		results = map[int]SendResult{}
		msgs    = map[int]*Message{}
	)
	var sendNext func()
	sendNext = func() {
		mu.Lock()
		i := next
		if i == total {
			mu.Unlock()
			return
		}
		next++
		m := &Message{Topic: "T", Body: fmt.Appendf(nil, "body-%d", i), Tags: fmt.Sprint("tag", i%7), Keys: []string{fmt.Sprint("key-", i)}, QueueID: -1}
		msgs[i] = m
		mu.Unlock()
		wg.Add(1)
		p.SendAsync(t.Context(), m, func(_ *Message, r SendResult, err error) {
			defer wg.Done()
			assert.NoError(t, err)
			mu.Lock()
			results[i] = r
			mu.Unlock()
			sendNext() // from the callback: reuses a batch just recycled
		})
	}
	for range window {
		sendNext()
	}
	wg.Wait()
	require.Len(t, results, total)
	uniq := map[string]int{}
	for i, r := range results {
		if j, dup := uniq[r.UniqKey]; dup {
			t.Fatalf("messages %d and %d got the same result (uniq key %s)", i, j, r.UniqKey)
		}
		uniq[r.UniqKey] = i
		assert.Equal(t, r.QueueID, msgs[i].QueueID, "message %d records its queue", i)
		m := storedMessage(t, a, "T", r)
		assert.Equal(t, fmt.Sprint("body-", i), string(m.Body))
		assert.Equal(t, fmt.Sprint("tag", i%7), m.Tags())
		assert.Equal(t, []string{fmt.Sprint("key-", i)}, m.Keys())
		u, _ := m.Properties.Get(message.PropUniqKey)
		assert.Equal(t, r.UniqKey, u)
	}
}
