package commitlog

// Abandon simulates the death of the process: the loops stop, nothing is
// flushed, the abort marker stays, the files are released.
func (l *Log) Abandon() {
	l.closeOnce.Do(func() {
		l.stopLoops()
		l.failWaiters(ErrClosed)
		l.closeSegments()
		l.closeErr = ErrClosed
	})
}

// CheckpointNow writes the checkpoint.
func (l *Log) CheckpointNow() error { return l.writeCheckpoint() }

// SettleAlloc waits until the background segment allocation, if any, is done.
func (l *Log) SettleAlloc() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.allocPending {
		r := <-l.allocRes
		l.allocRes <- r
	}
}
