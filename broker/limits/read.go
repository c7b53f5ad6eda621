package limits

import (
	"math"
	"strings"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
)

// retryTopicPrefix starts a group's retry topic, whose messages keep the
// default TTL of the topic they were first sent to (RETRY_TOPIC).
const retryTopicPrefix = "%RETRY%"

// BeforeRead is the service's part before a pull of a queue reads: a full
// queue of a drop-oldest topic drops its oldest messages, so that the
// store answers offsets below its new start as too small.
func (s *Service) BeforeRead(topic string, id int32) {
	tp := s.policy(topic)
	if tp.MaxBacklog == 0 || tp.Refuse {
		return
	}
	if minOff, maxOff := s.cfg.Store.QueueOffsets(topic, id); maxOff-minOff <= tp.MaxBacklog {
		return // the groups' offsets only shorten the backlog: not over
	}
	ts := s.topic(topic)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	s.dropOldest(ts, topic, id, tp.MaxBacklog)
}

// AfterRead releases the records of a pull of queue id of topic that are
// expired (TTL_MS, else the topic's default TTL; a retry's, its original
// topic's) or older than the topic's retention, counts the expired ones
// not counted before, and returns the others, in order, in recs' array.
func (s *Service) AfterRead(topic string, id int32, recs []commitlog.Region) []commitlog.Region {
	pt := s.policies.Load()
	if pt == nil || len(recs) == 0 {
		return recs
	}
	tp := pt.byTopic[topic]
	retry := pt.anyTTL && strings.HasPrefix(topic, retryTopicPrefix)
	if tp.Retention == 0 && tp.DefaultTTL == 0 && !retry && !anyHasTTL(recs) {
		return recs // the common case: nothing can have expired
	}
	now := s.cfg.Now().UnixMilli()
	cutoff := int64(math.MinInt64)
	if tp.Retention > 0 {
		cutoff = now - tp.Retention.Milliseconds()
	}
	var expired []int64
	kept := recs[:0]
	for _, r := range recs {
		switch {
		case message.StoreTimestampOf(r.B) <= cutoff:
			r.Release()
		case s.expired(r.B, tp, pt, retry, now):
			expired = append(expired, message.QueueOffsetOf(r.B))
			r.Release()
		default:
			kept = append(kept, r)
		}
	}
	clear(recs[len(kept):])
	if len(expired) > 0 {
		s.countExpired(topic, id, expired, -1)
	}
	return kept
}

// anyHasTTL reports whether a record may carry TTL_MS.
func anyHasTTL(recs []commitlog.Region) bool {
	for _, r := range recs {
		if mayHaveTTL(r.B) {
			return true
		}
	}
	return false
}

// expired reports whether a record of a topic with policy tp has expired
// at now (unix ms).
func (s *Service) expired(rec []byte, tp topicPolicy, pt *policyTable, retry bool, now int64) bool {
	ttl, origin, ok := recordTTL(rec, retry)
	if !ok {
		return false
	}
	if ttl == 0 {
		ttl = tp.DefaultTTL
		if retry && origin != nil {
			ttl = pt.byTopic[string(origin)].DefaultTTL
		}
	}
	exp := expiresAt(rec, ttl)
	return exp != 0 && now >= exp
}

// countExpired counts the expired messages at offsets of a queue that were
// not counted before, those below floor (consumed by every group) aside.
func (s *Service) countExpired(topic string, id int32, offsets []int64, floor int64) {
	ts := s.topic(topic)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	s.countLocked(ts.queue(id), offsets, floor)
}

// countLocked is countExpired with the topic's mu held.
func (s *Service) countLocked(q *queueState, offsets []int64, floor int64) {
	start := q.start.Load()
	for _, o := range offsets {
		if o < start || o < floor || q.counted.has(o) {
			continue
		}
		q.counted.add(o)
		q.expired.Add(1)
		s.dirty.Store(true)
	}
}
