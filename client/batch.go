package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/mem"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/internal/grpcbuf"
)

// senderIdle is how long a queue sender waits for work before it exits.
const senderIdle = time.Minute

// errSenderIdle: the queue sender exited for idleness; the caller gets a
// new one.
var errSenderIdle = errors.New("client: queue sender idle")

// States of a sendOp.
const (
	opQueued    int32 = iota // waiting in a queue sender
	opTaken                  // in a request (it may have been written)
	opAbandoned              // its caller gave up before it was taken
)

// sendOp is one attempt of one Send (or SendAsync) waiting for its queue
// sender.
type sendOp struct {
	ctx     context.Context // the attempt's context; its deadline bounds the request
	records []byte          // the messages encoded for the attempt's queue (Send)
	// lazy, for the first attempt of a SendAsync, is its batch, which
	// enqueue encodes straight into the queue's next request instead of
	// records: the message is copied once on its way to gRPC, not twice.
	lazy  *batch
	n     int // how many
	bytes int64
	// attempt is which attempt of its send the op is, from 1
	// (SendRequest.attempt): the first promises the broker that no
	// earlier request can have stored its messages.
	attempt uint32
	state   atomic.Int32
	// page, off and end locate the op's records in its chunk (under
	// queueSender.mu until the chunk is taken, then the sender's).
	page, off, end int

	done    chan struct{} // closed when results or err is set (Send)
	results []*gantryv1.SendResult
	err     error

	// onDone, for SendAsync, takes the outcome instead of done. It runs on
	// the queue sender's goroutine.
	onDone opCompleter
}

// opCompleter takes the outcome of an asynchronous op. (An interface, not
// a func: the batch of a SendAsync is its own completer, so the op and its
// callback need no allocation of their own.)
type opCompleter interface {
	completeOp(results []*gantryv1.SendResult, err error)
}

func newSendOp(ctx context.Context, records []byte, n int, bytes int64, attempt uint32) *sendOp {
	return &sendOp{ctx: ctx, records: records, n: n, bytes: bytes, attempt: attempt, done: make(chan struct{})}
}

// initAsync makes op, which must be new, the first attempt of SendAsync
// batch b, whose outcome goes to onDone: no waiting goroutine.
func (op *sendOp) initAsync(ctx context.Context, b *batch, onDone opCompleter) *sendOp {
	op.ctx, op.lazy, op.n, op.bytes, op.onDone, op.attempt = ctx, b, len(b.msgs), b.bytes, onDone, 1
	return op
}

// size is the length of the op's encoding.
func (op *sendOp) size() int {
	if op.lazy != nil {
		return op.lazy.encSize
	}
	return len(op.records)
}

// errOpNotStarted: the op's context ended while it was still queued, so it
// was never sent.
var errOpNotStarted = errors.New("client: send not started")

// wait returns the op's results once its request is answered. When ctx
// ends first it returns errOpNotStarted if the op was never taken, else an
// *IndeterminateError: the request may have been written.
func (op *sendOp) wait(ctx context.Context, broker string) ([]*gantryv1.SendResult, error) {
	select {
	case <-op.done:
		return op.results, op.err
	case <-ctx.Done():
		if op.state.CompareAndSwap(opQueued, opAbandoned) {
			return nil, errOpNotStarted
		}
		return nil, &IndeterminateError{Broker: broker, Err: ctx.Err()}
	}
}

func (op *sendOp) finish(results []*gantryv1.SendResult, err error) {
	if op.onDone != nil {
		op.onDone.completeOp(results, err)
		return
	}
	op.results, op.err = results, err
	close(op.done)
}

// fail finishes op with err. A SendAsync's op first keeps a copy of its
// records, in c, for the attempts that may follow: they send the message
// as SendAsync encoded it.
func (op *sendOp) fail(c *sendChunk, err error) {
	if b := op.lazy; b != nil && b.enc == nil {
		b.enc = bytes.Clone(c.recs(op))
	}
	op.finish(nil, err)
}

// chunkPage is the size of the buffers a chunk's records are encoded into.
const chunkPage = 64 << 10

// sendChunk is the ops of one request and their records, encoded in order
// into pages: each op's records are in one page, back to back with the
// ops' before and after it in that page, and the request sends the pages'
// bytes one after the other. The ops queued while a request is out are
// encoded into the queue's last chunk until it reaches the batch limits.
// (Pages, not one growing buffer: growing would copy the records again.)
type sendChunk struct {
	ops   []*sendOp
	msgs  int
	bytes int64
	pages []page
}

