package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
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
	records []byte          // the messages encoded for the attempt's queue
	n       int             // how many
	bytes   int64
	state   atomic.Int32

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

func newSendOp(ctx context.Context, records []byte, n int, bytes int64) *sendOp {
	return &sendOp{ctx: ctx, records: records, n: n, bytes: bytes, done: make(chan struct{})}
}

// initAsync makes op, which must be new, an op whose outcome goes to
// onDone: no waiting goroutine.
func (op *sendOp) initAsync(ctx context.Context, records []byte, n int, bytes int64, onDone opCompleter) *sendOp {
	op.ctx, op.records, op.n, op.bytes, op.onDone = ctx, records, n, bytes, onDone
	return op
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

// queueSender coalesces the sends to one queue: its goroutine sends one
// request at a time, and the ops that arrive while a request is in flight
// go together in the next one (up to the batch limits). With nothing in
// flight an op is sent at once, so coalescing adds no latency. It exits
// after senderIdle without work, and when the producer closes (after
// sending what is queued).
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

	mu       sync.Mutex // taken after Producer.mu
	ops      []*sendOp
	inflight bool  // a request of the queue is out (from run or from a direct Send)
	gone     error // non-nil once the sender takes no more ops
}

func newQueueSender(p *Producer, q Queue, b *brokerSender) *queueSender {
	s := &queueSender{p: p, q: q, b: b, wake: make(chan struct{}, 1), quit: make(chan struct{})}
	s.limit.msgs, s.limit.bytes = p.opts.maxBatchMessages, p.opts.maxBatchBytes
	return s
}

// enqueue queues op, or returns why the sender takes no more ops
// (errSenderIdle or ErrClosed).
func (s *queueSender) enqueue(op *sendOp) error {
	s.mu.Lock()
	if s.gone != nil {
		defer s.mu.Unlock()
		return s.gone
	}
	s.ops = append(s.ops, op)
	s.mu.Unlock()
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

// retireIfIdle stops the sender if it has nothing queued; the caller holds
// Producer.mu.
func (s *queueSender) retireIfIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ops) > 0 || s.inflight || s.gone != nil {
		return false
	}
	s.gone = errSenderIdle
	return true
}

// flush sends batches until nothing is queued, or until it finds a direct
// Send's request out: that Send flushes after it (see release).
func (s *queueSender) flush() {
	for {
		batch := s.take()
		if len(batch) == 0 {
			return
		}
		s.send(batch)
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
	if s.gone != nil || s.inflight || len(s.ops) > 0 {
		return false
	}
	op.state.Store(opTaken)
	s.inflight = true
	return true
}

// release ends the request out. What was queued meanwhile goes next: by
// the sender's goroutine, or, once that has stopped for Close, by the
// caller.
func (s *queueSender) release() {
	s.mu.Lock()
	s.inflight = false
	queued, gone := len(s.ops) > 0, s.gone != nil
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

// take removes the next batch from the queue: the queued ops in order, up
// to the limits (but at least one op), skipping abandoned ones.
func (s *queueSender) take() []*sendOp {
	var expired []*sendOp
	defer func() { // outside the lock: they never went out
		for _, op := range expired {
			op.finish(nil, op.ctx.Err())
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight {
		return nil
	}
	var batch []*sendOp
	msgs, bytes, i := 0, int64(0), 0
	for ; i < len(s.ops); i++ {
		op := s.ops[i]
		if len(batch) > 0 && (msgs+op.n > s.limit.msgs || bytes+op.bytes > s.limit.bytes) {
			break
		}
		if op.onDone != nil && op.ctx.Err() != nil { // an async caller gave up
			op.state.Store(opAbandoned)
			expired = append(expired, op)
			continue
		}
		if !op.state.CompareAndSwap(opQueued, opTaken) {
			continue // abandoned
		}
		batch = append(batch, op)
		msgs, bytes = msgs+op.n, bytes+op.bytes
	}
	n := copy(s.ops, s.ops[i:])
	clear(s.ops[n:])
	s.ops = s.ops[:n]
	s.inflight = len(batch) > 0
	return batch
}

// send sends batch as one request and gives each op its results. When a
// coalesced request is refused as invalid (nothing was stored), each op is
// sent again on its own, so the error reaches only the callers it concerns.
func (s *queueSender) send(batch []*sendOp) {
	results, err := s.roundTrip(batch)
	var ind *IndeterminateError
	if err != nil && len(batch) > 1 && errors.Is(err, ErrInvalidArgument) && !errors.As(err, &ind) {
		for _, op := range batch {
			s.send([]*sendOp{op})
		}
		return
	}
	for _, op := range batch {
		if err != nil {
			op.finish(nil, err)
			continue
		}
		op.finish(results[:op.n:op.n], nil)
		results = results[op.n:]
	}
}

// roundTrip sends the batch, waiting at most until the latest deadline of
// its ops. A Send's op alone in its request bounds it with its own context
// (its attempt's, which has the send timeout): that Send waits no longer
// anyway, and one send at a time then sets up no context and timer of its
// own.
func (s *queueSender) roundTrip(batch []*sendOp) ([]*gantryv1.SendResult, error) {
	var deadline time.Time
	n, size := 0, int64(0)
	for _, op := range batch {
		if d, ok := op.ctx.Deadline(); ok && d.After(deadline) {
			deadline = d
		}
		n, size = n+op.n, size+op.bytes
	}
	var ctx context.Context
	if op := batch[0]; len(batch) == 1 && op.onDone == nil && !deadline.IsZero() {
		ctx = op.ctx
	} else {
		if deadline.IsZero() {
			deadline = time.Now().Add(s.p.opts.sendTimeout)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(s.p.c.life, deadline)
		defer cancel()
	}
	req := &gantryv1.SendRequest{Topic: s.q.Topic, ProducerGroup: s.p.opts.group, Records: make([][]byte, 0, len(batch))}
	for _, op := range batch {
		req.Records = append(req.Records, op.records)
	}
	results, err := s.b.roundTrip(ctx, req, size)
	if err == nil && len(results) != n {
		err = &IndeterminateError{Broker: s.b.addr, Err: fmt.Errorf("client: send to %s: %d results for %d messages: %w", s.b.addr, len(results), n, ErrInternal)}
	}
	return results, err
}
