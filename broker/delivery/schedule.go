package delivery

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/tick"
	"github.com/gantrymq/gantry/message"
)

// Delivery limits of the scheduler and the timer.
const (
	deliverBatch      = 256     // messages re-published per store.Put
	deliverBatchBytes = 4 << 20 // about the most log bytes read per batch
	maxUnsaved        = 64      // progress entries awaiting the flush, per level or timer
	warnEvery         = 10 * time.Second
)

// scheduler delivers the messages parked with a delay level: queue q of
// ScheduleTopic holds level q+1, in store order, so each level is read in
// order from its delivered offset (metadata.DelayOffset, delayOffset.json)
// and stops at the first message not yet due (store time + the level's
// delay after Config.Now). One goroutine serves every level, round robin,
// every Config.Tick.
//
// An offset is recorded for saving (metadata.SetDelayOffset) only once the
// commit log is durable past the re-published messages (the scheduler
// flushes it after about progressInterval), so a crash never loses a
// message; it may deliver one twice (the metadata is saved every
// flushConsumerOffsetInterval and at Close).
type scheduler struct {
	d         *Service
	log       *slog.Logger
	levels    []*levelState
	flushedAt time.Time // last flush of the log for the progress (real time)
	warned    time.Time // last delivery-failure warning (real time)
}

// levelState is one level's position. next is read by Pending; unsaved
// belongs to the scheduler's goroutine (and to finish, after it ended).
type levelState struct {
	level   int // 1-based
	queueID int32
	delayMS int64
	next    atomic.Int64 // every offset below it is delivered
	unsaved []progress   // delivered offsets not yet recorded, oldest first
}

// progress is delivered work waiting for the commit log to be durable up
// to logEnd (past the re-published messages) before it is recorded.
type progress struct {
	next   int64   // a level's new delivered offset
	offs   []int64 // the timer's delivered (or dropped) queue offsets
	logEnd int64
}

// newScheduler reads each level's delivered offset. Levels beyond the
// configured ones (queues left by an earlier, longer messageDelayLevel)
// use the last level's delay.
func newScheduler(d *Service) *scheduler {
	s := &scheduler{d: d, log: d.log.With("component", "scheduler")}
	tc, _ := d.meta.Topic(ScheduleTopic)
	delays := d.cfg.DelayLevels
	for q := range tc.WriteQueueNums {
		l := &levelState{level: int(q) + 1, queueID: q, delayMS: delays[min(int(q), len(delays)-1)].Milliseconds()}
		off, _ := d.meta.DelayOffset(l.level)
		if maxOff := queueEnd(d.store, ScheduleTopic, q); off > maxOff {
			s.log.Warn("delay level offset past its queue's end (the log lost its tail); delivering from the end",
				"level", l.level, "offset", off, "queueEnd", maxOff)
			off = maxOff
			_ = d.meta.SetDelayOffset(l.level, off)
		}
		l.next.Store(off)
		s.levels = append(s.levels, l)
	}
	return s
}

// queueEnd is where a parking queue ends at Open: its max offset, or,
// when the store opened with records not dispatched (a full disk), past
// its last record in the log. Progress saved beyond it was lost with the
// log's tail; progress within it must stand, or the messages the
// dispatcher has yet to bring back would be delivered again.
func queueEnd(st Store, topic string, queueID int32) int64 {
	_, maxOff := st.QueueOffsets(topic, queueID)
	return max(maxOff, st.RecoveredQueueEnd(topic, queueID))
}

// run delivers due messages every Config.Tick until ctx ends.
func (s *scheduler) run(ctx context.Context) {
	tick.Every(ctx, s.d.cfg.Tick, func() { s.step(ctx) })
}

// step records the progress the log made durable, then delivers rounds
// of due messages, a batch per level per round, until none is due.
func (s *scheduler) step(ctx context.Context) {
	s.record(s.durableEnd())
	for ctx.Err() == nil {
		moved := false
		for _, l := range s.levels {
			if s.deliver(ctx, l) {
				moved = true
			}
		}
		if !moved {
			return
		}
	}
}

// deliver re-publishes a batch of l's due messages and reports whether
// its offset moved.
func (s *scheduler) deliver(ctx context.Context, l *levelState) bool {
	off := l.next.Load()
	gr, err := s.d.store.Get(ScheduleTopic, l.queueID, off, deliverBatch, deliverBatchBytes, nil)
	if err != nil {
		s.warn("reading a delay level failed; will retry", "level", l.level, "offset", off, "err", err)
		return false
	}
	defer gr.Release()
	switch gr.Status {
	case store.Found, store.OffsetFoundNull:
	case store.OffsetTooSmall:
		s.log.Warn("parked messages deleted by log retention before their delivery", "level", l.level,
			"offsets", off, "to", gr.NextOffset)
		s.advance(l, gr.NextOffset)
		return true
	default: // nothing new
		return false
	}
	if len(gr.Records) == 0 {
		s.log.Warn("parked messages deleted by log retention before their delivery", "level", l.level,
			"offsets", off, "to", gr.NextOffset)
	}
	now := s.d.cfg.Now().UnixMilli()
	next, msgs := gr.NextOffset, make([]*message.Message, 0, len(gr.Records))
	var release func() // of retries read through references
	defer func() {
		if release != nil {
			release()
		}
	}()
	for _, r := range gr.Records {
		if message.StoreTimestampOf(r.B)+l.delayMS > now {
			next = message.QueueOffsetOf(r.B)
			break
		}
		if isRetryRefs(r.B) { // its retries are stored as a unit of their own
			if len(msgs) > 0 {
				next = message.QueueOffsetOf(r.B)
				break
			}
			retries, lost, rel, err := s.d.retriesOf(r.B)
			if err != nil {
				s.log.Warn("dropping retry references that cannot be delivered", "level", l.level,
					"offset", message.QueueOffsetOf(r.B), "err", err)
				continue
			}
			if lost > 0 {
				s.log.Warn("retries dropped: their messages are no longer in the log", "level", l.level,
					"offset", message.QueueOffsetOf(r.B), "lost", lost, "retried", len(retries))
			}
			msgs, release = retries, rel
			next = message.QueueOffsetOf(r.B) + 1
			break
		}
		m, err := s.d.unparked(r.B)
		if err != nil {
			s.log.Warn("dropping a parked message that cannot be delivered", "level", l.level,
				"offset", message.QueueOffsetOf(r.B), "err", err)
			continue
		}
		msgs = append(msgs, m)
	}
	if next == off {
		return false
	}
	if len(msgs) > 0 && !s.d.republish(ctx, msgs, s.warn) {
		return false
	}
	s.advance(l, next)
	return true
}

