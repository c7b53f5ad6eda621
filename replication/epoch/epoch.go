package epoch

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"sync"

	"github.com/gantrymq/gantry/internal/fsx"
)

// Entry records that epoch Epoch's data starts at log offset StartOffset
// (see the package doc, "Meaning of an entry").
type Entry struct {
	Epoch       int32
	StartOffset int64
}

func (e Entry) String() string { return fmt.Sprintf("epoch %d at offset %d", e.Epoch, e.StartOffset) }

// ErrInvalidOffset means a negative log offset was given.
var ErrInvalidOffset = errors.New("epoch: invalid offset")

// checkNext says why e cannot follow list, or returns nil.
func checkNext(list []Entry, e Entry) error {
	switch {
	case e.Epoch < 0:
		return fmt.Errorf("epoch %d is negative", e.Epoch)
	case e.StartOffset < 0:
		return fmt.Errorf("start offset %d is negative", e.StartOffset)
	case len(list) == 0:
		return nil
	}
	last := list[len(list)-1]
	switch {
	case e.Epoch <= last.Epoch:
		return fmt.Errorf("epoch %d is not greater than the previous entry's %d", e.Epoch, last.Epoch)
	case e.StartOffset < last.StartOffset:
		return fmt.Errorf("start offset %d is below the previous entry's %d", e.StartOffset, last.StartOffset)
	}
	return nil
}

// Validate checks a list the way Open checks a file: at most MaxEntries
// entries, epochs strictly increasing, start offsets non-decreasing, both
// non-negative. Check a peer's list with it before LastCommonPoint.
func Validate(entries []Entry) error {
	if len(entries) > MaxEntries {
		return fmt.Errorf("epoch: %d entries, more than MaxEntries (%d): %w", len(entries), MaxEntries, ErrInvalidEntry)
	}
	for i, e := range entries {
		if err := checkNext(entries[:i], e); err != nil {
			return fmt.Errorf("epoch: entry %d (%v): %v: %w", i, e, err, ErrInvalidEntry)
		}
	}
	return nil
}

// File is a replica's epoch file, loaded in memory. Changes are written
// through to disk before they are visible.
type File struct {
	fs   fsx.FS
	path string

	mu      sync.Mutex
	entries []Entry // oldest first; replaced, never modified in place
}

// Open loads the epoch file at path; a nil fsys means fsx.OS. A missing
// file is an empty list (nothing is created until the first change, which
// needs path's directory to exist). A damaged file is refused with a
// *CorruptError (see the package doc); Open never changes the file.
func Open(fsys fsx.FS, path string) (*File, error) {
	if fsys == nil {
		fsys = fsx.OS
	}
	b, err := readFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return &File{fs: fsys, path: path}, nil
	}
	if err != nil {
		return nil, err
	}
	entries, err := decode(b)
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			ce.Path = path
		}
		return nil, err
	}
	return &File{fs: fsys, path: path, entries: entries}, nil
}

// readFile reads path whole after checking its size against MaxFileSize.
func readFile(fsys fsx.FS, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("epoch: open %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("epoch: size of %s: %w", path, err)
	}
	if size > MaxFileSize {
		return nil, &CorruptError{Path: path, Reason: fmt.Sprintf("%d bytes, more than the %d of a file of MaxEntries entries", size, MaxFileSize)}
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("epoch: read %s: %w", path, err)
	}
	return b[:n], nil
}

// Path returns the file's path.
func (f *File) Path() string { return f.path }

// Entries returns a copy of the list, oldest first; nil when it is empty.
func (f *File) Entries() []Entry {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.entries) == 0 {
		return nil
	}
	return slices.Clone(f.entries)
}

// Last returns the newest entry, and false if the list is empty.
func (f *File) Last() (Entry, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.entries) == 0 {
		return Entry{}, false
	}
	return f.entries[len(f.entries)-1], true
}

// EndOf is EndOf(f.Entries(), i, logEnd).
func (f *File) EndOf(i int, logEnd int64) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return EndOf(f.entries, i, logEnd)
}

