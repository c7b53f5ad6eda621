package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/internal/tick"
	"github.com/gantrymq/gantry/message"
)

// assignedQueue is a queue the consumer holds: its process queue, its pull
// loop and (ordered) its consume loop.
type assignedQueue struct {
	q        Queue
	filter   string
	pq       *processQueue
	ctx      context.Context // ends when the queue is released
	cancel   context.CancelFunc
	loops    sync.WaitGroup // the pull loop and the ordered consume loop
	inflight sync.WaitGroup // concurrent batches handed out and not finished
	wake     chan struct{}  // ordered: messages were added
	needLock bool           // clustering
	lockedAt atomic.Int64   // unix nanoseconds of the last grant or renewal; 0: not held

	commitMu  sync.Mutex
	committed int64 // -1: nothing committed by this consumer yet

	pullErrs pullErrors // since the queue was assigned

	// dropped: the queue was moved to a reset offset by another state
	// (replaceQueue); this one commits nothing and hands nothing more to
	// the handler. Set under commitMu.
	dropped atomic.Bool
}

// drop marks aq dropped, after any commit of it in progress.
func (aq *assignedQueue) drop() {
	aq.commitMu.Lock()
	defer aq.commitMu.Unlock()
	aq.dropped.Store(true)
}

// pullErrors counts failed pulls and keeps the last failure.
type pullErrors struct {
	n    atomic.Int64
	last atomic.Pointer[error]
}

func (e *pullErrors) add(err error) {
	e.last.Store(&err)
	e.n.Add(1)
}

// get returns the count and the last failure (nil if none).
func (e *pullErrors) get() (int64, error) {
	n := e.n.Load()
	if last := e.last.Load(); last != nil {
		return n, *last
	}
	return n, nil
}

// lockValid reports whether the consumer may consume the queue: always,
// unless it needs the queue's lock and its lock was not granted or renewed
// within the local expiry.
func (aq *assignedQueue) lockValid() bool {
	if !aq.needLock {
		return true
	}
	t := aq.lockedAt.Load()
	return t != 0 && time.Since(time.Unix(0, t)) < lockLocalExpiry
}

// consumeTask is work for the concurrent workers: one or more handler
// batches of one queue, in offset order.
type consumeTask struct {
	aq   *assignedQueue
	msgs []*MessageExt
}

// pullLoop pulls aq until it is released, within the flow control limits.
func (p *PushConsumer) pullLoop(aq *assignedQueue) {
	defer aq.loops.Done()
	var backoff time.Duration
	failures := 0 // in a row
	for aq.ctx.Err() == nil {
		if !aq.lockValid() { // pull only what it may consume
			sleepCtx(aq.ctx, 100*time.Millisecond)
			continue
		}
		n, bytes, span := aq.pq.load()
		if n >= p.opts.threshMsgs || bytes >= p.opts.threshBytes || (!p.opts.ordered && span > p.opts.maxSpan) {
			t := time.NewTimer(flowControlPause)
			select {
			case <-aq.pq.space:
			case <-t.C:
			case <-aq.ctx.Done():
			}
			t.Stop()
			continue
		}
		res, err := p.pull(aq, min(p.opts.pullBatch, p.opts.threshMsgs-n))
		if err != nil {
			if aq.ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), 3*time.Second)
			failures++
			aq.pullErrs.add(err)
			p.pullErrs.add(err)
			p.c.log.Warn("pull failed", "queue", aq.q, "offset", aq.pq.nextOffset(), "failures", failures, "retry_in", backoff, "err", err)
			sleepCtx(aq.ctx, backoff)
			continue
		}
		backoff, failures = 0, 0
		switch res.Status {
		case PullFound:
			if p.isRetryTopic(aq.q.Topic) {
				for _, m := range res.Messages { // handlers see the topic it was first sent to
					if t := m.Property(message.PropRetryTopic); t != "" {
						m.Topic = t
					}
				}
			}
			aq.pq.put(res.Messages, res.NextOffset)
			if p.opts.ordered {
				trigger(aq.wake)
			} else if !p.submit(aq, res.Messages) {
				return
			}
		case PullOffsetIllegal:
			p.c.log.Warn("offset out of the queue's range; moving", "queue", aq.q, "offset", aq.pq.nextOffset(), "to", res.NextOffset,
				"min", res.MinOffset, "max", res.MaxOffset)
			if res.NextOffset < aq.pq.nextOffset() {
				// Back (a reset of the group's offsets): what was pulled
				// from there on is dropped and read again.
				p.resetQueue(aq, res.NextOffset)
				return
			}
			aq.pq.setNext(res.NextOffset)
		default:
			aq.pq.setNext(res.NextOffset)
		}
	}
}

