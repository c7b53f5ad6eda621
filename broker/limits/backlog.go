package limits

import (
	"errors"
	"fmt"
)

// ErrBacklogFull: a send was refused because a queue of its topic holds
// queue.max.backlog messages not yet consumed and the topic's
// queue.max.policy is refuse. Nothing was stored.
var ErrBacklogFull = errors.New("broker: queue backlog full")

// BacklogFullError is the refusal of a send to a full queue. It unwraps to
// ErrBacklogFull.
type BacklogFullError struct {
	Topic   string
	QueueID int32
	// Backlog is the queue's backlog with the send's earlier messages for
	// it; Adding is the send's messages for it; Limit is queue.max.backlog.
	Backlog, Adding, Limit int64
}

func (e *BacklogFullError) Error() string {
	return fmt.Sprintf("broker: queue backlog full: queue %d of topic %q holds %d messages not yet consumed by every group "+
		"and the send adds %d, over its %s=%d (%s=%s); nothing was stored: consume the queue, or raise the limit",
		e.QueueID, e.Topic, e.Backlog, e.Adding, AttrMaxBacklog, e.Limit, AttrBacklogPolicy, PolicyRefuse)
}

// Unwrap returns ErrBacklogFull.
func (e *BacklogFullError) Unwrap() error { return ErrBacklogFull }

// floor returns the lowest offset committed in a queue by the groups with
// an offset in it, and whether any has one. The groups' offsets are read
// again when fresh and they changed since last read; otherwise the last
// read stands: offsets only grow but for resets and deletions, so a stale
// floor is low and overstates a backlog, never understates it (the sweep
// reads them every pass). ts.mu is held.
func (s *Service) floor(ts *topicState, topic string, id int32, fresh bool) (int64, bool) {
	if ts.floors == nil || fresh {
		if v := s.cfg.Metadata.Version(); ts.floors == nil || v != ts.floorsVer {
			ts.floors, ts.floorsVer = s.readFloors(topic), v
		}
	}
	f, ok := ts.floors[id]
	return f, ok
}

// readFloors reads each queue's lowest committed offset over the groups
// with offsets in topic (broadcast consumers' own offsets aside).
func (s *Service) readFloors(topic string) map[int32]int64 {
	out := map[int32]int64{}
	for _, gt := range s.cfg.Metadata.OffsetKeys("", topic) {
		for id, off := range s.cfg.Metadata.Offsets(gt[0], topic) {
			if cur, ok := out[id]; !ok || off < cur {
				out[id] = off
			}
		}
	}
	return out
}

// backlog returns a queue's backlog: from the first offset not yet
// consumed by every group (the queue's readable start when no group has an
// offset in it) to its end, with the messages admitted but not yet
// stored. ts.mu is held.
func (s *Service) backlog(ts *topicState, topic string, id int32, fresh bool) int64 {
	minOff, maxOff := s.cfg.Store.QueueOffsets(topic, id)
	q := ts.queue(id)
	end := max(maxOff, q.stamped) + q.inflight
	from := max(minOff, q.start.Load())
	if f, ok := s.floor(ts, topic, id, fresh); ok {
		from = max(from, min(f, end))
	}
	return max(end-from, 0)
}

// dropOldest hides the oldest messages of a queue whose backlog is over
// limit, so that limit remain, and counts those no group had consumed.
// ts.mu is held.
func (s *Service) dropOldest(ts *topicState, topic string, id int32, limit int64) {
	if s.backlog(ts, topic, id, false) <= limit || s.backlog(ts, topic, id, true) <= limit {
		return
	}
	minOff, maxOff := s.cfg.Store.QueueOffsets(topic, id)
	q := ts.queue(id)
	from := max(minOff, q.start.Load())
	if f, ok := s.floor(ts, topic, id, false); ok {
		from = max(from, min(f, maxOff))
	}
	start := maxOff - limit
	if start <= from {
		return // over only with sends in flight: they drop the oldest once stored
	}
	q.dropped.Add(start - from)
	s.raise(topic, id, q, start)
}

// Refuses reports whether sends to topic are checked by Admit: its queues
// have a limit and refuse when full.
func (s *Service) Refuses(topic string) bool {
	tp := s.policy(topic)
	return tp.MaxBacklog > 0 && tp.Refuse
}

// Admission is room reserved in a topic's queues for a send. Settle it
// with Done once the send is stored or failed.
type Admission struct {
	s      *Service
	ts     *topicState
	counts map[int32]int64
}

// Admit reserves room for a send's messages that go straight into topic's
// queues (queueIDs: each one's queue), or refuses the whole send with a
// *BacklogFullError when a queue's backlog would pass its limit. It
// returns nil, nil for a topic whose queues do not refuse.
func (s *Service) Admit(topic string, queueIDs []int32) (*Admission, error) {
	tp := s.policy(topic)
	if tp.MaxBacklog == 0 || !tp.Refuse || len(queueIDs) == 0 {
		return nil, nil
	}
	counts := map[int32]int64{}
	for _, id := range queueIDs {
		counts[id]++
	}
	ts := s.topic(topic)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for id, n := range counts {
		b := s.backlog(ts, topic, id, false)
		if b+n > tp.MaxBacklog {
			b = s.backlog(ts, topic, id, true)
		}
		if b+n > tp.MaxBacklog {
			return nil, &BacklogFullError{Topic: topic, QueueID: id, Backlog: b, Adding: n, Limit: tp.MaxBacklog}
		}
	}
	for id, n := range counts {
		ts.queue(id).inflight += n
	}
	return &Admission{s: s, ts: ts, counts: counts}, nil
}

// Stored is where a message of an admitted send was stored.
type Stored struct {
	QueueID     int32
	QueueOffset int64
}

// Done settles an admission with where its messages were stored (none
// when the send failed). Nil-safe.
func (a *Admission) Done(stored []Stored) {
	if a == nil {
		return
	}
	a.ts.mu.Lock()
	defer a.ts.mu.Unlock()
	for id, n := range a.counts {
		a.ts.queue(id).inflight -= n
	}
	for _, st := range stored {
		if q := a.ts.queue(st.QueueID); st.QueueOffset+1 > q.stamped {
			q.stamped = st.QueueOffset + 1
		}
	}
}
