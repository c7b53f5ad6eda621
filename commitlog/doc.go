// Package commitlog is Gantry's append-only commit log: every message of
// every topic, in arrival order, as RocketMQ's V1 MessageExt records.
//
// # Format
//
// The log is a sequence of segment files in Config.Dir, each exactly
// SegmentBytes long (mappedFileSizeCommitLog, default 1 GiB) and named by the
// 20-digit zero-padded log offset of its first byte (00000000000000000000,
// 00000000001073741824, ...). A record's log (physical) offset is its
// segment's start plus its position in the file. Records are the message
// package's encoding, each carrying a __CRC32# property over all its bytes.
// A record never spans segments: when the next append does not fit, an
// 8-byte filler [remaining int32][message.MagicBlank] ends the segment. A
// range damaged on disk and skipped at recovery (Config.SkipCorrupt) starts
// with [size int32]["HOLE"]; readers step over it.
//
// Segments are preallocated with fallocate before they are mapped, so a full
// disk answers ENOSPC instead of killing the process with SIGBUS. The next
// segment is created, allocated and pre-faulted by a background goroutine so
// a roll never waits for it.
//
// StateDir (default Dir) holds: abort, present while the log is open (found
// at start, the last exit was a crash); commitlog.checkpoint, a lower bound
// of the durable end, written every CheckpointInterval and at Close;
// recovery-report.json, what the last Open found; corrupt/, copies of
// skipped damaged ranges; truncations.log, one JSON line per Truncate that
// cut anything (what it cut: bytes, records, first and last offsets and
// store timestamps).
//
// # Guarantees
//
//   - Append returns only after its records are readable and in the segment
//     files, where a crash of the process cannot take them back (under
//     AsyncFlush with writeBuffered, the default, the appender writes them
//     there itself: Log.writeThrough; writeMapped copies them into the
//     file's shared mapping). Under SyncFlush it
//     returns nil only after they are durable (group commit: one msync or
//     fdatasync covers every waiting appender); after SyncFlushTimeout it
//     returns ErrFlushTimeout with the records stored but not known durable.
//   - FlushedOffset only grows and covers only data that a sync made durable.
//     A failed msync/fdatasync/write is final: the log refuses further
//     appends (ErrFlushFailed) and never reports that range as flushed.
//   - Open after a crash keeps every record below the durable end. An
//     invalid record with nothing valid after it, or at or beyond the
//     checkpointed durable end, is a torn write: the log ends there (a power
//     cut may persist later unsynced pages and lose earlier ones; such later
//     records were never acknowledged as durable and are dropped with it).
//     Damaged bytes below the durable end followed by valid records are
//     corruption: Open fails with a *CorruptError naming the segment file
//     and offset, unless SkipCorrupt is set. Nothing is dropped silently:
//     recovery-report.json and the log say what was truncated and why.
//   - Above DiskFullRatio, or when no new segment can be allocated, appends
//     fail with ErrDiskFull before anything is written.
//   - Retention never deletes a segment holding an offset at or above
//     DeleteFloor, whatever the disk use: the store keeps every record its
//     dispatcher has not passed.
//   - A replica's log (replica.go, docs/REPLICATION.md) holds the master's
//     bytes at the master's offsets: CopyReplica reads whole entries as they
//     lie in the segments, AppendReplica writes them only at the log's end,
//     checked as recovery checks them, and not re-stamped. Both logs need
//     the same SegmentBytes; a log that takes replica appends takes no
//     others.
//   - Truncate (truncate.go), run on a closed log, removes everything at
//     and after an entry's offset and records the cut in truncations.log
//     before it makes it; a crash during it leaves a log that Open
//     recovers to the old end or to that offset. A replica that rejoins a
//     new master cuts the tail it does not share with it this way.
//
// # Concurrency
//
// Append, AppendReplica, Read, ReadRecord, CopyReplica, Flush, Clean, the
// offset accessors and Stats are safe for concurrent use. Appends are serialized by the append lock, which
// also assigns offsets, so a Stamper sees records in log order. A Region
// returned by Read stays valid, even if retention deletes its segment, until
// it is Released. Close must not run concurrently with other calls' use of
// the Log; it waits for the background goroutines.
//
// Lock order: flushMu, writeMu, cleanMu, then mu (the append lock), then
// wmu.
package commitlog
