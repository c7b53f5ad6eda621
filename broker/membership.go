package broker

import (
	"slices"
	"sync"
)

// AddConsumersChangedHook arranges for f to be called after every change of
// a group's membership, as Config.OnConsumersChanged is: after a client
// joins a group (its first heartbeat), leaves it (UnregisterClient, the end
// of its last watch) or expires, never after a mere refresh. It is for the
// parts of a broker started after Open: the remoting front end tells the
// group's clients with NOTIFY_CONSUMER_IDS_CHANGED. f runs in the goroutine
// that made the change, with no broker lock held; it must not block. The
// returned function removes the hook (idempotent); a change already being
// signalled may still call f once after it returns.
func (b *Broker) AddConsumersChangedHook(f func(group string)) (remove func()) {
	return b.membership.add(f)
}

// membershipHooks holds the hooks of AddConsumersChangedHook. The zero
// value is ready; its mutex is a leaf, never held while a hook runs.
type membershipHooks struct {
	mu    sync.Mutex
	next  uint64
	hooks []membershipHook
}

type membershipHook struct {
	id uint64
	f  func(group string)
}

func (m *membershipHooks) add(f func(group string)) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.next
	m.next++
	m.hooks = append(slices.Clip(m.hooks), membershipHook{id, f}) // a new array: notify's snapshots stay valid
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.hooks = slices.DeleteFunc(slices.Clone(m.hooks), func(h membershipHook) bool { return h.id == id })
	}
}

// notify calls every hook with group.
func (m *membershipHooks) notify(group string) {
	m.mu.Lock()
	hooks := m.hooks // never modified in place: add and remove make new arrays
	m.mu.Unlock()
	for _, h := range hooks {
		h.f(group)
	}
}
