package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
)

const (
	// maxSendBackBatch bounds the messages of one SendBackBatch call.
	maxSendBackBatch = 256
	// sendBackQueue is how many failed messages wait for a call at most
	// before the workers that failed them wait too. Memory is bounded by
	// the process queues (a message stays in one until the broker took
	// it), not by this queue.
	sendBackQueue = 4096
	// sendBackCalls is how many SendBackBatch calls a broker's sender has
	// in flight at once: a retry storm is not held to one round trip at a
	// time.
	sendBackCalls = 4
	// sendBackLinger is how long a sender gathers failed messages after
	// the first before it calls: in a retry storm a call then carries
	// hundreds of messages instead of dozens, each call having a fixed
	// cost in the consumer and the broker, and a retry waits seconds for
	// its delay anyway (docs/decisions/0020-client-hot-paths.md).
	sendBackLinger = 5 * time.Millisecond
)

// backItem is a failed message on its way back to its broker.
type backItem struct {
	aq     *assignedQueue
	m      *msgCopy
	level  int32         // the wire's delay_level: 0 the retry ladder, > 0 that level, < 0 dead-letter
	after  time.Duration // the wait before a retry here, if the broker does not take it
	reason string
}

// A failed message waits for its send-back as a copy (see settleFailed;
// its process queue holds only its offset) that shares no memory with the
// pull the message came in. Nothing but the sender sees the copy (the
// handler had the original), so once the broker took the message it is
// recycled, body buffer included: a retry storm then allocates no copy per
// failure. A copy handed to the handler again (the send-back failed) is
// never recycled.
var backCopies = sync.Pool{New: func() any { return new(msgCopy) }}

// maxRecycledBody is the largest body buffer kept for reuse.
const maxRecycledBody = 64 << 10

// newBackCopy copies e for its send-back, into a recycled copy.
func newBackCopy(e *MessageExt) *msgCopy {
	return backCopies.Get().(*msgCopy).fill(e)
}

// recycleBackCopy returns c to the pool; nothing may use it afterwards.
func recycleBackCopy(c *msgCopy) {
	body := c.body[:0]
	if cap(body) > maxRecycledBody {
		body = nil
	}
	*c = msgCopy{body: body}
	backCopies.Put(c)
}

// backSender hands failed messages back to one broker, many per call, on
// its own goroutine, so that a retry storm does not hold the workers in
// one round trip per message. A message stays in its process queue (and
// counted in flight) until the broker took it.
type backSender struct {
	addr string
	ch   chan backItem
}

// backSenderFor returns the sender of addr, starting it if needed; nil
// once the consumer shuts down.
func (p *PushConsumer) backSenderFor(addr string) *backSender {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.backs[addr]; s != nil {
		return s
	}
	s := &backSender{addr: addr, ch: make(chan backItem, sendBackQueue)}
	if !p.tasks.goFunc(func() { p.runBackSender(s) }) {
		return nil
	}
	p.backs[addr] = s
	return s
}

// sendBackAsync queues msgs for their broker, for a retry at delay level
// level (0: the retry ladder's next) or the dead-letter topic (level < 0);
// a message the broker does not take is retried here after after. Each
// holds one count of aq.inflight until the broker took it or it was
// retried here.
func (p *PushConsumer) sendBackAsync(aq *assignedQueue, msgs []*msgCopy, level int32, after time.Duration, reason string) {
	addr, err := p.c.brokerAddr(aq.q)
	var s *backSender
	if err == nil {
		s = p.backSenderFor(addr)
	}
	for _, m := range msgs {
		if s == nil {
			p.retryLocally(aq, []*MessageExt{&m.ext}, after)
			aq.inflight.Done()
			continue
		}
		s.ch <- backItem{aq: aq, m: m, level: level, after: after, reason: reason}
	}
}