// page is one buffer of a chunk's records.
type page struct {
	b   []byte
	buf *[]byte    // b's buffer from grpcbuf.Shared, or nil: b is an op's own
	mb  mem.Buffer // b as a reference-counted buffer once a request has it
}

// recs returns op's records in c.
func (c *sendChunk) recs(op *sendOp) []byte { return c.pages[op.page].b[op.off:op.end] }

// size is the length of c's records.
func (c *sendChunk) size() int {
	n := 0
	for _, p := range c.pages {
		n += len(p.b)
	}
	return n
}

// add appends op's records to c; queueID is the queue's.
func (c *sendChunk) add(op *sendOp, queueID int32) error {
	size := op.size()
	if n := len(c.pages); n == 0 || cap(c.pages[n-1].b)-len(c.pages[n-1].b) < size {
		buf := grpcbuf.Shared.Get(max(size, chunkPage))
		c.pages = append(c.pages, page{b: (*buf)[:0], buf: buf})
	}
	p := &c.pages[len(c.pages)-1]
	op.page, op.off = len(c.pages)-1, len(p.b)
	if op.lazy != nil {
		b, err := op.lazy.appendTo(p.b, queueID)
		if err != nil {
			p.b = p.b[:op.off]
			return err
		}
		p.b = b
	} else {
		p.b = append(p.b, op.records...)
	}
	op.end = len(p.b)
	c.ops = append(c.ops, op)
	c.msgs, c.bytes = c.msgs+op.n, c.bytes+op.bytes
	return nil
}

// buffers returns c's records as gRPC buffers for a request, each with a
// reference for gRPC, which frees them once written; c's own references,
// which release drops, keep the records valid for c until then.
func (c *sendChunk) buffers(dst mem.BufferSlice) mem.BufferSlice {
	for i := range c.pages {
		p := &c.pages[i]
		switch {
		case len(p.b) == 0:
			continue
		case p.mb == nil && p.buf == nil:
			p.mb = mem.SliceBuffer(p.b)
		case p.mb == nil:
			*p.buf = p.b
			p.mb, p.buf = mem.NewBuffer(p.buf, grpcbuf.Shared), nil
		}
		p.mb.Ref()
		dst = append(dst, p.mb)
	}
	return dst
}

// release gives c's buffers back to the pool once gRPC is done with them
// too; c's records must not be read after.
func (c *sendChunk) release() {
	for i := range c.pages {
		p := &c.pages[i]
		switch {
		case p.mb != nil:
			p.mb.Free()
		case p.buf != nil:
			*p.buf = p.b[:0]
			grpcbuf.Shared.Put(p.buf)
		}
		*p = page{}
	}
	c.pages = c.pages[:0]
}

// queueSender coalesces the sends to one queue: its goroutine sends one
// request at a time, and the ops that arrive while a request is in flight
// go together in the next one (up to the batch limits), encoded as they
// are queued into that request's chunk. With nothing in flight an op is
// sent at once, so coalescing adds no latency. It exits after senderIdle
// without work, and when the producer closes (after sending what is
// queued).
type queueSender struct {
	p     *Producer
	q     Queue
	b     *brokerSender
	wake  chan struct{} // capacity 1: ops were queued
	quit  chan struct{} // closed by the producer's Close
	limit struct {
		msgs  int
		bytes int64
	}

	mu       sync.Mutex   // taken after Producer.mu
	chunks   []*sendChunk // the queued ops, in order, by request
	inflight bool         // a request of the queue is out (from run or from a direct Send)
	gone     error        // non-nil once the sender takes no more ops
}

func newQueueSender(p *Producer, q Queue, b *brokerSender) *queueSender {
	s := &queueSender{p: p, q: q, b: b, wake: make(chan struct{}, 1), quit: make(chan struct{})}
	s.limit.msgs, s.limit.bytes = p.opts.maxBatchMessages, p.opts.maxBatchBytes
	return s
}

