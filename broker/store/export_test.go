package store

import "github.com/gantrymq/gantry/internal/fsx"

// HoldDispatch stops the dispatcher between records until the returned
// func is called, so tests can crash the store with undispatched records.
func (s *Store) HoldDispatch() (release func()) {
	s.dispatchMu.Lock()
	return s.dispatchMu.Unlock
}

// Trim runs the flush loop's retention step now.
func (s *Store) Trim() error { return s.trim() }

// SetDeleteStep makes every durable step of a topic deletion call f (an
// error stops the deletion there) until restore is called.
func SetDeleteStep(f func(step string) error) (restore func()) {
	deleteStep = f
	return func() { deleteStep = nil }
}

// RemoveTree removes dir and everything under it.
func RemoveTree(fsys fsx.FS, dir string) error { return removeTree(fsys, dir) }

// ForgetDeleted runs the flush loop's step that forgets tombstones
// retention has passed.
func (s *Store) ForgetDeleted() { s.forgetDeleted() }

// DeferredQueues counts the queues whose first file is not created yet.
func (s *Store) DeferredQueues() int {
	s.qmu.RLock()
	defer s.qmu.RUnlock()
	n := 0
	for _, q := range s.queues {
		if q.Deferred() {
			n++
		}
	}
	return n
}

// TrustedQueues counts the queues Open took from a clean checkpoint
// without scanning them.
func (s *Store) TrustedQueues() int {
	s.qmu.RLock()
	defer s.qmu.RUnlock()
	n := 0
	for _, q := range s.queues {
		if q.RecoveryScan().Trusted {
			n++
		}
	}
	return n
}