// runBackSender sends what is queued, in batches, up to sendBackCalls at
// once, until Shutdown closes the channel; it returns once its calls
// ended.
func (p *PushConsumer) runBackSender(s *backSender) {
	var calls sync.WaitGroup
	defer calls.Wait()
	slots := make(chan struct{}, sendBackCalls)
	for it := range s.ch {
		batch := make([]backItem, 1, maxSendBackBatch)
		batch[0] = it
		if len(s.ch) < maxSendBackBatch-1 {
			// The queue takes what fails meanwhile; Shutdown waits this
			// long at most. Not when a full batch waits already: a sender
			// lingering after every call could send no more than 256
			// messages per linger (51,000 a second), and a storm failing
			// faster would hold its failed messages ever longer, stalling
			// their queues' pulls at the span limit.
			time.Sleep(p.opts.backLinger)
		}
	more:
		for len(batch) < maxSendBackBatch {
			select {
			case it, ok := <-s.ch:
				if !ok {
					break more
				}
				batch = append(batch, it)
			default:
				break more
			}
		}
		slots <- struct{}{}
		calls.Go(func() {
			defer func() { <-slots }()
			p.sendBackBatch(s.addr, batch)
		})
	}
}

// sendBackBatch sends one batch; a message the broker did not take is
// retried here after the retry delay.
func (p *PushConsumer) sendBackBatch(addr string, batch []backItem) {
	// One allocation for the batch's requests. They carry no message id:
	// the broker checks that a record starts at the physical offset, and
	// an id per message costs a retry storm an encoding each.
	reqs := make([]gantryv1.SendBackRequest, len(batch))
	req := &gantryv1.SendBackBatchRequest{Requests: make([]*gantryv1.SendBackRequest, len(batch))}
	for i, it := range batch {
		p.fillSendBack(&reqs[i], &it.m.ext, it.level, it.reason)
		req.Requests[i] = &reqs[i]
	}
	ctx, cancel := context.WithTimeout(p.c.life, nameServerCallTimeout)
	defer cancel()
	var resp *gantryv1.SendBackBatchResponse
	m, err := p.c.messaging(addr)
	if err == nil {
		resp, err = m.SendBackBatch(ctx, req)
		err = callError("send back", addr, err, ErrNotFound)
	}
	if err == nil && len(resp.GetResults()) != len(batch) {
		err = fmt.Errorf("client: send back to %s: %d results for %d messages: %w", addr, len(resp.GetResults()), len(batch), ErrInternal)
	}
	// The taken messages leave their process queues together, a queue at a
	// time: one lock and one offset update per queue, not per message.
	var taken []*MessageExt
	var cur *assignedQueue
	flush := func() {
		if len(taken) > 0 {
			cur.pq.done(taken)
			taken = taken[:0]
		}
	}
	for i, it := range batch {
		if it.aq != cur {
			flush()
			cur = it.aq
		}
		ierr := err
		if ierr == nil {
			if e := resp.GetResults()[i].GetError(); e != nil {
				ierr = streamError(addr, e)
			}
		}
		if ierr != nil {
			p.c.log.Warn("send back failed; retrying the message here", "queue", it.aq.q, "offset", it.m.ext.QueueOffset, "err", ierr)
			p.retryLocally(it.aq, []*MessageExt{&it.m.ext}, it.after)
			batch[i].m = nil // the handler's now: not recycled
			continue
		}
		taken = append(taken, &it.m.ext)
	}
	flush()
	clear(taken)
	for _, it := range batch {
		if it.m != nil { // taken by the broker and out of its process queue
			recycleBackCopy(it.m)
		}
		it.aq.inflight.Done()
	}
}

// sendBackRequest is the request for one failed message, with its
// message id for the broker to check.
func (p *PushConsumer) sendBackRequest(m *MessageExt, dead bool, reason string) *gantryv1.SendBackRequest {
	req := &gantryv1.SendBackRequest{MsgId: m.MsgID()}
	level := int32(0)
	if dead {
		level = -1
	}
	p.fillSendBack(req, m, level, reason)
	return req
}

// fillSendBack sets what every send-back of m carries: the group, where
// the message is, the retry limit and the delay level (-1 for a dead
// letter).
func (p *PushConsumer) fillSendBack(r *gantryv1.SendBackRequest, m *MessageExt, level int32, reason string) {
	r.Group, r.PhysicalOffset, r.MaxReconsumeTimes, r.Reason = p.group, m.PhysicalOffset, int32(max(p.opts.maxReconsume, 0)), reason
	r.DelayLevel = level
}

// closeBackSenders ends the senders once nothing can be queued any more.
func (p *PushConsumer) closeBackSenders() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, s := range p.backs {
		close(s.ch)
		delete(p.backs, addr)
	}
}