// enqueue queues op, or returns why the sender takes no more ops
// (errSenderIdle or ErrClosed) or why op cannot be encoded.
func (s *queueSender) enqueue(op *sendOp) error {
	s.mu.Lock()
	if s.gone != nil {
		defer s.mu.Unlock()
		return s.gone
	}
	var c *sendChunk
	if n := len(s.chunks); n > 0 {
		c = s.chunks[n-1]
		if c.msgs+op.n > s.limit.msgs || c.bytes+op.bytes > s.limit.bytes || c.size()+op.size() > MaxSendBytes {
			c = nil // a request never carries more than a broker takes
		}
	}
	if c == nil {
		c = &sendChunk{}
		s.chunks = append(s.chunks, c)
	}
	err := c.add(op, s.q.ID)
	if err != nil && len(c.ops) == 0 {
		s.chunks = s.chunks[:len(s.chunks)-1]
		c.release()
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// run is the sender's goroutine.
func (s *queueSender) run() {
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	for {
		select {
		case <-s.wake:
			s.flush()
			idle.Reset(senderIdle)
		case <-idle.C:
			if s.p.retire(s) {
				return
			}
			idle.Reset(senderIdle)
		case <-s.quit:
			s.mu.Lock()
			s.gone = ErrClosed
			s.mu.Unlock()
			s.flush()
			return
		}
	}
}

// abort stops the sender for Close: its queued ops fail with ErrClosed,
// unsent (none are left unless Close abandoned sends).
func (s *queueSender) abort() {
	s.mu.Lock()
	s.gone = ErrClosed
	chunks := s.chunks
	s.chunks = nil
	s.mu.Unlock()
	for _, c := range chunks {
		for _, op := range c.ops {
			if op.state.CompareAndSwap(opQueued, opAbandoned) {
				op.finish(nil, ErrClosed)
			}
		}
		c.release()
	}
	close(s.quit)
}

// retireIfIdle stops the sender if it has nothing queued; the caller holds
// Producer.mu.
func (s *queueSender) retireIfIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.chunks) > 0 || s.inflight || s.gone != nil {
		return false
	}
	s.gone = errSenderIdle
	return true
}

// flush sends requests until nothing is queued, or until it finds a direct
// Send's request out: that Send flushes after it (see release).
func (s *queueSender) flush() {
	for {
		c := s.take()
		if c == nil {
			return
		}
		s.send(c)
		c.release()
		s.release()
	}
}

// direct takes op for its caller to send at once, on the caller's own
// goroutine, when the queue has nothing queued or out: one send at a time
// then costs no hop through the sender's goroutine on the way out or back.
// The caller sends with send and then calls release.
func (s *queueSender) direct(op *sendOp) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone != nil || s.inflight || len(s.chunks) > 0 {
		return false
	}
	op.state.Store(opTaken)
	s.inflight = true
	return true
}

// oneChunk is the request of op alone, whose records are recs.
func oneChunk(op *sendOp, recs []byte) *sendChunk {
	op.page, op.off, op.end = 0, 0, len(recs)
	return &sendChunk{ops: []*sendOp{op}, msgs: op.n, bytes: op.bytes, pages: []page{{b: recs}}}
}

