package client

import (
	"strings"
	"time"
	"unicode/utf8"
)

// settlement is what a push consumer's handler asked for one message of
// its batch, apart from the batch's ConsumeResult.
type settlement struct {
	dead   bool          // DeadLetter; else RetryAfter
	after  time.Duration // RetryAfter's d
	reason string        // DeadLetter's
}

// RetryAfter settles this message apart from its batch: called by a push
// consumer's handler on a message of the batch it is handling, before it
// returns, it has the message handed to the handler again after at least
// d. The batch's ConsumeResult then applies to the other messages only
// (ConsumeSuccess: they are done).
//
// A concurrent consumer in clustering sends the message back to the broker
// at the smallest delay level of RocketMQ's default ladder (1s 5s 10s 30s
// 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h) whose delay is d or more,
// the last one (2 h) for longer; a broker configured with another
// messageDelayLevel waits its own delay of that level. The message comes
// back through the group's retry topic %RETRY%<group>, with
// ReconsumeTimes one higher, and counts as a failure: once it failed
// MaxReconsumeTimes times it is dead-lettered instead. In broadcasting, or
// when the broker does not take it back, the consumer hands it to the
// handler again itself, after d.
//
// An ordered consumer cannot let the rest of the queue pass it: the queue
// pauses for d and then hands this message again, with the messages after
// it in the batch (what the handler asked for those is dropped); the
// messages before it are settled by the batch's result and their own
// calls.
//
// The last RetryAfter or DeadLetter call on a message wins. A message that
// is not in a push consumer's batch (a pull consumer's) ignores it.
func (e *MessageExt) RetryAfter(d time.Duration) {
	e.settle = &settlement{after: max(d, 0)}
}

// maxDeadLetterReason bounds the reason a dead letter keeps.
const maxDeadLetterReason = 1024

// DeadLetter settles this message apart from its batch: called by a push
// consumer's handler on a message of the batch it is handling, before it
// returns, it moves the message to the group's dead-letter topic
// %DLQ%<group> at once, without retries, keeping reason as its DLQ_REASON
// property (the first 1 KiB, bytes 0x01 and 0x02 replaced by spaces). The
// batch's ConsumeResult then applies to the other messages only. In
// broadcasting each member that dead-letters its copy stores one. If the
// broker does not take the message, it is handed to the handler again
// after the retry delay (ordered: the suspend time).
//
// An ordered consumer dead-letters the message and goes on with the
// queue.
//
// The last RetryAfter or DeadLetter call on a message wins. A message that
// is not in a push consumer's batch (a pull consumer's) ignores it.
func (e *MessageExt) DeadLetter(reason string) {
	e.settle = &settlement{dead: true, reason: deadLetterReason(reason)}
}

// deadLetterReason is reason as the broker keeps it: bounded, without the
// bytes that separate stored properties (the broker refuses those).
func deadLetterReason(reason string) string {
	if len(reason) > maxDeadLetterReason {
		reason = reason[:maxDeadLetterReason]
		for !utf8.ValidString(reason) { // do not cut a character in two
			reason = reason[:len(reason)-1]
		}
	}
	if strings.ContainsAny(reason, "\x01\x02") {
		reason = strings.NewReplacer("\x01", " ", "\x02", " ").Replace(reason)
	}
	return reason
}

// defaultDelayLevels is RocketMQ's default messageDelayLevel: the delays of
// levels 1 to 18.
var defaultDelayLevels = [...]time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute, 6 * time.Minute,
	7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour,
}

// delayLevelFor is the smallest delay level whose delay is d or more, the
// last level for a longer d.
func delayLevelFor(d time.Duration) int32 {
	for i, l := range defaultDelayLevels {
		if l >= d {
			return int32(i + 1)
		}
	}
	return int32(len(defaultDelayLevels))
}

// retryAfterReason is the reason a message sent back by RetryAfter keeps
// if it is dead-lettered for having failed too often.
const retryAfterReason = "handler called RetryAfter"