// Append adds {epoch, start} durably. epoch must be greater than the last
// entry's and start at least the last entry's start (equal when an epoch
// ended with no data); both non-negative. Otherwise it returns an error
// wrapping ErrInvalidEntry, or ErrFull at MaxEntries, and writes nothing.
// When the write fails, the list is unchanged and the file holds the old or
// the new list.
func (f *File) Append(epoch int32, start int64) error {
	e := Entry{Epoch: epoch, StartOffset: start}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkNext(f.entries, e); err != nil {
		return fmt.Errorf("epoch: append %v to %s: %v: %w", e, f.path, err, ErrInvalidEntry)
	}
	if len(f.entries) >= MaxEntries {
		return fmt.Errorf("epoch: append %v to %s: %d entries: %w", e, f.path, len(f.entries), ErrFull)
	}
	next := append(slices.Clip(f.entries), e) // copies: f.entries stays intact if the write fails
	if err := f.write(next); err != nil {
		return err
	}
	f.entries = next
	return nil
}

// TruncateAfter drops, durably, the entries whose data starts at or beyond
// offset, after the log was truncated to offset (see the package doc for
// the order): the log holds none of their data. An entry starting exactly
// at offset goes too, because the record appended there next may belong to
// an older epoch than it, which the list could then not record. It writes
// nothing when nothing is dropped.
func (f *File) TruncateAfter(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("epoch: truncate %s after offset %d: %w", f.path, offset, ErrInvalidOffset)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	i := sort.Search(len(f.entries), func(i int) bool { return f.entries[i].StartOffset >= offset })
	if i == len(f.entries) {
		return nil
	}
	next := slices.Clone(f.entries[:i])
	if err := f.write(next); err != nil {
		return err
	}
	f.entries = next
	return nil
}

func (f *File) write(entries []Entry) error {
	if err := fsx.WriteFileAtomic(f.fs, f.path, encode(entries)); err != nil {
		return fmt.Errorf("epoch: write %s: %w", f.path, err)
	}
	return nil
}

// EndOf returns where entry i's data ends on a log that ends at logEnd:
// the next entry's start, or logEnd for the last entry, and never more
// than logEnd (the result is below the entry's start when the log was
// truncated below it). i must be an index of entries.
func EndOf(entries []Entry, i int, logEnd int64) int64 {
	_ = entries[i]
	if i+1 < len(entries) {
		return min(entries[i+1].StartOffset, logEnd)
	}
	return logEnd
}

// IndexAt returns the index of the entry whose data holds offset: the last
// entry starting at or before it (of several starting at the same offset,
// the others ended with no data). ok is false when offset is negative or
// precedes every entry. A master uses it to label a frame with the epoch
// of its data and to end the frame at EndOf (see the package doc).
func IndexAt(entries []Entry, offset int64) (i int, ok bool) {
	if offset < 0 {
		return 0, false
	}
	i = sort.Search(len(entries), func(i int) bool { return entries[i].StartOffset > offset }) - 1
	return max(i, 0), i >= 0
}

// LastCommonPoint returns the end of the log prefix two replicas share,
// given their epoch lists (valid, as Validate checks) and log ends. It
// compares the lists from newest to oldest; at the first epoch present on
// both with the same start offset, the common point is the smaller of that
// epoch's two ends (EndOf). With no such epoch, or a negative end, ok is
// false: the replica must resync from scratch.
func LastCommonPoint(mine, theirs []Entry, myEnd, theirEnd int64) (offset int64, ok bool) {
	if myEnd < 0 || theirEnd < 0 {
		return 0, false
	}
	for i := len(mine) - 1; i >= 0; i-- {
		j, found := slices.BinarySearchFunc(theirs, mine[i].Epoch, func(e Entry, epoch int32) int { return cmp.Compare(e.Epoch, epoch) })
		if !found || theirs[j].StartOffset != mine[i].StartOffset {
			continue
		}
		return min(EndOf(mine, i, myEnd), EndOf(theirs, j, theirEnd)), true
	}
	return 0, false
}
