package consumequeue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/gantrymq/gantry/internal/fsx"
)

// qfile is one mapped file of the queue: full-sized but sparse, with
// disk blocks reserved (fallocate) ahead of the write position.
type qfile struct {
	base int64 // logical byte offset of byte 0
	path string
	file fsx.File
	m    fsx.Mapping
	b    []byte // m.Bytes(), len == file size
	// reserved: bytes [0, reserved) have disk blocks, so writing them
	// through the mapping cannot fault for space. Writer only (under wmu).
	reserved int

	// fresh: the file's directory entry is not durable yet; settle makes it
	// so before any of its bytes are.
	settleMu sync.Mutex
	fresh    bool
	fsys     fsx.FS
	dir      string
}

// settle makes the file's directory entry durable if it is not yet. Every
// msync of the file's bytes is preceded by it, so a crash never leaves
// durable entries in a file that is gone; the msync itself makes the size
// up to those entries durable (a short last file is extended again by
// recovery). It does not fsync the file: that would also write back the
// mapping's bytes while the dispatcher writes them.
func (f *qfile) settle() error {
	f.settleMu.Lock()
	defer f.settleMu.Unlock()
	if !f.fresh {
		return nil
	}
	if err := f.fsys.SyncDir(f.dir); err != nil {
		return fmt.Errorf("consumequeue: sync dir of %s: %w", f.path, err)
	}
	f.fresh = false
	return nil
}

// sync makes f's bytes [off, off+n) durable, and its creation first.
func (f *qfile) sync(off, n int) error {
	if err := f.settle(); err != nil {
		return err
	}
	if err := f.m.Sync(off, n); err != nil {
		return fmt.Errorf("consumequeue: msync %s: %w", f.path, err)
	}
	return nil
}

func (f *qfile) end() int64 { return f.base + int64(len(f.b)) }

func (f *qfile) close() error {
	var errs []error
	if f.m != nil {
		errs = append(errs, f.m.Unmap())
		f.m, f.b = nil, nil
	}
	if f.file != nil {
		errs = append(errs, f.file.Close())
		f.file = nil
	}
	return errors.Join(errs...)
}

// fileName is the 20-digit zero-padded logical byte offset of the file's start.
func fileName(base int64) string { return fsx.OffsetName(base) }

func parseFileName(name string) (int64, bool) { return fsx.ParseOffsetName(name) }

// Reservation: a file's disk blocks are reserved (fallocate) ahead of the
// write position in steps that double from minReserve to maxReserve, so an
// empty queue takes one page of disk and a busy one makes one fallocate
// per 64 KiB of entries (3,276 entries).
const (
	minReserve = fsx.PageSize
	maxReserve = 64 << 10
)

// mapFile maps f, an existing file of the queue that is already size
// bytes long, with [0, reserved) known to have disk blocks. It takes f.
func mapFile(fsys fsx.FS, dir string, f fsx.File, base int64, size, reserved int) (*qfile, error) {
	path := filepath.Join(dir, fileName(base))
	m, err := f.Map(size)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("consumequeue: map %s: %w", path, err)
	}
	randomAccess(m)
	return &qfile{base: base, path: path, file: f, m: m, b: m.Bytes(), reserved: reserved, fsys: fsys, dir: dir}, nil
}

// createFile creates and maps a new zeroed file of size bytes, sparse
// (ftruncate), with its first page reserved. Making it durable is left to
// the file's first sync (settle), so that the dispatcher creating a
// queue's file does not wait for two fsyncs; a crash before then leaves no
// durable entry in it, and recovery treats a missing or short last file
// as the queue's end.
// The file's name is the offset name with suffix appended.
func createFile(fsys fsx.FS, dir string, base int64, size int, suffix string) (*qfile, error) {
	path := filepath.Join(dir, fileName(base)+suffix)
	first := min(minReserve, size)
	if err := fsx.CheckRoom(fsys, dir, int64(first)); err != nil { // before taking the space
		return nil, fmt.Errorf("consumequeue: create %s: %w", path, err)
	}
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("consumequeue: create %s: %w", path, err)
	}
	fail := func(what string, err error) (*qfile, error) {
		f.Close()
		fsys.Remove(path)
		return nil, fmt.Errorf("consumequeue: %s %s: %w", what, path, err)
	}
	if err := f.Truncate(int64(size)); err != nil {
		return fail("size", err)
	}
	if err := f.Allocate(0, int64(first)); err != nil {
		return fail("allocate", err)
	}
	m, err := f.Map(size)
	if err != nil {
		return fail("map", err)
	}
	randomAccess(m)
	return &qfile{base: base, path: path, file: f, m: m, b: m.Bytes(), reserved: first, fresh: true, fsys: fsys, dir: dir}, nil
}

// reserve makes sure bytes [0, need) of f have disk blocks before they are
// written through the mapping: on a full disk the fallocate fails with
// ENOSPC (and CheckRoom refuses it first, see fsx.CheckRoom), where a
// write to an unbacked page of the mapping would kill the process with
// SIGBUS. The writer calls it (under wmu).
func (f *qfile) reserve(need int) error {
	if need <= f.reserved {
		return nil
	}
	if need > len(f.b) {
		return fmt.Errorf("consumequeue: reserve %d bytes of %s, a %d-byte file", need, f.path, len(f.b)) // broken invariant
	}
	lo := f.reserved
	step := min(max(lo, minReserve), maxReserve)
	hi := min(roundUp(max(need, lo+step), fsx.PageSize), len(f.b))
	if err := fsx.CheckRoom(f.fsys, f.dir, int64(hi-lo)); err != nil {
		return fmt.Errorf("consumequeue: reserve %s: %w", f.path, err)
	}
	if err := f.file.Allocate(int64(lo), int64(hi-lo)); err != nil {
		return fmt.Errorf("consumequeue: reserve %s: %w", f.path, err)
	}
	f.reserved = hi
	return nil
}

// randomAccess makes a page fault of m bring in that page only (madvise
// RANDOM, no huge pages): without it, the first entry written into a new
// sparse file faults in and zeroes a large folio and its read-ahead
// (docs/decisions/0004-consume-queue-creation-off-dispatch.md). Advisory.
func randomAccess(m fsx.Mapping) { _ = m.Random(0, len(m.Bytes())) }

func roundUp(n, unit int) int { return (n + unit - 1) / unit * unit }

// fileList is an immutable, ordered, contiguous list of files; the Queue
// swaps it whole.
type fileList struct {
	files []*qfile
}

// find returns the file holding logical byte pos, or nil.
func (l *fileList) find(pos int64) *qfile {
	fs := l.files
	if len(fs) == 0 || pos < fs[0].base {
		return nil
	}
	i := (pos - fs[0].base) / int64(len(fs[0].b))
	if i >= int64(len(fs)) {
		return nil
	}
	return fs[i]
}

func (l *fileList) last() *qfile {
	if len(l.files) == 0 {
		return nil
	}
	return l.files[len(l.files)-1]
}
