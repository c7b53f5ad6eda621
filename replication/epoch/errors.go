package epoch

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt is the kind of every *CorruptError.
	ErrCorrupt = errors.New("epoch: damaged epoch file")
	// ErrInvalidEntry means an entry breaks the list's order (epochs
	// strictly increasing, start offsets non-decreasing) or is negative.
	ErrInvalidEntry = errors.New("epoch: invalid entry")
	// ErrFull means the list already holds MaxEntries entries.
	ErrFull = errors.New("epoch: epoch file full")
)

// CorruptError reports an epoch file that Open refuses (see the package doc,
// "Durability and damage"). It unwraps to ErrCorrupt.
type CorruptError struct {
	Path   string  // the epoch file
	Offset int64   // byte offset of the first problem in the file
	Reason string  // what is wrong there
	Valid  []Entry // the whole, valid entries before Offset, for diagnosis
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("epoch: damaged epoch file %s at byte %d: %s (%d valid entries before it); remove the file to resync this replica from scratch",
		e.Path, e.Offset, e.Reason, len(e.Valid))
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
