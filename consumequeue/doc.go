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
// starts. Files are preallocated, made durable at full size, then mapped and
// written through the mapping; a new file is created only when the previous
// one is full.
//
// An entry is valid when its offset is >= 0 and its size > 0. A queue that
// starts at a non-zero offset (after retention emptied it) has Java's
// placeholder {0, math.MaxInt32, 0} in every slot of its first file before
// the start; MinOffset is the first slot after them.
//
// # Recovery
//
// Open scans the last three files entry by entry (and any earlier file that
// is not full-sized); the queue ends at the first invalid entry, or where a
// short file ends. Everything after the end is zeroed and synced, files
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
// and Close take it exclusively. The package starts no goroutines.
//
// Lock order: wmu (writer) → fmu (Flush) → rmu (mapped memory).
package consumequeue
