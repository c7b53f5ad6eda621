package consumequeue

import "errors"

var (
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("consumequeue: closed")
	// ErrOffsetTooSmall: the queue offset is below MinOffset (deleted by
	// retention, or before the queue's start).
	ErrOffsetTooSmall = errors.New("consumequeue: offset below min offset")
	// ErrOffsetTooBig: the queue offset is at or beyond MaxOffset (not yet
	// written).
	ErrOffsetTooBig = errors.New("consumequeue: offset beyond max offset")
	// ErrNotContiguous: Append was asked to leave a gap in a non-empty queue.
	ErrNotContiguous = errors.New("consumequeue: append would leave a gap")
	// ErrInvalidEntry: an appended entry has a negative commit-log offset or
	// a non-positive size.
	ErrInvalidEntry = errors.New("consumequeue: invalid entry")
	// ErrConflict: Append at an already written queue offset with an entry
	// different from the stored one.
	ErrConflict = errors.New("consumequeue: entry differs from the stored one")
)