// settledAs is how m is settled after its batch's handler call returned
// res: as its RetryAfter (ConsumeRetryLater) or DeadLetter
// (ConsumeDeadLetter) asked, else by res. It holds from the call's return
// until the consumer settles the batch, which clears the marks: consume
// hooks read it there.
func (e *MessageExt) settledAs(res ConsumeResult) ConsumeResult {
	switch s := e.settle; {
	case s == nil:
		return res
	case s.dead:
		return ConsumeDeadLetter
	}
	return ConsumeRetryLater
}

// anySettled reports whether the handler settled a message of msgs apart
// from the batch.
func anySettled(msgs []*MessageExt) bool {
	for _, m := range msgs {
		if m.settle != nil {
			return true
		}
	}
	return false
}

// settle settles a concurrent batch the handler failed, or settled
// messages of apart: those by what was asked for each, the rest by res.
func (p *PushConsumer) settle(aq *assignedQueue, msgs []*MessageExt, res ConsumeResult, reason string) {
	rest := msgs
	if anySettled(msgs) {
		rest = make([]*MessageExt, 0, len(msgs))
		for _, m := range msgs {
			s := m.settle
			if s == nil {
				rest = append(rest, m)
				continue
			}
			m.settle = nil
			p.settleOne(aq, m, s)
		}
	}
	switch {
	case len(rest) == 0:
	case res == ConsumeSuccess:
		aq.pq.done(rest)
	default:
		p.settleFailed(aq, rest, res, reason)
	}
}

// settleOne settles one message of a concurrent batch as its handler
// asked: back to the broker (a retry at the level of its delay, or a dead
// letter), or, for a retry in broadcasting, here after the delay.
func (p *PushConsumer) settleOne(aq *assignedQueue, m *MessageExt, s *settlement) {
	if s.dead || p.opts.model == Clustering {
		level, after, reason := int32(-1), p.opts.retryDelay, s.reason
		if !s.dead {
			level, after, reason = delayLevelFor(s.after), s.after, retryAfterReason
		}
		aq.inflight.Add(1)
		p.sendBackAsync(aq, []*msgCopy{newBackCopy(m)}, level, after, reason)
		return
	}
	p.retryLocally(aq, []*MessageExt{m.detached()}, s.after)
}

// settleOrdered settles an ordered batch the handler failed, or settled
// messages of apart, in offset order: a message to dead-letter goes to the
// broker and the walk goes on; at the first message to retry (asked with
// RetryAfter, or by a failed batch result) the queue pauses, and that
// message and those after it are handed again.
func (p *PushConsumer) settleOrdered(aq *assignedQueue, msgs []*MessageExt, res ConsumeResult, reason string) {
	deadRest := res == ConsumeDeadLetter ||
		(p.opts.model == Clustering && p.opts.maxReconsume > 0 && int(msgs[0].ReconsumeTimes) >= p.opts.maxReconsume)
	for i, m := range msgs {
		s := m.settle
		m.settle = nil
		ok, pause := false, p.opts.suspendTime
		switch {
		case s != nil && s.dead:
			ok = p.deadLetter(aq, m, s.reason)
		case s != nil:
			pause = s.after
		case res == ConsumeSuccess:
			ok = true
		case deadRest:
			ok = p.deadLetter(aq, m, reason)
		}
		if !ok {
			p.suspendOrdered(aq, msgs, i, pause)
			return
		}
	}
	aq.pq.done(msgs)
}

// suspendOrdered marks msgs[:i] done and hands msgs[i:] out again after
// pause, counting one more attempt for each.
func (p *PushConsumer) suspendOrdered(aq *assignedQueue, msgs []*MessageExt, i int, pause time.Duration) {
	if i > 0 {
		aq.pq.done(msgs[:i])
	}
	aq.pq.untake(len(msgs) - i)
	for _, m := range msgs[i:] {
		m.settle = nil
		m.ReconsumeTimes++
	}
	sleepCtx(aq.ctx, pause)
}
