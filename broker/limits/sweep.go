package limits

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

// Sweep budgets: how many records one pass reads per queue looking for
// expired ones, and per read.
const (
	sweepScanMax   = 4096
	sweepReadMsgs  = 256
	sweepReadBytes = 4 << 20
)

// Sweep moves the start of every queue of the topics with a policy past
// the messages older than their retention and the expired ones at its
// front (counting those), drops the oldest messages of full drop-oldest
// queues, and saves the state if that changed it. The sweep loop runs it
// every SweepInterval.
func (s *Service) Sweep() {
	pt := s.policies.Load()
	if pt != nil {
		now := s.cfg.Now()
		for _, topic := range slices.Sorted(maps.Keys(pt.byTopic)) {
			tp := pt.byTopic[topic]
			ts := s.topic(topic)
			ts.mu.Lock()
			for id := range tp.queues {
				s.sweepQueue(ts, topic, id, tp, pt, now)
			}
			ts.mu.Unlock()
		}
	}
	if err := s.save(); err != nil {
		s.log.Warn("saving the limits state failed; will retry", "err", err)
	}
}

// sweepQueue is Sweep's work on one queue; ts.mu is held.
func (s *Service) sweepQueue(ts *topicState, topic string, id int32, tp topicPolicy, pt *policyTable, now time.Time) {
	minOff, maxOff := s.cfg.Store.QueueOffsets(topic, id)
	q := ts.queue(id)
	start := max(minOff, q.start.Load())
	if tp.Retention > 0 {
		start = s.firstStoredAfter(topic, id, start, maxOff, now.Add(-tp.Retention).UnixMilli())
	}
	floor, ok := s.floor(ts, topic, id, true)
	if !ok {
		floor = -1
	}
	start = s.skipExpired(q, topic, id, start, maxOff, floor, tp, pt, now.UnixMilli())
	s.raise(topic, id, q, start)
	if tp.MaxBacklog > 0 && !tp.Refuse {
		s.dropOldest(ts, topic, id, tp.MaxBacklog)
	}
}

// firstStoredAfter returns the first offset in [from, to) of a queue whose
// message was stored after ts (unix ms), to if none was. Store times grow
// with the offset; a message whose log data is gone counts as before.
func (s *Service) firstStoredAfter(topic string, id int32, from, to, ts int64) int64 {
	lo, hi := from, to
	for lo < hi {
		mid := lo + (hi-lo)/2
		gr, err := s.cfg.Store.Get(topic, id, mid, 1, 1, nil)
		if err != nil {
			return lo // unreadable: keep what may be live
		}
		switch {
		case gr.Status == store.OffsetTooSmall:
			lo = max(gr.NextOffset, mid+1)
		case len(gr.Records) == 1 && message.StoreTimestampOf(gr.Records[0].B) > ts:
			hi = mid
		default: // stored at or before ts, or its log data is gone
			lo = mid + 1
		}
		gr.Release()
	}
	return lo
}

// skipExpired returns the first offset at or above from of a queue whose
// message has not expired (at most sweepScanMax further), counting the
// expired ones at or above floor that were not counted. q's topic's mu is
// held.
func (s *Service) skipExpired(q *queueState, topic string, id int32, from, to, floor int64, tp topicPolicy, pt *policyTable, now int64) int64 {
	retry := false // a retry topic has no policy of its own: never swept
	var expired []int64
	defer func() { s.countLocked(q, expired, floor) }()
	for scanned := 0; from < to && scanned < sweepScanMax; {
		gr, err := s.cfg.Store.Get(topic, id, from, sweepReadMsgs, sweepReadBytes, nil)
		if err != nil {
			return from
		}
		if len(gr.Records) == 0 {
			next := gr.NextOffset
			gr.Release()
			if next <= from { // nothing further to read
				return from
			}
			from = next // below the queue's min, or entries whose data is gone
			continue
		}
		for _, r := range gr.Records {
			off := message.QueueOffsetOf(r.B)
			if !s.expired(r.B, tp, pt, retry, now) {
				gr.Release()
				return off
			}
			expired = append(expired, off)
			from = off + 1
			scanned++
		}
		from = max(from, gr.NextOffset)
		gr.Release()
	}
	return from
}

// KeepFrom is the commit log's pin for topics kept longer than
// FileReservedTime: the lowest log offset of a message of such a topic
// still readable (math.MaxInt64: nothing pinned; 0, the whole log, when a
// queue cannot be read).
func (s *Service) KeepFrom() int64 {
	keep := int64(math.MaxInt64)
	pt := s.policies.Load()
	if pt == nil {
		return 0
	}
	for topic, tp := range pt.byTopic {
		if tp.Retention <= s.cfg.FileReservedTime {
			continue
		}
		ts := s.topic(topic)
		for id := range tp.queues {
			ts.mu.Lock()
			start := ts.queue(id).start.Load()
			ts.mu.Unlock()
			minOff, _ := s.cfg.Store.QueueOffsets(topic, id)
			gr, err := s.cfg.Store.Get(topic, id, max(minOff, start), 1, 1, nil)
			if err != nil {
				s.log.Warn("cannot read a queue kept longer than fileReservedTime; keeping the whole log this pass", "topic", topic, "queue", id, "err", err)
				return 0
			}
			if len(gr.Records) > 0 {
				keep = min(keep, message.PhysicalOffsetOf(gr.Records[0].B))
			}
			gr.Release()
		}
	}
	return keep
}