// advance moves l past its delivered messages and queues the new offset
// for recording once the log is durable past them.
func (s *scheduler) advance(l *levelState, next int64) {
	l.next.Store(next)
	l.unsaved = appendProgress(l.unsaved, progress{next: next, logEnd: s.d.commitLog.MaxOffset()})
	s.record(s.d.commitLog.FlushedOffset()) // at once under SYNC_FLUSH
}

// durableEnd returns the commit log's durable end, flushing it first when
// some level's progress waits for it and the last such flush is
// progressInterval old: under ASYNC_FLUSH the log may otherwise wait for
// more data.
func (s *scheduler) durableEnd() int64 {
	cl := s.d.commitLog
	flushed := cl.FlushedOffset()
	if time.Since(s.flushedAt) < progressInterval {
		return flushed
	}
	for _, l := range s.levels {
		if len(l.unsaved) > 0 && l.unsaved[len(l.unsaved)-1].logEnd > flushed {
			if err := cl.Flush(); err != nil {
				s.warn("flushing the commit log for the delay levels' progress failed; will retry", "err", err)
			}
			s.flushedAt = time.Now()
			return cl.FlushedOffset()
		}
	}
	return flushed
}

// record records each level's latest offset whose messages are durable
// (flushed is the commit log's durable end).
func (s *scheduler) record(flushed int64) {
	for _, l := range s.levels {
		i := 0
		for i < len(l.unsaved) && l.unsaved[i].logEnd <= flushed {
			i++
		}
		if i == 0 {
			continue
		}
		if err := s.d.meta.SetDelayOffset(l.level, l.unsaved[i-1].next); err != nil {
			s.log.Error("recording a delay level's offset failed", "level", l.level, "err", err)
		}
		l.unsaved = l.unsaved[i:]
	}
}

// finish makes the delivered messages durable and records every level's
// offset; Close calls it after the loop ended, before the store saves the
// metadata. If the flush fails, the unrecorded messages will be delivered
// again.
func (s *scheduler) finish() error {
	if err := s.d.commitLog.Flush(); err != nil {
		return err
	}
	s.record(s.d.commitLog.FlushedOffset())
	return nil
}

// pending returns the messages parked per level and not delivered.
func (s *scheduler) pending() []int64 {
	out := make([]int64, len(s.levels))
	for i, l := range s.levels {
		_, maxOff := s.d.store.QueueOffsets(ScheduleTopic, l.queueID)
		out[i] = max(maxOff-l.next.Load(), 0)
	}
	return out
}

// warn logs a delivery failure at most every warnEvery: a full disk must
// not flood the log ten times a second.
func (s *scheduler) warn(msg string, args ...any) {
	if time.Since(s.warned) >= warnEvery {
		s.warned = time.Now()
		s.log.Warn(msg, args...)
	}
}

// appendProgress queues p; past maxUnsaved entries (the log not flushing)
// p merges into the newest, which only delays recording that one.
func appendProgress(q []progress, p progress) []progress {
	if len(q) >= maxUnsaved {
		last := &q[len(q)-1]
		last.next, last.offs, last.logEnd = p.next, append(last.offs, p.offs...), p.logEnd
		return q
	}
	return append(q, p)
}

// republish stores delivered messages (several topics in one unit) and
// reports whether they are in the log; warn reports a failure. An error
// after which the messages are in the log (a flush timeout, ctx ended
// while waiting for the flush) counts as stored. A unit larger than a
// log segment holds is stored in halves (if one fails, the first may be
// delivered again: delivery is at least once).
func (d *Service) republish(ctx context.Context, msgs []*message.Message, warn func(string, ...any)) bool {
	res, err := d.put(ctx, msgs)
	if len(res) == len(msgs) {
		return true
	}
	if h := len(msgs) / 2; h > 0 && errors.Is(err, commitlog.ErrRecordTooLarge) {
		return d.republish(ctx, msgs[:h], warn) && d.republish(ctx, msgs[h:], warn)
	}
	warn("re-publishing parked messages failed; will retry", "messages", len(msgs), "err", err)
	return false
}

// put encodes msgs once and stores them as one unit.
func (d *Service) put(ctx context.Context, msgs []*message.Message) ([]store.PutResult, error) {
	batch, err := d.store.Encode(msgs)
	if err != nil {
		return nil, err
	}
	defer batch.Release()
	return d.store.PutBatch(ctx, batch)
}
