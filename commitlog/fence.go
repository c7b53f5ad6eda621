package commitlog

// Fence runs f under the append lock with the offset the next append
// starts at: every record a Stamper has seen lies below it, and none is
// appended while f runs. The broker's store resets a deleted topic's queue
// counters this way (they are only touched by Stampers). f must be short
// and must not append.
func (l *Log) Fence(f func(end int64)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(l.writeOff)
}