// pull reads the next messages of aq (long polling).
func (p *PushConsumer) pull(aq *assignedQueue, maxMsgs int) (PullResult, error) {
	return pullQueue(aq.ctx, p.c, pullCall{
		group: p.group, q: aq.q, offset: aq.pq.nextOffset(), maxMsgs: maxMsgs, maxBytes: int32(min(p.opts.threshBytes, 1<<30)),
		filter: aq.filter, hold: p.opts.hold, holdMargin: p.opts.holdMargin,
	})
}

// submit hands msgs to the workers; false when aq was released meanwhile.
// A task holds one or more handler batches, in order: as many as spread a
// pull's batches over the workers (a pull of 256 with 20 workers makes
// tasks of 12 batches), so that a backlog does not cost a channel handoff
// per message while a trickle still goes out one batch at a time.
func (p *PushConsumer) submit(aq *assignedQueue, msgs []*MessageExt) bool {
	bs := p.opts.batchSize
	per := max(1, (len(msgs)+bs-1)/bs/p.opts.concurrency) * bs
	for i := 0; i < len(msgs); i += per {
		t := consumeTask{aq: aq, msgs: msgs[i:min(i+per, len(msgs))]}
		aq.inflight.Add(1)
		select {
		case p.work <- t: // room in the buffer: the common case, without a select
			continue
		default:
		}
		select {
		case p.work <- t:
		case <-aq.ctx.Done():
			aq.inflight.Done()
			return false
		}
	}
	return true
}

// worker runs concurrent batches until Shutdown closes the work channel,
// once every queue is released: then nothing is left in it and nobody
// sends (pull loops and retries end before their queue's release does).
func (p *PushConsumer) worker() {
	for t := range p.work {
		p.consume(t)
	}
}

// consume handles a task's batches one after the other. It does so even
// when the queue is being released: the tasks handed out (to a worker or
// to the work channel's buffer) are an offset-ordered prefix of what was
// pulled, so handling them all (the queue's lock is held until they are
// done) leaves nothing handled above the committed offset. Only a queue
// moved to a reset offset (dropped) stops: its new state reads from there.
//
// Handled batches are marked done together, when a failed one or the
// task's end comes: one process-queue update per task, not per handler
// call. One clock read per call: a call starts when the one before it
// ended.
func (p *PushConsumer) consume(t consumeTask) {
	defer t.aq.inflight.Done()
	start := time.Now()
	ok := 0 // t.msgs[ok:i] were handled and are not marked done yet
	for i := 0; i < len(t.msgs); i += p.opts.batchSize {
		if t.aq.dropped.Load() { // moved to a reset offset: the rest is read again or skipped
			return
		}
		msgs := t.msgs[i:min(i+p.opts.batchSize, len(t.msgs))]
		var res ConsumeResult
		var reason string
		res, reason, start = p.call(msgs, start)
		if res == ConsumeSuccess && !anySettled(msgs) {
			continue
		}
		if ok < i {
			t.aq.pq.done(t.msgs[ok:i])
		}
		ok = i + len(msgs)
		p.settle(t.aq, msgs, res, reason)
	}
	if ok < len(t.msgs) {
		t.aq.pq.done(t.msgs[ok:])
	}
}

// settleFailed settles messages of a batch whose handler call failed:
// sent back to the broker, or retried here. A dead letter goes to the
// broker in broadcasting too: it is the only place that can keep it.
func (p *PushConsumer) settleFailed(aq *assignedQueue, msgs []*MessageExt, res ConsumeResult, reason string) {
	// What waits is a copy: the pull the messages came in, and every
	// message of it, can then be freed once the others are handled (the
	// process queue holds offsets only). In a retry storm nearly every
	// pull holds a failed message, and holding those pulls tripled the
	// consumer's live heap (and its GC work).
	if p.opts.model == Clustering || res == ConsumeDeadLetter {
		// Back to the broker, which retries through the group's retry
		// topic (or dead-letters); each message is in flight until then.
		backs := make([]*msgCopy, len(msgs))
		for i, m := range msgs {
			backs[i] = newBackCopy(m)
		}
		level := int32(0) // the retry ladder
		if res == ConsumeDeadLetter {
			level = -1
		}
		aq.inflight.Add(len(msgs))
		p.sendBackAsync(aq, backs, level, p.opts.retryDelay, reason)
		return
	}
	copies := make([]*MessageExt, len(msgs))
	for i, m := range msgs {
		copies[i] = m.detached()
	}
	p.retryLocally(aq, copies, p.opts.retryDelay)
}

