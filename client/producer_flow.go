package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// closeGrace is how long Close waits for the sends it accepted when its
// context has already ended at the call: a Close(ctx) with a spent ctx
// still lets the sends in flight finish, briefly, instead of failing them
// all at once.
const closeGrace = 5 * time.Second

// sendBuffer bounds the sends a producer has accepted and not completed
// (WithMaxBuffered), and tells Flush and Close when the sends accepted
// before them are done. Every send counts in the epoch it was accepted
// in; Flush starts a new epoch and waits for the earlier ones to empty.
type sendBuffer struct {
	maxMsgs  int
	maxBytes int64

	mu       sync.Mutex
	msgs     int
	bytes    int64
	room     chan struct{} // closed when room frees; nil while nobody waits
	refusing bool          // Close began: nothing more is accepted
	epoch    uint64        // the epoch sends are accepted in now
	cur      int           // sends of epoch not completed
	older    []epochCount  // earlier epochs with sends not completed, oldest first
}

// epochCount is an earlier epoch's count of sends not completed; done
// closes when it reaches zero.
type epochCount struct {
	epoch uint64
	n     int
	done  chan struct{}
}

func newSendBuffer(msgs int, bytes int64) *sendBuffer {
	return &sendBuffer{maxMsgs: msgs, maxBytes: bytes}
}

// acquire accepts b once there is room for it (or nothing else is
// buffered, so a send larger than the bound goes alone), or fails with
// ctx's error, or ErrClosed once Close began. b records its epoch.
func (s *sendBuffer) acquire(ctx context.Context, b *batch) error {
	n := len(b.msgs)
	s.mu.Lock()
	for {
		if s.refusing {
			s.mu.Unlock()
			return ErrClosed
		}
		if s.msgs == 0 || s.msgs+n <= s.maxMsgs && s.bytes+b.bytes <= s.maxBytes {
			s.msgs += n
			s.bytes += b.bytes
			s.cur++
			b.epoch = s.epoch
			s.mu.Unlock()
			return nil
		}
		if s.room == nil {
			s.room = make(chan struct{})
		}
		room := s.room
		s.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return fmt.Errorf("client: waiting for room in the producer's buffer (WithMaxBuffered: %d messages, %d bytes): %w",
				s.maxMsgs, s.maxBytes, ctx.Err())
		}
		s.mu.Lock()
	}
}

// release ends b's count, once its send has completed.
func (s *sendBuffer) release(b *batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs -= len(b.msgs)
	s.bytes -= b.bytes
	if s.room != nil {
		close(s.room)
		s.room = nil
	}
	if b.epoch == s.epoch {
		s.cur--
		return
	}
	for i := range s.older {
		if e := &s.older[i]; e.epoch == b.epoch {
			if e.n--; e.n == 0 {
				close(e.done)
				s.older = slices.Delete(s.older, i, i+1)
			}
			return
		}
	}
}

// flush waits until every send accepted before the call has completed, or
// ctx ends.
func (s *sendBuffer) flush(ctx context.Context) error {
	s.mu.Lock()
	if s.cur > 0 {
		s.older = append(s.older, epochCount{epoch: s.epoch, n: s.cur, done: make(chan struct{})})
		s.cur = 0
	}
	s.epoch++
	waits := make([]<-chan struct{}, 0, len(s.older))
	for _, e := range s.older {
		waits = append(waits, e.done)
	}
	s.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// refuse makes acquire fail with ErrClosed from now on, waking the sends
// waiting for room.
func (s *sendBuffer) refuse() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusing = true
	if s.room != nil {
		close(s.room)
		s.room = nil
	}
}

// pending returns how many messages are accepted and not completed.
func (s *sendBuffer) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msgs
}

