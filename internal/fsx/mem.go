package fsx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// MemFS is an in-memory filesystem that models durability, for crash tests.
//
// Each file has a current content (what the page cache holds) and a durable
// content (what survived the last File.Sync or Mapping.Sync). Namespace
// changes (create, rename, remove, mkdir) are durable after SyncDir; until
// then they are kept in order, like a metadata journal. Crash returns the
// filesystem a machine would find after a power cut: the durable state, plus,
// when asked, a prefix of the pending namespace changes and a prefix of each
// file's unsynced bytes (a torn write).
//
// MemFS is safe for concurrent use, except that Crash and Snapshot read the
// memory of live mappings: call them when no goroutine writes to a mapping.
type MemFS struct {
	mu      sync.Mutex
	files   map[string]*inode // current namespace
	dirs    map[string]bool
	dfiles  map[string]*inode // durable namespace
	ddirs   map[string]bool
	pending []nsOp // namespace changes not yet durable, oldest first

	hook  func(op Op, path string)
	usage func(used int64) Usage
}

type inode struct {
	data    []byte // current content; len is the size
	durable []byte // durable content; len is the durable size
	maps    int    // live mappings: the size may not change while > 0
}

type nsOpKind int

const (
	nsCreate nsOpKind = iota
	nsRemove
	nsRename
	nsMkdir
)

type nsOp struct {
	kind     nsOpKind
	from, to string
	ino      *inode
}

// NewMemFS returns an empty in-memory filesystem with a root directory.
func NewMemFS() *MemFS {
	return &MemFS{
		files:  map[string]*inode{},
		dirs:   map[string]bool{"/": true, ".": true},
		dfiles: map[string]*inode{},
		ddirs:  map[string]bool{"/": true, ".": true},
	}
}

// SetHook installs a function called before every operation that changes
// the filesystem (write, truncate, allocate, sync, msync, rename, ...). Tests
// use it to take a Crash at every step. It runs on the caller's goroutine,
// outside MemFS's lock.
func (m *MemFS) SetHook(h func(op Op, path string)) {
	m.mu.Lock()
	m.hook = h
	m.mu.Unlock()
}

// SetUsage replaces the DiskUsage answer; used is the bytes held by files.
func (m *MemFS) SetUsage(f func(used int64) Usage) {
	m.mu.Lock()
	m.usage = f
	m.mu.Unlock()
}

func (m *MemFS) before(op Op, p string) {
	m.mu.Lock()
	h := m.hook
	m.mu.Unlock()
	if h != nil {
		h(op, p)
	}
}

func clean(p string) string { return filepath.Clean(p) }

func notExist(op, p string) error { return &fs.PathError{Op: op, Path: p, Err: fs.ErrNotExist} }

func invalid(op, p string) error { return &fs.PathError{Op: op, Path: p, Err: fs.ErrInvalid} }

// isUnder reports whether p lies strictly inside directory dir (both clean).
func isUnder(p, dir string) bool {
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		if d == dir && p != dir {
			return true
		}
		if next := filepath.Dir(d); next == d {
			return false
		}
	}
}