// retryLocally hands msgs to the handler again after delay, counting one
// more attempt. It holds one count of aq.inflight until a worker finishes
// the batch.
func (p *PushConsumer) retryLocally(aq *assignedQueue, msgs []*MessageExt, delay time.Duration) {
	for _, m := range msgs {
		m.ReconsumeTimes++
	}
	t := consumeTask{aq: aq, msgs: msgs}
	aq.inflight.Add(1)
	again := func() {
		if !sleepCtx(t.aq.ctx, delay) {
			t.aq.inflight.Done()
			return
		}
		select {
		case p.work <- t:
		case <-t.aq.ctx.Done():
			t.aq.inflight.Done()
		}
	}
	if !p.tasks.goFunc(again) {
		t.aq.inflight.Done()
	}
}

// call runs the handler and says why it failed, if it did. Its context
// ends at the consume timeout; a panic, or a call that took longer than
// the timeout, counts as ConsumeRetryLater.
func (p *PushConsumer) call(msgs []*MessageExt, start time.Time) (res ConsumeResult, reason string, end time.Time) {
	var hooks consumeCall
	defer hooks.done(msgs, &res) // first in, last out: after a panic's result
	defer func() {
		if r := recover(); r != nil {
			p.c.log.Error("message handler panicked; the batch will be retried", "queue", msgs[0].Queue, "offset", msgs[0].QueueOffset, "panic", r)
			res, reason, end = ConsumeRetryLater, fmt.Sprintf("handler panicked: %v", r), start.Add(time.Since(start))
		}
	}()
	ctx := &callCtx{Context: p.handlerCtx, deadline: start.Add(p.opts.consumeTimeout)}
	defer ctx.release()
	res = p.handler(hooks.start(&p.c.hooks, ctx, msgs), msgs)
	took := time.Since(start) // one monotonic clock read, cheaper than time.Now
	end = start.Add(took)
	switch {
	case took > p.opts.consumeTimeout:
		// Too late, whatever it says: the broker may have given up on the
		// attempt's context, and it is what RocketMQ does with a message
		// consuming past ConsumeTimeout.
		p.c.log.Warn("message handler took longer than the consume timeout; the batch will be retried",
			"queue", msgs[0].Queue, "offset", msgs[0].QueueOffset, "took", took, "timeout", p.opts.consumeTimeout)
		return ConsumeRetryLater, fmt.Sprintf("handler took %s, longer than the consume timeout %s", took.Round(time.Millisecond), p.opts.consumeTimeout), end
	case res != ConsumeSuccess:
		reason = returnedReason(res)
	}
	return res, reason, end
}

// returnedReason is the failure reason of a handler call that returned
// res (constant strings: a retry storm makes one per failed call).
func returnedReason(res ConsumeResult) string {
	switch res {
	case ConsumeRetryLater:
		return "handler returned RETRY_LATER"
	case ConsumeSuspend:
		return "handler returned SUSPEND"
	case ConsumeDeadLetter:
		return "handler returned DEAD_LETTER"
	}
	return "handler returned " + res.String()
}

// sendBack hands a failed message back to its broker for retry through
// the group's retry topic, or for the dead-letter topic (deadLetter, or
// once it failed MaxReconsumeTimes times).
func (p *PushConsumer) sendBack(aq *assignedQueue, m *MessageExt, deadLetter bool, reason string) error {
	req := p.sendBackRequest(m, deadLetter, reason)
	ctx, cancel := context.WithTimeout(p.c.life, nameServerCallTimeout)
	defer cancel()
	_, err := p.c.call(aq.q, "send back", func(c gantryv1.MessagingClient) error {
		_, err := c.SendBack(ctx, req)
		return err
	})
	return err
}