// Flush waits until every send accepted before the call (Send, SendBatch
// and SendAsync) has completed: its result returned, or its callback
// returned. Sends accepted meanwhile are not waited for. It returns ctx's
// error if ctx ends first; the sends go on.
func (p *Producer) Flush(ctx context.Context) error {
	return p.buf.flush(ctx)
}

// accept is where a send is accepted: it waits for room in the buffer
// (WithMaxBuffered). Every accepted send ends in completed (Send,
// SendBatch) or asyncDone (SendAsync).
func (p *Producer) accept(ctx context.Context, b *batch) error {
	if err := p.checkSharding(b); err != nil {
		return err
	}
	return p.buf.acquire(ctx, b)
}

// sendAccepted is Send and SendBatch from their acceptance to their
// completion.
func (p *Producer) sendAccepted(ctx context.Context, b *batch) ([]SendResult, error) {
	if err := p.accept(ctx, b); err != nil {
		return nil, err
	}
	res, err := p.send(ctx, b)
	err = p.closedErr(err)
	p.completed(b)
	return res, err
}

// completed is where a Send or SendBatch completes.
func (p *Producer) completed(b *batch) {
	p.buf.release(b)
}

// asyncDone is where a SendAsync completes: cb gets the outcome, then the
// send leaves the buffer (so Flush returns after its callback).
func (p *Producer) asyncDone(b *batch, res SendResult, err error, cb SendCallback) {
	cb(b.msgs[0], res, p.closedErr(err))
	p.buf.release(b)
	p.async.done()
}

// Close stops the producer. New sends fail with ErrClosed at once. Close
// then waits for the sends already accepted (pending SendAsyncs and the
// queued and in-flight requests of Sends) until ctx ends; a ctx that has
// already ended at the call gets a grace of 5 s instead, so that a Close
// with a spent context does not drop at once what was nearly sent. What
// is left then fails with ErrClosed (an *IndeterminateError wrapping it
// for a request already written). Whatever happens, Close stops every
// goroutine of the producer and closes its connections before it
// returns. It returns ctx's error when sends were abandoned. Later calls
// return ErrClosed. A SendCallback must not call Close.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closeCalls++
	if p.closeCalls > 1 {
		p.mu.Unlock()
		return ErrClosed
	}
	p.mu.Unlock()
	p.refusing.Store(true)
	p.buf.refuse()

	dctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), closeGrace)
		defer cancel()
	}
	var abandoned error
	if err := p.buf.flush(dctx); err != nil {
		cause := ctx.Err()
		if cause == nil {
			cause = err
		}
		abandoned = fmt.Errorf("client: close: %d messages not completed: %w", p.buf.pending(), cause)
	}

	// Nothing is in flight unless sends were abandoned: those fail now,
	// the queued ones unsent, the ones out when their streams end.
	p.mu.Lock()
	p.closed.Store(true)
	close(p.closing) // retries and their backoff end with ErrClosed
	queues, brokers := slices.Collect(maps.Values(p.queues)), slices.Collect(maps.Values(p.brokers))
	p.mu.Unlock()
	for _, s := range queues {
		s.abort()
	}
	if abandoned != nil {
		p.c.stop()                                           // ends the streams and their requests
		abandoned = errors.Join(abandoned, p.c.pool.close()) // and unary calls
	}
	p.senders.wait()
	p.async.wait()
	for _, b := range brokers {
		b.close(streamCloseGrace) // one-way sends are answered
	}
	return errors.Join(abandoned, p.c.close())
}

// closedErr is the error of a send that Close abandoned: err with
// ErrClosed, still an *IndeterminateError if its request was written.
func (p *Producer) closedErr(err error) error {
	if err == nil || !p.closed.Load() || errors.Is(err, ErrClosed) {
		return err
	}
	var ind *IndeterminateError
	if errors.As(err, &ind) {
		c := *ind
		c.Err = fmt.Errorf("%w: %w", ErrClosed, ind.Err)
		return &c
	}
	return fmt.Errorf("%w: %w", ErrClosed, err)
}
