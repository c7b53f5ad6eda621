package store

// HoldDispatch stops the dispatcher between records until the returned
// func is called, so tests can crash the store with undispatched records.
func (s *Store) HoldDispatch() (release func()) {
	s.dispatchMu.Lock()
	return s.dispatchMu.Unlock
}

// Trim runs the flush loop's retention step now.
func (s *Store) Trim() error { return s.trim() }

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
