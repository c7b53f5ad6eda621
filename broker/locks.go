package broker

import (
	"fmt"
	"maps"
	"sync"
	"time"
)

// LockQueues grants clientID of group exclusive use of queues, for ordered
// consumption. Each queue is granted when it is unlocked, its lock expired
// (QueueLockTTL after it was granted or last renewed) or clientID already
// holds it, which renews it; a queue another client holds is refused. It
// returns the queues clientID now holds among those asked, in the order
// asked, each once. Every queue must be a read queue of an existing topic;
// the client need not have sent a heartbeat. A client's locks are released
// when it is unregistered, when its last watch ends and when it expires.
func (b *Broker) LockQueues(group, clientID string, queues []QueueRef) ([]QueueRef, error) {
	if !b.calls.enter() {
		return nil, ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.checkLockRequest(group, clientID, queues); err != nil {
		return nil, err
	}
	return b.locks.lock(group, clientID, queues), nil
}

// UnlockQueues releases the locks clientID of group holds on queues; locks
// held by other clients, and queues not locked, are left alone. The
// arguments are checked as LockQueues checks them.
func (b *Broker) UnlockQueues(group, clientID string, queues []QueueRef) error {
	if !b.calls.enter() {
		return ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.checkLockRequest(group, clientID, queues); err != nil {
		return err
	}
	b.locks.unlock(group, clientID, queues)
	return nil
}

// checkLockRequest checks a (un)lock request: a client id, a valid group
// name, and read queues of existing topics.
func (b *Broker) checkLockRequest(group, clientID string, queues []QueueRef) error {
	if clientID == "" {
		return fmt.Errorf("%w: queue lock without a client id", ErrInvalidArgument)
	}
	if err := checkGroupName(group); err != nil {
		return err
	}
	for _, q := range queues {
		tc, err := b.topic(q.Topic)
		if err != nil {
			return err
		}
		if q.QueueID < 0 || q.QueueID >= tc.ReadQueueNums {
			return fmt.Errorf("%w: queue id %d: topic %q has read queues 0..%d", ErrInvalidArgument, q.QueueID, q.Topic, tc.ReadQueueNums-1)
		}
	}
	return nil
}

// queueLock is a granted lock.
type queueLock struct {
	clientID string
	expires  time.Time
}

// lockTable holds the queue locks of every group. An expired lock counts as
// unlocked; sweep drops them.
type lockTable struct {
	now func() time.Time
	ttl time.Duration

	mu      sync.Mutex
	byGroup map[string]map[QueueRef]queueLock
}

func newLockTable(now func() time.Time, ttl time.Duration) *lockTable {
	return &lockTable{now: now, ttl: ttl, byGroup: map[string]map[QueueRef]queueLock{}}
}

// lock grants or renews each queue that is free, expired or clientID's,
// and returns those clientID holds, in order, each once.
func (t *lockTable) lock(group, clientID string, queues []QueueRef) []QueueRef {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.byGroup[group]
	if g == nil {
		g = map[QueueRef]queueLock{}
		t.byGroup[group] = g
	}
	held := make([]QueueRef, 0, len(queues))
	seen := make(map[QueueRef]bool, len(queues))
	for _, q := range queues {
		if seen[q] {
			continue
		}
		seen[q] = true
		if l, ok := g[q]; ok && l.clientID != clientID && now.Before(l.expires) {
			continue // held by another
		}
		g[q] = queueLock{clientID: clientID, expires: now.Add(t.ttl)}
		held = append(held, q)
	}
	if len(g) == 0 {
		delete(t.byGroup, group)
	}
	return held
}

// whileHeld runs do, unless another client than holder holds an
// unexpired lock on q: then it returns ErrQueueLocked naming it. do runs
// under t's lock, so that the queue cannot change hands between the check
// and do (a new owner locks, then reads the offset do commits): t's lock
// is then held while do takes the metadata's. An empty holder runs do
// unchecked.
func (t *lockTable) whileHeld(group, holder string, q QueueRef, do func() error) error {
	if holder == "" {
		return do()
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.byGroup[group][q]; ok && l.clientID != holder && now.Before(l.expires) {
		return fmt.Errorf("%w: %s/%d of group %q is held by %q, not %q", ErrQueueLocked, q.Topic, q.QueueID, group, l.clientID, holder)
	}
	return do()
}

// unlock releases clientID's locks on queues.
func (t *lockTable) unlock(group, clientID string, queues []QueueRef) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.byGroup[group]
	for _, q := range queues {
		if l, ok := g[q]; ok && l.clientID == clientID {
			delete(g, q)
		}
	}
	if len(g) == 0 {
		delete(t.byGroup, group)
	}
}

// release drops every lock clientID holds in group and returns how many
// unexpired ones it held.
func (t *lockTable) release(group, clientID string) int {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.byGroup[group]
	n := 0
	maps.DeleteFunc(g, func(_ QueueRef, l queueLock) bool {
		if l.clientID != clientID {
			return false
		}
		if now.Before(l.expires) {
			n++
		}
		return true
	})
	if len(g) == 0 {
		delete(t.byGroup, group)
	}
	return n
}

// sweep drops expired locks.
func (t *lockTable) sweep() {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, g := range t.byGroup {
		maps.DeleteFunc(g, func(_ QueueRef, l queueLock) bool { return !now.Before(l.expires) })
		if len(g) == 0 {
			delete(t.byGroup, name)
		}
	}
}

// held returns a group's unexpired locks.
func (t *lockTable) held(group string) map[QueueRef]string {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[QueueRef]string{}
	for q, l := range t.byGroup[group] {
		if now.Before(l.expires) {
			out[q] = l.clientID
		}
	}
	return out
}