// orderedLoop handles aq's messages strictly in offset order, one batch at
// a time, only while the consumer holds the queue.
func (p *PushConsumer) orderedLoop(aq *assignedQueue) {
	defer aq.loops.Done()
	for aq.ctx.Err() == nil {
		if !aq.pq.pending() {
			select {
			case <-aq.wake:
			case <-aq.ctx.Done():
			}
			continue
		}
		if !aq.lockValid() {
			sleepCtx(aq.ctx, 100*time.Millisecond)
			continue
		}
		msgs := aq.pq.take(p.opts.batchSize)
		res, reason, _ := p.call(msgs, time.Now())
		if res == ConsumeSuccess && !anySettled(msgs) {
			aq.pq.done(msgs)
			continue
		}
		p.settleOrdered(aq, msgs, res, reason)
	}
}

// deadLetter moves an ordered consumer's message to the dead-letter
// topic; false if the broker did not take it (it is then retried).
func (p *PushConsumer) deadLetter(aq *assignedQueue, m *MessageExt, reason string) bool {
	if err := p.sendBack(aq, m, true, reason); err != nil {
		p.c.log.Warn("dead-lettering failed; retrying the message", "queue", aq.q, "offset", m.QueueOffset, "err", err)
		return false
	}
	return true
}

// release stops consuming aq: pulling stops, the batches in flight finish,
// the offset is committed and (ordered) the lock is released.
func (p *PushConsumer) release(aq *assignedQueue) {
	aq.cancel()
	aq.loops.Wait()
	aq.inflight.Wait()
	ctx, cancel := context.WithTimeout(p.c.life, nameServerCallTimeout)
	defer cancel()
	if err := p.commit(ctx, aq); err != nil {
		p.c.log.Warn("commit offset on release failed", "queue", aq.q, "err", err)
	}
	if aq.needLock && aq.lockedAt.Load() != 0 {
		p.unlock(ctx, aq.q)
	}
	p.c.log.Debug("queue released", "queue", aq.q, "offset", aq.pq.commitOffset())
}

// commit records aq's offset on the broker if it moved.
func (p *PushConsumer) commit(ctx context.Context, aq *assignedQueue) error {
	aq.commitMu.Lock()
	defer aq.commitMu.Unlock()
	off := aq.pq.commitOffset()
	if off == aq.committed || aq.dropped.Load() {
		return nil
	}
	req := &gantryv1.CommitOffsetRequest{Group: p.group, Topic: aq.q.Topic, QueueId: aq.q.ID, Offset: off}
	switch {
	case p.opts.model == Broadcasting:
		req.ClientId = p.c.cfg.ClientID
	case aq.needLock: // refused once another member holds the queue: its offset is the new owner's
		req.LockHolder = p.c.cfg.ClientID
	}
	_, err := p.c.call(aq.q, "commit offset", func(m gantryv1.MessagingClient) error {
		_, err := m.CommitOffset(ctx, req)
		return err
	})
	if err == nil {
		aq.committed = off
	}
	return err
}

// commitLoop commits every queue's offset every commit interval.
func (p *PushConsumer) commitLoop() {
	tick.Every(p.life, p.opts.commitEvery, func() {
		for _, aq := range p.assignedQueues() {
			ctx, cancel := context.WithTimeout(p.life, nameServerCallTimeout)
			if err := p.commit(ctx, aq); err != nil && p.life.Err() == nil {
				p.c.log.Warn("commit offset failed", "queue", aq.q, "err", err)
			}
			cancel()
		}
	})
}

// assignedQueues returns the queues held now.
func (p *PushConsumer) assignedQueues() []*assignedQueue {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*assignedQueue, 0, len(p.queues))
	for _, aq := range p.queues {
		out = append(out, aq)
	}
	return out
}

// callCtx is a handler call's context: the consumer's handler context with
// the consume timeout as its deadline. The Done channel, and the timer
// behind it, are made only if the handler asks for them: most handlers
// never do, and a timer per call is most of a consumer's CPU for a cheap
// handler (docs/decisions/0020-client-hot-paths.md).
type callCtx struct {
	context.Context // the handler context (ends when Shutdown's does)
	deadline        time.Time

	mu     sync.Mutex
	inner  context.Context
	cancel context.CancelFunc
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *callCtx) Done() <-chan struct{} { return c.timed().Done() }

func (c *callCtx) Err() error { return c.timed().Err() }

// timed returns the context with the deadline, making it on first use.
func (c *callCtx) timed() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner == nil {
		c.inner, c.cancel = context.WithDeadline(c.Context, c.deadline)
	}
	return c.inner
}

// release ends the call's context (its timer, if made).
func (c *callCtx) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	} else {
		c.inner, c.cancel = canceledCtx, func() {}
	}
}

// canceledCtx is what a callCtx used after its call returned reports.
var canceledCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()
