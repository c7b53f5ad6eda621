// Package consumequeue stores RocketMQ consume queues: for one
// (topic, queueId), the ordered list of where that queue's messages live in
// the commit log. The broker's dispatcher appends to it; pulls read it.
// It stores int64 commit-log offsets and knows nothing of the log itself.
//
// # Format
//
// An entry is 20 bytes, big-endian: commit-log physical offset (int64),
// record size (int32), tags code (int64). Queue offset q lives at byte
// q*20 of the queue's logical stream. The stream is cut into files of
// EntriesPerFile entries (default 300,000: 6,000,000 bytes) in Config.Dir,
// each named by the 20-digit zero-padded logical byte offset at which it
// starts. Files are created at full size but sparse (ftruncate) and
// written through a mapping; disk blocks are reserved (fallocate, after
// fsx.CheckRoom) ahead of the entries in steps doubling from 4 KiB to 64
// KiB, so an empty queue takes a page of disk and a full disk fails an
// Append with ENOSPC instead of a write into an unbacked page (SIGBUS). A
// new file is created only when the previous one is full. Files written
// whole by older versions (preallocated) are read and written the same way.
//
// With Config.DeferCreate an empty queue's first entries wait in memory,
// readable, until Materialize (or Flush, Close, or an Append that has a
// file's worth) creates its first file; Materialize creates it under a
// ".creating" name without holding the writer, so Append never waits for
// the file system.
//
// An entry is valid when its offset is >= 0 and its size > 0. A queue that
// starts at a non-zero offset (after retention emptied it) has Java's
// placeholder {0, math.MaxInt32, 0} in every slot of its first file before
// the start; MinOffset is the first slot after them.
//
// # Recovery
//
// Open finds the queue's end from Config.Hint when the files agree with it:
// a clean close's hint is taken as the end once the entry before it is
// valid and the slot at it unused; another hint's entries are trusted and
// those after it scanned. Without a usable hint it scans the last three
// files entry by entry (and any earlier file that is not full-sized). The
// queue ends at the first invalid entry, or where a short file ends; reads
// start at one entry and double, so a short queue reads a few entries.
// After the end only what holds data (SEEK_DATA) is read. Everything after
// the end is zeroed and synced, files
// wholly after it (or behind a missing file) are removed, and a short end
// file is extended to full size. Damage followed by valid entries is not
// an error: consume queues are derived data that the store rebuilds from
// the commit log, so the queue simply ends there (logged at Warn).
//
// The format has no checksum. A torn write of the last entry can leave it
// with its trailing bytes zeroed yet valid (a wrong tags code or size); the
// store checks LastEntry against the commit log, and TruncatePhysical or a
// re-dispatch (ErrConflict) exposes the difference.
//
// # Guarantees
//
//   - An entry is readable once Append returns: MaxOffset is published
//     after the entry's bytes are written.
//   - Append below MaxOffset with the stored entry is a no-op, so
//     re-dispatching after a crash is idempotent.
//   - After Flush returns, every entry below the MaxOffset it saw survives a
//     crash; after a crash the queue is a prefix of what was appended
//     (modulo the torn last entry above).
//
// # Concurrency
//
// One writer at a time calls Append, TruncatePhysical and DeleteBelow (they
// are serialized by a mutex anyway). Any number of goroutines may call Get,
// Read, MinOffset, MaxOffset, LastEntry, OffsetAtTime and Recovery
// concurrently with the writer and with Flush, which may run on its own
// goroutine. Readers take no lock on the append path: they load MaxOffset
// before the file list, and a read lock keeps files mapped while they copy
// entries; only DeleteBelow, TruncatePhysical, the restart of an empty queue
// and Close take it exclusively. The package starts no goroutines;
// Materialize runs on its caller's.
//
// Lock order: cmu (Materialize) → wmu (writer) → fmu (Flush) → rmu
// (mapped memory).
package consumequeue