// release ends the request out. What was queued meanwhile goes next: by
// the sender's goroutine, or, once that has stopped for Close, by the
// caller.
func (s *queueSender) release() {
	s.mu.Lock()
	s.inflight = false
	queued, gone := len(s.chunks) > 0, s.gone != nil
	s.mu.Unlock()
	switch {
	case !queued:
	case gone:
		s.flush()
	default:
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// take removes the next request's chunk from the queue, without its
// abandoned ops, or returns nil when there is none or a request is out.
func (s *queueSender) take() *sendChunk {
	var expired []*sendOp
	var dropped []*sendChunk
	defer func() { // outside the lock: they never went out
		for _, op := range expired {
			op.finish(nil, op.ctx.Err())
		}
		for _, c := range dropped {
			c.release()
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight {
		return nil
	}
	for len(s.chunks) > 0 {
		c := s.chunks[0]
		n := copy(s.chunks, s.chunks[1:])
		s.chunks[n] = nil
		s.chunks = s.chunks[:n]
		if c.claim(&expired) {
			s.inflight = true
			return c
		}
		dropped = append(dropped, c)
	}
	return nil
}

// claim marks c's ops taken and removes from c the ops their callers
// abandoned (Send) or whose context ended (SendAsync, added to expired);
// it reports whether any op is left.
func (c *sendChunk) claim(expired *[]*sendOp) bool {
	kept, pg, at := c.ops[:0], -1, 0
	c.msgs, c.bytes = 0, 0
	for _, op := range c.ops {
		if op.page != pg { // the page's first op
			pg, at = op.page, 0
			c.pages[pg].b = c.pages[pg].b[:0]
		}
		if op.onDone != nil && op.ctx.Err() != nil { // an async caller gave up (and so no retry follows)
			op.state.Store(opAbandoned)
			*expired = append(*expired, op)
			continue
		}
		if !op.state.CompareAndSwap(opQueued, opTaken) {
			continue // abandoned
		}
		p := &c.pages[pg]
		if op.off != at {
			copy(p.b[at:cap(p.b)], p.b[op.off:op.end])
			op.off, op.end = at, at+op.end-op.off
		}
		at = op.end
		p.b = p.b[:at]
		kept = append(kept, op)
		c.msgs, c.bytes = c.msgs+op.n, c.bytes+op.bytes
	}
	clear(c.ops[len(kept):])
	c.ops = kept
	return len(kept) > 0
}

// send sends c as one request and gives each op its results. When a
// coalesced request is refused as invalid (nothing was stored), each op is
// sent again on its own, so the error reaches only the callers it concerns.
// c's records stay valid until the caller releases c.
func (s *queueSender) send(c *sendChunk) {
	results, err := s.roundTrip(c)
	var ind *IndeterminateError
	if err != nil && len(c.ops) > 1 && errors.Is(err, ErrInvalidArgument) && !errors.As(err, &ind) {
		for _, op := range c.ops {
			s.send(oneChunk(op, bytes.Clone(c.recs(op)))) // a copy: gRPC may still hold c's
		}
		return
	}
	for _, op := range c.ops {
		if err != nil {
			op.fail(c, err)
			continue
		}
		n := op.n // op may be reused once finished (SendAsync's recycle)
		op.finish(results[:n:n], nil)
		results = results[n:]
	}
}

// roundTrip sends c, waiting at most until the latest deadline of its ops.
// A Send's op alone in its request bounds it with its own context (its
// attempt's, which has the send timeout): that Send waits no longer
// anyway, and one send at a time then sets up no context and timer of its
// own.
func (s *queueSender) roundTrip(c *sendChunk) ([]*gantryv1.SendResult, error) {
	var deadline time.Time
	attempt := uint32(1) // a request is a first attempt if all its ops are
	for _, op := range c.ops {
		if d, ok := op.ctx.Deadline(); ok && d.After(deadline) {
			deadline = d
		}
		attempt = max(attempt, op.attempt)
	}
	var ctx context.Context
	if op := c.ops[0]; len(c.ops) == 1 && op.onDone == nil && !deadline.IsZero() {
		ctx = op.ctx
	} else {
		if deadline.IsZero() {
			deadline = time.Now().Add(s.p.opts.sendTimeout)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(s.p.c.life, deadline)
		defer cancel()
	}
	o := &outgoing{req: &gantryv1.SendRequest{Topic: s.q.Topic, ProducerGroup: s.p.opts.group, Attempt: attempt}, c: c}
	results, err := s.b.roundTrip(ctx, o, c.bytes)
	if err == nil && len(results) != c.msgs {
		err = &IndeterminateError{Broker: s.b.addr, Err: fmt.Errorf("client: send to %s: %d results for %d messages: %w", s.b.addr, len(results), c.msgs, ErrInternal)}
	}
	return results, err
}

// outgoing is a request of c's records, which the stream encodes itself
// (grpcbuf.Encoded): the records go to gRPC as they are, not copied into
// a proto.Marshal of req. req has the request's other fields (the stream
// sets its RequestId).
type outgoing struct {
	req *gantryv1.SendRequest
	c   *sendChunk
}

// TakeEncoding implements grpcbuf.Encoded: the SendRequest's encoding,
// its records field first (one element holding every record), then its
// other fields.
func (o *outgoing) TakeEncoding() (mem.BufferSlice, error) {
	b := gantryv1.AppendRecordsKey(make([]byte, 0, 48+len(o.req.Topic)+len(o.req.ProducerGroup)), o.c.size())
	head := len(b)
	b = o.req.AppendFieldsAfterRecords(b)
	out := append(make(mem.BufferSlice, 0, len(o.c.pages)+2), mem.SliceBuffer(b[:head]))
	out = o.c.buffers(out)
	return append(out, mem.SliceBuffer(b[head:])), nil
}

// request returns o as a SendRequest with its records, for unary Send.
func (o *outgoing) request() *gantryv1.SendRequest {
	o.req.Records = o.req.Records[:0]
	for _, p := range o.c.pages {
		if len(p.b) > 0 {
			o.req.Records = append(o.req.Records, p.b)
		}
	}
	return o.req
}
