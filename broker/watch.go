package broker

import (
	"fmt"
	"slices"
	"sync"
)

// GroupWatch is an open watch of a consumer group's membership: the broker
// side of a WatchGroup stream. While a client has a watch of its group
// open, its membership is tied to the watch: when its last watch of the
// group is closed, the client is unregistered at once and its queue locks
// are released. Heartbeats still decide liveness: a client silent for
// channelExpiredTimeout is dropped even with a watch open, as RocketMQ drops
// a silent client whose connection is still open; its next heartbeat brings
// it back. The methods are safe for concurrent use.
type GroupWatch struct {
	b        *Broker
	group    string
	clientID string
	// changed holds a pending change (one at most: changes coalesce). It is
	// closed when the broker shuts down.
	changed   chan struct{}
	closeOnce sync.Once

	resetMu sync.Mutex
	resets  []OffsetReset // not taken yet: one per topic, the latest
}

// WatchGroup opens a watch of group's membership for clientID, which must
// be a live member (registered by Heartbeat): else ErrNotRegistered. Every
// watch must be closed.
func (b *Broker) WatchGroup(group, clientID string) (*GroupWatch, error) {
	if !b.calls.enter() {
		return nil, ErrShuttingDown
	}
	defer b.calls.leave()
	if clientID == "" {
		return nil, fmt.Errorf("%w: watch without a client id", ErrInvalidArgument)
	}
	if err := checkGroupName(group); err != nil {
		return nil, err
	}
	w := &GroupWatch{b: b, group: group, clientID: clientID, changed: make(chan struct{}, 1)}
	if err := b.watches.add(w, b.clients); err != nil {
		return nil, err
	}
	b.log.Debug("group watch opened", "group", group, "client", clientID)
	return w, nil
}

// Changed receives a value after the group's membership (the set of its
// client ids) changed, or its offsets were reset. Changes coalesce:
// however many happened since the last receive, one value is pending, and
// Members then returns the latest membership and Resets the resets. The
// broker never waits for a watch. The channel is closed when the broker
// shuts down.
func (w *GroupWatch) Changed() <-chan struct{} { return w.changed }

// Resets returns the resets of the group's offsets since the last call
// (ResetOffsetByTime), oldest first; of several resets of a topic, only
// the latest.
func (w *GroupWatch) Resets() []OffsetReset {
	w.resetMu.Lock()
	defer w.resetMu.Unlock()
	out := w.resets
	w.resets = nil
	return out
}

// addReset records a reset for Resets.
func (w *GroupWatch) addReset(r OffsetReset) {
	w.resetMu.Lock()
	defer w.resetMu.Unlock()
	w.resets = slices.DeleteFunc(w.resets, func(old OffsetReset) bool { return old.Topic == r.Topic })
	w.resets = append(w.resets, r)
}

// Members returns the ids of the group's live clients, sorted.
func (w *GroupWatch) Members() []string { return w.b.clients.ids(w.group) }

// Close ends the watch. If it was the client's last watch of the group, the
// client is unregistered (a membership change for the other watches) and
// its queue locks are released. Close is idempotent.
func (w *GroupWatch) Close() {
	w.closeOnce.Do(func() {
		last, wasMember, released := w.b.watches.remove(w, w.b.clients, w.b.locks)
		if !last {
			return
		}
		if released > 0 {
			w.b.log.Info("queue locks released", "group", w.group, "client", w.clientID, "locks", released)
		}
		if wasMember {
			w.b.log.Info("consumer left (watch ended)", "group", w.group, "client", w.clientID)
			w.b.consumersChanged(w.group)
		}
	})
}

// watchTable holds the open watches of every group and counts them per
// client. Its mutex is taken before the consumer table's and the lock
// table's (a watch is added only for a member, and the last one to end
// unregisters its client and releases its locks in the same step, so a
// client reconnecting its watch is never unregistered by the old one).
type watchTable struct {
	mu      sync.Mutex
	closed  bool
	byGroup map[string]map[*GroupWatch]struct{}
	count   map[memberKey]int
}

func newWatchTable() *watchTable {
	return &watchTable{byGroup: map[string]map[*GroupWatch]struct{}{}, count: map[memberKey]int{}}
}

// add registers w if its client is a member of its group.
func (t *watchTable) add(w *GroupWatch, clients *consumerTable) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrShuttingDown
	}
	if !clients.has(w.group, w.clientID) {
		return fmt.Errorf("%w: client %q of group %q: send a heartbeat first", ErrNotRegistered, w.clientID, w.group)
	}
	g := t.byGroup[w.group]
	if g == nil {
		g = map[*GroupWatch]struct{}{}
		t.byGroup[w.group] = g
	}
	g[w] = struct{}{}
	t.count[memberKey{w.group, w.clientID}]++
	return nil
}

// remove drops w. When it was its client's last watch, it unregisters the
// client and releases its locks, and reports whether the client was a
// member and how many live locks it held.
func (t *watchTable) remove(w *GroupWatch, clients *consumerTable, locks *lockTable) (last, wasMember bool, released int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.byGroup[w.group]
	delete(g, w)
	if len(g) == 0 {
		delete(t.byGroup, w.group)
	}
	k := memberKey{w.group, w.clientID}
	if t.count[k]--; t.count[k] > 0 {
		return false, false, 0
	}
	delete(t.count, k)
	return true, clients.unregister(w.group, w.clientID), locks.release(w.group, w.clientID)
}

// notify marks a change pending on every watch of group, without waiting.
func (t *watchTable) notify(group string) { t.notifyWith(group, nil) }

// notifyReset records a reset of r.Group's offsets on every watch of the
// group and marks a change pending, without waiting.
func (t *watchTable) notifyReset(r OffsetReset) { t.notifyWith(r.Group, &r) }

// notifyWith marks a change pending on every watch of group, after adding
// r, if set, to its resets.
func (t *watchTable) notifyWith(group string, r *OffsetReset) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	for w := range t.byGroup[group] {
		if r != nil {
			w.addReset(*r)
		}
		select {
		case w.changed <- struct{}{}:
		default: // one is pending already
		}
	}
}

// shutdown closes every watch's channel; later watches are refused.
func (t *watchTable) shutdown() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.closed = true
	for _, g := range t.byGroup {
		for w := range g {
			close(w.changed)
		}
	}
}
