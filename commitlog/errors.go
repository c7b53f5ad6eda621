package commitlog

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by calls on a closed Log.
	ErrClosed = errors.New("commitlog: closed")
	// ErrCorrupt is the kind of every *CorruptError.
	ErrCorrupt = errors.New("commitlog: corrupt record")
	// ErrFlushFailed means a flush (msync/fdatasync/write) failed. It is
	// final: the Log refuses every later append, and the range it was
	// flushing is never reported as flushed.
	ErrFlushFailed = errors.New("commitlog: flush failed; the log refuses writes until it is reopened")
	// ErrFlushTimeout means a SyncFlush append's data was stored but its
	// flush did not complete within SyncFlushTimeout (RocketMQ
	// FLUSH_DISK_TIMEOUT): the outcome is indeterminate.
	ErrFlushTimeout = errors.New("commitlog: flush timed out; the records are stored but not known to be durable")
	// ErrDiskFull means the append was refused before anything was written:
	// the disk is above DiskFullRatio, or a new segment could not be
	// allocated. It clears when space returns.
	ErrDiskFull = errors.New("commitlog: disk full")
	// ErrInvalidBatch means an append's bytes are not well-formed records.
	ErrInvalidBatch = errors.New("commitlog: invalid batch")
	// ErrRecordTooLarge means a record cannot fit in one segment.
	ErrRecordTooLarge = errors.New("commitlog: record larger than a segment")
	// ErrOffsetTooSmall means the offset is below the log's first record
	// (deleted by retention).
	ErrOffsetTooSmall = errors.New("commitlog: offset below the first record")
	// ErrOffsetTooBig means the offset is at or beyond the readable end.
	ErrOffsetTooBig = errors.New("commitlog: offset beyond the end")
	// ErrBadOffset means no record starts at the offset.
	ErrBadOffset = errors.New("commitlog: no record at offset")
)

// CorruptError reports a damaged record followed by valid data, found by
// recovery. It unwraps to ErrCorrupt.
type CorruptError struct {
	Segment   string // path of the segment file
	Offset    int64  // global log offset of the damaged record
	FileOff   int64  // position of the damage inside Segment
	NextValid int64  // global offset of the next valid record
	Reason    string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("commitlog: corrupt record in %s at file offset %d (log offset %d): %s; valid records follow at log offset %d (SkipCorrupt keeps them and skips the damaged range)",
		e.Segment, e.FileOff, e.Offset, e.Reason, e.NextValid)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
