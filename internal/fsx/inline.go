package fsx

// InlineFile is a File whose writes and syncs can run inline: the system
// call is made without telling the Go scheduler (syscall.RawSyscall), so the
// calling goroutine keeps its processor (P) for the call's length, as it
// would for a long memmove, instead of the runtime's monitor thread (sysmon)
// taking the P away and handing it to another thread once the call has
// lasted 20 µs. Each such hand-off also sets the monitor polling every
// 20 µs again for the next millisecond or more (golang/go#18236): on a
// virtual machine, where a thread's sleep and wake-up are costly, a
// sync-flush commit log's pwrite and fdatasync kept it awake
// (docs/decisions/0007-inline-system-calls.md).
//
// The price: while the call runs, its P runs nothing else, and a
// stop-the-world phase of the garbage collector waits for it. The caller
// uses it only with another P to spare and only while calls stay short
// (commitlog: GOMAXPROCS >= 2, and a pause after a call over 50 ms).
type InlineFile interface {
	// WriteAtInline is WriteAt made inline.
	WriteAtInline(b []byte, off int64) (int, error)
	// SyncInline is Sync (fdatasync) made inline.
	SyncInline() error
}
