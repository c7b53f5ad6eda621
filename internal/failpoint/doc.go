// Package failpoint injects faults at named points of the storage code for
// the reliability suite (docs/RELIABILITY.md). A call site reads
//
//	if failpoint.Enabled {
//		if err := failpoint.Inject("commitlog/flush-before-sync"); err != nil {
//			return err
//		}
//	}
//
// Enabled is a constant, false unless the binary is built with the
// failpoint tag (go test -tags failpoint ...): without the tag the compiler
// drops the whole block, so a call site costs nothing in a normal build.
//
// # Arming points
//
// With the tag, the points named in the GANTRY_FAILPOINTS environment
// variable are armed when the process starts (a malformed value makes the
// process exit with status 2: it must not run without the faults it was
// asked for); Enable and Disable change them at run time. The syntax is
//
//	GANTRY_FAILPOINTS="name=term;name=term..."
//	term = [P%][N*]action[(arg)][@K]
//
// where action is one of
//
//	off        nothing
//	error      Inject returns an error wrapping ErrInjected (arg: its text)
//	panic      Inject panics (arg: the panic value)
//	kill       the process sends itself SIGKILL: a crash at exactly this point
//	sleep(D)   Inject sleeps D (a Go duration) and returns nil: a stalled step
//
// and the modifiers say when it fires: @K from the K-th evaluation of the
// point on (the first K-1 pass), N* at most N times, P% with probability P
// percent at each evaluation. "commitlog/flush-before-sync=1*kill@40"
// kills the process at the 40th flush.
//
// # Points
//
// The storage code evaluates these points (see docs/RELIABILITY.md):
//
//	commitlog/append-before-copy   an append holds the append lock, nothing copied yet
//	commitlog/append-after-copy    records copied and stamped, not yet readable or acknowledged
//	commitlog/flush-before-sync    the flusher is about to msync/fdatasync (buffered mode: after the pwrite)
//	commitlog/flush-after-sync     the sync returned; the flushed offset has not moved, no waiter answered
//	commitlog/checkpoint-write     the checkpoint is about to be written
//	fsx/atomic-before-rename       WriteFileAtomic wrote and synced name.tmp, not yet renamed
//	fsx/atomic-before-syncdir      WriteFileAtomic renamed name.tmp, the directory is not yet synced
//	store/delete-topic-fenced      a topic deletion saved its tombstone, its queue files still exist
//	store/delete-topic-files-removed  a topic deletion removed its queue files, the broker's config not yet
//
// The fsx points are the durable steps of every metadata save (topics,
// groups, consumer offsets, delay offsets), of the store's dispatch
// checkpoint and of the recovery report.
//
// Inject, Enable, Disable and Hits are safe for concurrent use.
package failpoint
