package fsx

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/gantrymq/gantry/internal/failpoint"
)

// FS is the set of filesystem operations the store uses. Paths are OS paths.
type FS interface {
	// OpenFile opens or creates a file, like os.OpenFile.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename renames a file, replacing the target, like os.Rename.
	Rename(oldpath, newpath string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(path string, perm fs.FileMode) error
	// ReadDir lists the names in a directory, sorted.
	ReadDir(name string) ([]string, error)
	// Stat returns a file's size and whether it is a directory.
	Stat(name string) (Info, error)
	// SyncDir makes the directory's entries (creations, renames, removals) durable.
	SyncDir(name string) error
	// DiskUsage reports the size and free space of the filesystem holding path.
	DiskUsage(path string) (Usage, error)
}

// File is an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Name returns the path the file was opened with.
	Name() string
	// Size returns the current size in bytes.
	Size() (int64, error)
	// Truncate changes the size.
	Truncate(size int64) error
	// Allocate reserves disk blocks for [off, off+n), extending the size if
	// needed (fallocate mode 0). On a full disk it fails with ENOSPC, which is
	// why segments are allocated before they are mapped.
	Allocate(off, n int64) error
	// ZeroRange makes [off, off+n) read as zeros without changing the size
	// and keeps the blocks allocated.
	ZeroRange(off, n int64) error
	// Sync makes the file's data and size durable (fdatasync).
	Sync() error
	// Map maps the first size bytes of the file shared and writable. The file
	// must already be at least size bytes long.
	Map(size int) (Mapping, error)
	// Close closes the file. Mappings stay valid until unmapped.
	Close() error
}

// Mapping is a shared, writable memory mapping of a file.
type Mapping interface {
	// Bytes returns the mapped memory. Writes to it reach the file's page cache.
	Bytes() []byte
	// Sync makes [off, off+n) of the mapping durable (msync MS_SYNC). The OS
	// widens the range to whole pages; callers may rely only on the range.
	Sync(off, n int) error
	// Populate pre-faults [off, off+n) writable so later writes take no page
	// faults. It is advisory: implementations may do nothing.
	Populate(off, n int) error
	// Sequential marks [off, off+n) as read once in order (madvise
	// SEQUENTIAL: larger read-ahead), for recovery scans. Advisory.
	Sequential(off, n int) error
	// Huge asks for transparent huge pages for [off, off+n) (madvise
	// HUGEPAGE; ext4 and XFS give files large folios on recent kernels): a
	// fault then brings in a 2 MiB folio mapped by one page table entry
	// instead of 512 of 4 KiB, with fewer entries to set, to flush from the
	// TLB and to miss in it
	// (docs/decisions/0017-huge-pages-for-bulk-written-mappings.md). For
	// files written and read in bulk: a cold fault reads 2-4 MiB from
	// disk, and a write after a flush dirties (and has the kernel write
	// back) the whole folio, so not for small files or ones read at random.
	// Advisory: a kernel without them ignores it.
	Huge(off, n int) error
	// Random marks [off, off+n) as accessed at random (madvise RANDOM): a
	// page fault brings in that page only, with no read-ahead around or
	// after it, for a mapping that only writes. Advisory.
	Random(off, n int) error
	// Drop removes the mapping's page table entries for the pages [off,
	// off+n) covers (madvise DONTNEED): the file's pages, and what was
	// written to them, stay in the page cache, and a later access maps them
	// in again. For a mapping done with a range, so that the process's RSS
	// counts no page twice. Advisory.
	Drop(off, n int) error
	// Unmap releases the mapping. Bytes must not be used afterwards.
	Unmap() error
}

// Info describes a file.
type Info struct {
	Size  int64
	IsDir bool
}

// Usage describes a filesystem's space, in bytes, as an unprivileged
// process sees it (df's Use%): blocks reserved for root count in neither.
type Usage struct {
	Total int64 // used plus Free
	Free  int64 // available to unprivileged users
}

// UsedRatio returns the used fraction of the filesystem, 0..1.
func (u Usage) UsedRatio() float64 {
	if u.Total <= 0 {
		return 0
	}
	return float64(u.Total-u.Free) / float64(u.Total)
}

// PageSize is the unit Mapping.Sync rounds to.
const PageSize = 4096

// ReadFile reads a whole file.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// WriteFileAtomic replaces name with data durably: it writes name.tmp,
// syncs it, renames it over name and syncs the directory. A crash at any
// point leaves either the old or the new content under name.
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	return WriteFileAtomicPerm(fsys, name, data, 0o644)
}

// WriteFileAtomicPerm is WriteFileAtomic creating the file with perm (0o600
// for a file holding secrets).
func WriteFileAtomicPerm(fsys FS, name string, data []byte, perm fs.FileMode) error {
	tmp := name + ".tmp"
	if perm&0o077 == 0 {
		_ = fsys.Remove(tmp) // a leftover would keep its wider mode
	}
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return fmt.Errorf("fsx: create %s: %w", tmp, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return fmt.Errorf("fsx: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsx: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("fsx: close %s: %w", tmp, err)
	}
	if failpoint.Enabled {
		if err := failpoint.Inject("fsx/atomic-before-rename"); err != nil {
			return fmt.Errorf("fsx: rename %s: %w", tmp, err)
		}
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return fmt.Errorf("fsx: rename %s: %w", tmp, err)
	}
	if failpoint.Enabled {
		if err := failpoint.Inject("fsx/atomic-before-syncdir"); err != nil {
			return fmt.Errorf("fsx: sync dir of %s: %w", name, err)
		}
	}
	if err := fsys.SyncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("fsx: sync dir of %s: %w", name, err)
	}
	return nil
}

// Exists reports whether name exists.
func Exists(fsys FS, name string) bool {
	_, err := fsys.Stat(name)
	return err == nil
}

func sortedNames(names []string) []string {
	sort.Strings(names)
	return names
}

// CheckRoom returns an error wrapping syscall.ENOSPC when the filesystem
// holding dir has fewer than n bytes free, and nil otherwise (also when it
// cannot tell). Call it before preallocating a large file: on tmpfs (and
// some other filesystems) a fallocate that fails for space first takes
// every free byte, and other writers see a full disk until the file is
// removed.
func CheckRoom(fsys FS, dir string, n int64) error {
	u, err := fsys.DiskUsage(dir)
	if err != nil || u.Total <= 0 || u.Free >= n {
		return nil
	}
	return fmt.Errorf("%d bytes needed in %s, %d free: %w", n, dir, u.Free, syscall.ENOSPC)
}