// OpenFile implements FS.
func (m *MemFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	name = clean(name)
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		m.before(OpOpen, name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.files[name]
	switch {
	case !ok && m.dirs[name]:
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, notExist("open", name)
	case !ok:
		if !m.dirs[filepath.Dir(name)] {
			return nil, notExist("open", name)
		}
		ino = &inode{}
		m.files[name] = ino
		m.pending = append(m.pending, nsOp{kind: nsCreate, to: name, ino: ino})
	}
	if flag&os.O_TRUNC != 0 && len(ino.data) > 0 {
		if ino.maps > 0 {
			return nil, fmt.Errorf("fsx: truncate %s: file is mapped", name)
		}
		ino.data = ino.data[:0]
	}
	return &memFile{fs: m, ino: ino, name: name}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	name = clean(name)
	m.before(OpRemove, name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[name]; ok {
		delete(m.files, name)
		m.pending = append(m.pending, nsOp{kind: nsRemove, from: name})
		return nil
	}
	if m.dirs[name] {
		for p := range m.files {
			if isUnder(p, name) {
				return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
			}
		}
		for d := range m.dirs {
			if isUnder(d, name) {
				return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
			}
		}
		delete(m.dirs, name)
		m.pending = append(m.pending, nsOp{kind: nsRemove, from: name})
		return nil
	}
	return notExist("remove", name)
}

// Rename implements FS.
func (m *MemFS) Rename(oldpath, newpath string) error {
	oldpath, newpath = clean(oldpath), clean(newpath)
	m.before(OpRename, newpath)
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.files[oldpath]
	if !ok {
		return notExist("rename", oldpath)
	}
	if !m.dirs[filepath.Dir(newpath)] {
		return notExist("rename", newpath)
	}
	if m.dirs[newpath] {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EEXIST}
	}
	delete(m.files, oldpath)
	m.files[newpath] = ino
	m.pending = append(m.pending, nsOp{kind: nsRename, from: oldpath, to: newpath, ino: ino})
	return nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(p string, perm fs.FileMode) error {
	p = clean(p)
	m.before(OpMkdir, p)
	m.mu.Lock()
	defer m.mu.Unlock()
	var chain []string
	for d := p; !m.dirs[d]; d = filepath.Dir(d) {
		if _, isFile := m.files[d]; isFile {
			return &fs.PathError{Op: "mkdir", Path: d, Err: syscall.ENOTDIR}
		}
		chain = append(chain, d)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		m.dirs[chain[i]] = true
		m.pending = append(m.pending, nsOp{kind: nsMkdir, to: chain[i]})
	}
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(name string) ([]string, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[name] {
		return nil, notExist("readdir", name)
	}
	var names []string
	for p := range m.files {
		if filepath.Dir(p) == name {
			names = append(names, filepath.Base(p))
		}
	}
	for d := range m.dirs {
		if d != name && filepath.Dir(d) == name {
			names = append(names, filepath.Base(d))
		}
	}
	return sortedNames(names), nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (Info, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if ino, ok := m.files[name]; ok {
		return Info{Size: int64(len(ino.data))}, nil
	}
	if m.dirs[name] {
		return Info{IsDir: true}, nil
	}
	return Info{}, notExist("stat", name)
}

// SyncDir implements FS. Like a journal commit, it makes every pending
// namespace change durable, in order.
func (m *MemFS) SyncDir(name string) error {
	name = clean(name)
	m.before(OpSyncDir, name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[name] {
		return notExist("syncdir", name)
	}
	for _, op := range m.pending {
		applyNS(m.dfiles, m.ddirs, op)
	}
	m.pending = nil
	return nil
}

func applyNS(files map[string]*inode, dirs map[string]bool, op nsOp) {
	switch op.kind {
	case nsCreate:
		files[op.to] = op.ino
	case nsRemove:
		delete(files, op.from)
		delete(dirs, op.from)
	case nsRename:
		delete(files, op.from)
		files[op.to] = op.ino
	case nsMkdir:
		dirs[op.to] = true
	}
}

// DiskUsage implements FS: by default a 1 TiB disk holding only these files.
func (m *MemFS) DiskUsage(string) (Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var used int64
	for _, ino := range m.files {
		used += int64(len(ino.data))
	}
	if m.usage != nil {
		return m.usage(used), nil
	}
	const total = 1 << 40
	return Usage{Total: total, Free: total - used}, nil
}

// Crash returns the filesystem found after a power cut at this moment. With
// a nil r only durable state survives. With r, a random prefix of the
// pending namespace changes survives too, and each file keeps a random
// prefix (possibly none, possibly all) of its unsynced bytes, so that the
// last write may be torn.
func (m *MemFS) Crash(r *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	files := make(map[string]*inode, len(m.dfiles))
	dirs := make(map[string]bool, len(m.ddirs))
	for p, ino := range m.dfiles {
		files[p] = ino
	}
	for d := range m.ddirs {
		dirs[d] = true
	}
	if r != nil && len(m.pending) > 0 {
		for _, op := range m.pending[:r.IntN(len(m.pending)+1)] {
			applyNS(files, dirs, op)
		}
	}
	out := NewMemFS()
	out.dirs, out.ddirs = dirs, make(map[string]bool, len(dirs))
	for d := range dirs {
		out.ddirs[d] = true
	}
	for p, ino := range files {
		b := crashContent(ino, r)
		out.files[p] = &inode{data: b, durable: bytes.Clone(b)}
		out.dfiles[p] = out.files[p]
	}
	return out
}

// crashContent is the durable content of ino plus, with r, a prefix of the
// bytes that differ from it.
func crashContent(ino *inode, r *rand.Rand) []byte {
	b := bytes.Clone(ino.durable)
	if b == nil {
		b = []byte{}
	}
	if r == nil {
		return b
	}
	lo, hi := diffRange(ino.durable, ino.data)
	if lo >= hi {
		return b
	}
	var cut int
	switch r.IntN(3) {
	case 0:
		return b // nothing unsynced survived
	case 1:
		cut = hi // everything survived
	default:
		cut = lo + r.IntN(hi-lo+1)
	}
	if cut > len(b) {
		b = append(b, make([]byte, cut-len(b))...)
	}
	copy(b[lo:cut], ino.data[lo:cut])
	return b
}

// diffRange returns the smallest [lo, hi) outside which cur equals durable,
// comparing cur's length.
func diffRange(durable, cur []byte) (lo, hi int) {
	n := min(len(durable), len(cur))
	lo = 0
	for lo < n && durable[lo] == cur[lo] {
		lo++
	}
	hi = len(cur)
	if len(cur) <= len(durable) {
		for hi > lo && durable[hi-1] == cur[hi-1] {
			hi--
		}
	}
	return lo, hi
}

// Snapshot returns a copy of the current state as if everything were synced:
// what another process would see after a SIGKILL.
func (m *MemFS) Snapshot() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := NewMemFS()
	for d := range m.dirs {
		out.dirs[d], out.ddirs[d] = true, true
	}
	for p, ino := range m.files {
		b := bytes.Clone(ino.data)
		if b == nil {
			b = []byte{}
		}
		out.files[p] = &inode{data: b, durable: bytes.Clone(b)}
		out.dfiles[p] = out.files[p]
	}
	return out
}

// ReadAll returns a copy of a file's current content, for tests.
func (m *MemFS) ReadAll(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.files[clean(name)]
	if !ok {
		return nil, notExist("read", name)
	}
	return bytes.Clone(ino.data), nil
}

// Mutate lets a test change a file's content in place, as disk damage would
// (both the current and durable content change).
func (m *MemFS) Mutate(name string, f func(b []byte) []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.files[clean(name)]
	if !ok {
		return notExist("mutate", name)
	}
	if ino.maps > 0 {
		return fmt.Errorf("fsx: mutate %s: file is mapped", name)
	}
	ino.data = f(ino.data)
	ino.durable = bytes.Clone(ino.data)
	return nil
}

type memFile struct {
	fs   *MemFS
	ino  *inode
	name string
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.ino.data)), nil
}

func (f *memFile) ReadAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(b, f.ino.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// resize sets the current size; it refuses while the file is mapped.
func (f *memFile) resize(size int64) error {
	ino := f.ino
	if int64(len(ino.data)) == size {
		return nil
	}
	if ino.maps > 0 {
		return fmt.Errorf("fsx: resize %s while mapped", f.name)
	}
	if size < int64(len(ino.data)) {
		ino.data = ino.data[:size]
		return nil
	}
	ino.data = append(ino.data, make([]byte, size-int64(len(ino.data)))...)
	return nil
}

func (f *memFile) WriteAt(b []byte, off int64) (int, error) {
	f.fs.before(OpWrite, f.name)
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off < 0 {
		return 0, invalid("write", f.name)
	}
	if end := off + int64(len(b)); end > int64(len(f.ino.data)) {
		if err := f.resize(end); err != nil {
			return 0, err
		}
	}
	return copy(f.ino.data[off:], b), nil
}

var _ DirectWriter = (*memFile)(nil)

// WriteAtDirect implements DirectWriter as WriteAt, after the alignment
// checks of the real thing: MemFS has no page cache to go around, and a
// direct write is no more durable than any other before Sync.
func (f *memFile) WriteAtDirect(b []byte, off int64, _ bool) (int, error) {
	if err := checkDirect("write", f.name, b, off); err != nil {
		return 0, err
	}
	return f.WriteAt(b, off)
}

// ReadAtDirect implements DirectWriter as ReadAt, after the alignment
// checks, and short without io.EOF at the end of the file, as the real
// thing reads.
func (f *memFile) ReadAtDirect(b []byte, off int64) (int, error) {
	if err := checkDirect("read", f.name, b, off); err != nil {
		return 0, err
	}
	n, err := f.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// PrepareDirect implements DirectWriter.
func (f *memFile) PrepareDirect() error { return nil }

func (f *memFile) Truncate(size int64) error {
	f.fs.before(OpTruncate, f.name)
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if size < 0 {
		return invalid("truncate", f.name)
	}
	return f.resize(size)
}

func (f *memFile) Allocate(off, n int64) error {
	f.fs.before(OpAllocate, f.name)
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off < 0 || n <= 0 {
		return invalid("fallocate", f.name)
	}
	if end := off + n; end > int64(len(f.ino.data)) {
		return f.resize(end)
	}
	return nil
}

func (f *memFile) ZeroRange(off, n int64) error {
	f.fs.before(OpZeroRange, f.name)
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off < 0 || n <= 0 {
		return invalid("fallocate(zero range)", f.name)
	}
	end := min(off+n, int64(len(f.ino.data)))
	if off < end {
		clear(f.ino.data[off:end])
	}
	return nil
}

func (f *memFile) Sync() error {
	f.fs.before(OpSync, f.name)
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.ino.durable = bytes.Clone(f.ino.data)
	if f.ino.durable == nil {
		f.ino.durable = []byte{}
	}
	return nil
}

func (f *memFile) Map(size int) (Mapping, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if size <= 0 {
		return nil, invalid("mmap", f.name)
	}
	if size > len(f.ino.data) {
		return nil, fmt.Errorf("fsx: map %d bytes of %s: file is only %d bytes", size, f.name, len(f.ino.data))
	}
	f.ino.maps++
	return &memMapping{f: f, b: f.ino.data[:size:size]}, nil
}

func (f *memFile) Close() error { return nil }

type memMapping struct {
	f *memFile
	b []byte
}

func (m *memMapping) Bytes() []byte { return m.b }

func (m *memMapping) Sync(off, n int) error {
	m.f.fs.before(OpMsync, m.f.name)
	fsys := m.f.fs
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	ino := m.f.ino
	// Exactly [off, off+n), not whole pages as the kernel does: durability
	// of the neighbouring bytes is not promised, and copying them would read
	// memory another goroutine may be writing (a race report, not a bug).
	lo, hi := max(off, 0), min(off+n, len(m.b))
	if lo >= hi {
		return nil
	}
	if len(ino.durable) < hi {
		ino.durable = append(ino.durable, make([]byte, hi-len(ino.durable))...)
	}
	copy(ino.durable[lo:hi], ino.data[lo:hi])
	return nil
}

func (m *memMapping) Populate(int, int) error { return nil }

func (m *memMapping) Sequential(int, int) error { return nil }

func (m *memMapping) Huge(int, int) error { return nil }

func (m *memMapping) Random(int, int) error { return nil }

func (m *memMapping) Drop(int, int) error { return nil }

func (m *memMapping) Unmap() error {
	if m.b == nil {
		return nil
	}
	m.f.fs.mu.Lock()
	m.f.ino.maps--
	m.f.fs.mu.Unlock()
	m.b = nil
	return nil
}
