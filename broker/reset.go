package broker

import (
	"maps"
	"sync"
	"time"

	"github.com/gantrymq/gantry/broker/store"
)

// resetGrace is how long after a reset of a group's offsets a pull of one
// of its queues from elsewhere than the new offset is still served: its
// members were told (a WatchGroup event, RESET_CONSUMER_CLIENT_OFFSET) and
// move by themselves; the official Go client pauses 10 s before it pulls
// again, and a pull sent before it heard is answered normally. After it,
// such a pull is answered "offset moved" to the new offset: its consumer
// did not hear.
const resetGrace = 20 * time.Second

// OffsetReset is a reset of a group's offsets in a topic of this broker
// (ResetOffsetByTime), as its live members are told.
type OffsetReset struct {
	Group, Topic string
	// Timestamp is the time the offsets were reset to, unix ms.
	Timestamp int64
	// Offsets are the new offsets by queue id. Hooks share the map: they
	// must not modify it.
	Offsets map[int32]int64
}

// AddOffsetResetHook arranges for f to be called after every reset of a
// group's offsets (ResetOffsetByTime, whichever front end asked for it),
// once the new offsets are committed: the remoting front end tells the
// group's clients with RESET_CONSUMER_CLIENT_OFFSET (WatchGroup streams are
// told by the broker itself). f runs in the goroutine that reset, with no
// broker lock held; it must not block. The returned function removes the
// hook (idempotent).
func (b *Broker) AddOffsetResetHook(f func(OffsetReset)) (remove func()) {
	return b.resetHooks.add(f)
}

// offsetsReset tells the group's watches and the hooks of a reset.
func (b *Broker) offsetsReset(r OffsetReset) {
	b.watches.notifyReset(r)
	b.resetHooks.notify(r)
}

// movedPull is the answer to a pull from elsewhere than the offset its
// queue was reset to: "offset moved" (OFFSET_TOO_SMALL or
// OFFSET_OVERFLOW_BADLY, which the front ends answer PULL_OFFSET_MOVED and
// OFFSET_ILLEGAL), with the new offset to pull from.
func (b *Broker) movedPull(req PullRequest, to int64) PullResult {
	res := PullResult{Status: store.OffsetOverflowBadly, NextOffset: to}
	if req.Offset < to {
		res.Status = store.OffsetTooSmall
	}
	res.MinOffset, res.MaxOffset = b.store.QueueOffsets(req.Topic, req.QueueID)
	return res
}

// resetTable remembers the queues whose offsets were reset and that their
// group has not pulled from the new offset yet: the members may still
// commit where they were before they heard of it, and those commits must
// not undo the reset (RocketMQ 5's server-side reset does the same). An
// entry lasts until the group pulls the queue from its new offset, the
// queue is reset again, or ttl passes (nobody consumes it). The methods are
// safe for concurrent use; group offsets are committed under its mutex,
// which is taken before the queue lock table's (a commit checked against
// a queue's lock, lockTable.whileHeld) and the metadata's.
type resetTable struct {
	now        func() time.Time
	grace, ttl time.Duration

	mu sync.Mutex
	m  map[resetKey]pendingReset
}

type resetKey struct {
	group, topic string
	queueID      int32
}

type pendingReset struct {
	offset int64
	at     time.Time
}

func newResetTable(now func() time.Time, grace, ttl time.Duration) *resetTable {
	return &resetTable{now: now, grace: grace, ttl: ttl, m: map[resetKey]pendingReset{}}
}

// reset records a reset of group's offsets of topic and runs commit, which
// commits them, under t's lock (see commit), and forgets the expired
// resets.
func (t *resetTable) reset(group, topic string, offsets map[int32]int64, commit func() error) error {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	maps.DeleteFunc(t.m, func(_ resetKey, p pendingReset) bool { return now.Sub(p.at) >= t.ttl })
	for q, off := range offsets {
		t.m[resetKey{group, topic, q}] = pendingReset{offset: off, at: now}
	}
	return commit()
}

// get returns a queue's pending reset, if any. t.mu is held.
func (t *resetTable) get(k resetKey, now time.Time) (pendingReset, bool) {
	p, ok := t.m[k]
	if ok && now.Sub(p.at) >= t.ttl {
		delete(t.m, k)
		return p, false
	}
	return p, ok
}

// commit runs do, which commits offset, unless the queue was reset to
// another offset which the group has not pulled from yet: then it reports
// ignored. do runs under t's lock, so that a commit checked before a reset
// cannot land after it.
func (t *resetTable) commit(group, topic string, queueID int32, offset int64, do func() error) (ignored bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.get(resetKey{group, topic, queueID}, t.now()); ok && p.offset != offset {
		return true, nil
	}
	return false, do()
}

// pull checks a pull of group from offset. A pull from the reset offset
// ends the reset's pending state; one from elsewhere past the grace period
// must be answered "moved" to the reset offset (move).
func (t *resetTable) pull(group, topic string, queueID int32, offset int64) (to int64, move bool) {
	now := t.now()
	k := resetKey{group, topic, queueID}
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.get(k, now)
	switch {
	case !ok:
		return 0, false
	case p.offset == offset:
		delete(t.m, k)
		return 0, false
	}
	return p.offset, now.Sub(p.at) >= t.grace
}
