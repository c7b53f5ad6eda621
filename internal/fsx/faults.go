package fsx

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
)

// Op names a filesystem operation, for fault injection and hooks.
type Op string

// The operations that can be failed or observed.
const (
	OpOpen      Op = "open"
	OpRead      Op = "read"
	OpWrite     Op = "write"
	OpTruncate  Op = "truncate"
	OpAllocate  Op = "allocate"
	OpZeroRange Op = "zerorange"
	OpSync      Op = "sync"  // File.Sync (fdatasync)
	OpMsync     Op = "msync" // Mapping.Sync
	OpMap       Op = "map"
	OpPopulate  Op = "populate"
	OpSyncDir   Op = "syncdir"
	OpRename    Op = "rename"
	OpRemove    Op = "remove"
	OpMkdir     Op = "mkdir"
	OpUsage     Op = "usage"
)

// Fault makes matching operations fail.
type Fault struct {
	Op    Op     // the operation to fail
	Path  string // fail only paths containing this; "" matches every path
	Err   error  // the error to return, e.g. syscall.EIO or syscall.ENOSPC
	After int    // let this many matching calls succeed first
	Times int    // fail this many calls, then stop; 0 fails forever
}

// Faults is a set of injected faults, safe for concurrent use. The zero
// value injects nothing.
type Faults struct {
	mu    sync.Mutex
	rules []*faultRule
}

type faultRule struct {
	Fault
	seen, failed int
}

// Add injects f and returns a function that removes it.
func (fl *Faults) Add(f Fault) (remove func()) {
	r := &faultRule{Fault: f}
	fl.mu.Lock()
	fl.rules = append(fl.rules, r)
	fl.mu.Unlock()
	return func() {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		for i, x := range fl.rules {
			if x == r {
				fl.rules = append(fl.rules[:i], fl.rules[i+1:]...)
				return
			}
		}
	}
}

// Clear removes every fault.
func (fl *Faults) Clear() {
	fl.mu.Lock()
	fl.rules = nil
	fl.mu.Unlock()
}

// Check returns the injected error for op on path, or nil.
func (fl *Faults) Check(op Op, path string) error {
	if fl == nil {
		return nil
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, r := range fl.rules {
		if r.Op != op || (r.Path != "" && !strings.Contains(path, r.Path)) {
			continue
		}
		r.seen++
		if r.seen <= r.After || (r.Times > 0 && r.failed >= r.Times) {
			continue
		}
		r.failed++
		return &fs.PathError{Op: string(op), Path: path, Err: r.Err}
	}
	return nil
}

// WithFaults wraps fsys so that every operation first consults faults.
func WithFaults(fsys FS, faults *Faults) FS {
	return &faultFS{inner: fsys, faults: faults}
}

type faultFS struct {
	inner  FS
	faults *Faults
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if err := f.faults.Check(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, faults: f.faults}, nil
}

func (f *faultFS) Remove(name string) error {
	if err := f.faults.Check(OpRemove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

func (f *faultFS) Rename(oldpath, newpath string) error {
	if err := f.faults.Check(OpRename, newpath); err != nil {
		return err
	}
	return f.inner.Rename(oldpath, newpath)
}

func (f *faultFS) MkdirAll(p string, perm fs.FileMode) error {
	if err := f.faults.Check(OpMkdir, p); err != nil {
		return err
	}
	return f.inner.MkdirAll(p, perm)
}

func (f *faultFS) ReadDir(name string) ([]string, error) { return f.inner.ReadDir(name) }
func (f *faultFS) Stat(name string) (Info, error)        { return f.inner.Stat(name) }

func (f *faultFS) SyncDir(name string) error {
	if err := f.faults.Check(OpSyncDir, name); err != nil {
		return err
	}
	return f.inner.SyncDir(name)
}

func (f *faultFS) DiskUsage(path string) (Usage, error) {
	if err := f.faults.Check(OpUsage, path); err != nil {
		return Usage{}, err
	}
	return f.inner.DiskUsage(path)
}

type faultFile struct {
	File
	faults *Faults
}

func (f *faultFile) ReadAt(b []byte, off int64) (int, error) {
	if err := f.faults.Check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.File.ReadAt(b, off)
}

func (f *faultFile) WriteAt(b []byte, off int64) (int, error) {
	if err := f.faults.Check(OpWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.File.WriteAt(b, off)
}

// WriteAtDirect is the wrapped file's (DirectWriter), failing as WriteAt
// does; unsupported where the wrapped file has none.
func (f *faultFile) WriteAtDirect(b []byte, off int64, inline bool) (int, error) {
	d, ok := f.File.(DirectWriter)
	if !ok {
		return 0, fmt.Errorf("fsx: %s: direct writes: %w", f.Name(), errors.ErrUnsupported)
	}
	if err := f.faults.Check(OpWrite, f.Name()); err != nil {
		return 0, err
	}
	return d.WriteAtDirect(b, off, inline)
}

// ReadAtDirect is the wrapped file's (DirectWriter), failing as ReadAt
// does; unsupported where the wrapped file has none.
func (f *faultFile) ReadAtDirect(b []byte, off int64) (int, error) {
	d, ok := f.File.(DirectWriter)
	if !ok {
		return 0, fmt.Errorf("fsx: %s: direct reads: %w", f.Name(), errors.ErrUnsupported)
	}
	if err := f.faults.Check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return d.ReadAtDirect(b, off)
}

// PrepareDirect is the wrapped file's (DirectWriter).
func (f *faultFile) PrepareDirect() error {
	d, ok := f.File.(DirectWriter)
	if !ok {
		return fmt.Errorf("fsx: %s: direct writes: %w", f.Name(), errors.ErrUnsupported)
	}
	return d.PrepareDirect()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.faults.Check(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Allocate(off, n int64) error {
	if err := f.faults.Check(OpAllocate, f.Name()); err != nil {
		return err
	}
	return f.File.Allocate(off, n)
}

func (f *faultFile) ZeroRange(off, n int64) error {
	if err := f.faults.Check(OpZeroRange, f.Name()); err != nil {
		return err
	}
	return f.File.ZeroRange(off, n)
}

func (f *faultFile) Sync() error {
	if err := f.faults.Check(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Map(size int) (Mapping, error) {
	if err := f.faults.Check(OpMap, f.Name()); err != nil {
		return nil, err
	}
	m, err := f.File.Map(size)
	if err != nil {
		return nil, err
	}
	return &faultMapping{Mapping: m, faults: f.faults, name: f.Name()}, nil
}

type faultMapping struct {
	Mapping
	faults *Faults
	name   string
}

func (m *faultMapping) Sync(off, n int) error {
	if err := m.faults.Check(OpMsync, m.name); err != nil {
		return err
	}
	return m.Mapping.Sync(off, n)
}

func (m *faultMapping) Populate(off, n int) error {
	if err := m.faults.Check(OpPopulate, m.name); err != nil {
		return err
	}
	return m.Mapping.Populate(off, n)
}
