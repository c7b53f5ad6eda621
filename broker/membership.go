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

// hooks holds the hooks of AddConsumersChangedHook or AddOffsetResetHook.
// The zero value is ready; its mutex is a leaf, never held while a hook
// runs.
type hooks[T any] struct {
	mu   sync.Mutex
	next uint64
	fs   []hook[T]
}

type hook[T any] struct {
	id uint64
	f  func(T)
}

func (m *hooks[T]) add(f func(T)) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.next
	m.next++
	m.fs = append(slices.Clip(m.fs), hook[T]{id, f}) // a new array: notify's snapshots stay valid
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.fs = slices.DeleteFunc(slices.Clone(m.fs), func(h hook[T]) bool { return h.id == id })
	}
}

// notify calls every hook with v.
func (m *hooks[T]) notify(v T) {
	m.mu.Lock()
	fs := m.fs // never modified in place: add and remove make new arrays
	m.mu.Unlock()
	for _, h := range fs {
		h.f(v)
	}
}
