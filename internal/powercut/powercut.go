//go:build linux

// Package powercut simulates a power cut under a real process: a FUSE
// file system that passes every operation through to a backing directory
// and remembers, for every file, what its data was when it was last
// synced. PowerCut then unmounts it and reverts every file to that state,
// as a machine losing power would find its disk: data written (by
// write(2) or through a shared mapping) but not yet fsynced, fdatasynced
// or msynced is lost; synced data survives.
//
// Namespace and size operations (create, mkdir, rename, unlink, truncate,
// fallocate) are treated as durable at once, as a journaling file system
// commits them within seconds; the process under test syncs its
// directories anyway where it depends on them. So the simulation is as
// strict as a real disk for file data and looser for metadata.
//
// It is a test tool: mounting needs root (or CAP_SYS_ADMIN) and /dev/fuse.
// The process serving the file system must not map its files itself (a
// thread blocked in a page fault the server has to answer cannot stop for
// the garbage collector, which stops the server): run what uses the
// mappings, such as a broker, as another process. Reading and writing
// with system calls is safe.
package powercut

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

const pageSize = 4096

// FS is a mounted power-cut file system.
type FS struct {
	backing, mountpoint string

	mu      sync.Mutex
	server  *fuse.Server
	cut     bool             // PowerCut in progress: writes are dropped
	pending map[uint64]*undo // backing inode -> what reverts it to its last sync
	stats   Stats            // since the last PowerCut
	totals  Stats            // since Mount
}

// undo reverts one file to its state at its last sync.
type undo struct {
	fd    int              // a dup of a descriptor of the file, for writing back
	size  int64            // the file's size at its last sync (or size change)
	pages map[int64][]byte // page index -> content at the last sync
}

// Stats counts what power cuts reverted.
type Stats struct {
	Cuts         int   // power cuts
	Files        int   // files that had unsynced data
	PagesLost    int   // pages reverted to their synced content
	BytesDropped int64 // bytes cut off the end of files grown by unsynced writes
}

// Mount serves backing at mountpoint (both must exist).
func Mount(backing, mountpoint string) (*FS, error) {
	f := &FS{backing: backing, mountpoint: mountpoint, pending: map[uint64]*undo{}}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FS) mount() error {
	var st syscall.Stat_t
	if err := syscall.Stat(f.backing, &st); err != nil {
		return fmt.Errorf("powercut: %w", &os.PathError{Op: "stat", Path: f.backing, Err: err})
	}
	r := &fs.LoopbackRoot{Path: f.backing, Dev: st.Dev}
	r.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, fsys: f}
	}
	r.RootNode = r.NewNode(r, nil, "", &st)
	server, err := fs.Mount(f.mountpoint, r.RootNode, &fs.Options{MountOptions: fuse.MountOptions{
		DirectMountStrict: true,
		FsName:            "gantry-powercut",
		Name:              "powercut",
	}})
	if err != nil {
		return fmt.Errorf("powercut: mount %s: %w", f.mountpoint, err)
	}
	f.mu.Lock()
	f.server, f.cut = server, false
	f.mu.Unlock()
	return nil
}

// PowerCut unmounts the file system (every process using it must be
// gone: kill it first), reverts every file's unsynced data, and mounts it
// again. It returns what this cut reverted.
func (f *FS) PowerCut() (Stats, error) {
	f.mu.Lock()
	f.cut = true // writeback of dirty pages during the unmount is lost
	server := f.server
	f.mu.Unlock()
	if err := unmount(server); err != nil {
		return Stats{}, err
	}
	f.mu.Lock()
	s, err := f.revertLocked()
	f.mu.Unlock()
	if err != nil {
		return s, err
	}
	return s, f.mount()
}

func unmount(server *fuse.Server) error {
	if err := server.Unmount(); err != nil {
		return fmt.Errorf("powercut: unmount: %w", err)
	}
	server.Wait()
	return nil
}

// revertLocked writes every pending file back to its synced state.
func (f *FS) revertLocked() (Stats, error) {
	s := Stats{Cuts: 1}
	var errs []error
	for ino, u := range f.pending {
		s.Files++
		for p, img := range u.pages {
			off := p * pageSize
			if off >= u.size {
				continue
			}
			img = img[:min(int64(len(img)), u.size-off)]
			if _, err := unix.Pwrite(u.fd, img, off); err != nil {
				errs = append(errs, fmt.Errorf("powercut: revert inode %d at %d: %w", ino, off, err))
			}
			s.PagesLost++
		}
		var st unix.Stat_t
		if err := unix.Fstat(u.fd, &st); err == nil && st.Size > u.size {
			s.BytesDropped += st.Size - u.size
			if err := unix.Ftruncate(u.fd, u.size); err != nil {
				errs = append(errs, fmt.Errorf("powercut: truncate inode %d: %w", ino, err))
			}
		}
		_ = unix.Close(u.fd)
		delete(f.pending, ino)
	}
	f.totals.Cuts += s.Cuts
	f.totals.Files += s.Files
	f.totals.PagesLost += s.PagesLost
	f.totals.BytesDropped += s.BytesDropped
	return s, errors.Join(errs...)
}

// Totals returns what every power cut so far reverted.
func (f *FS) Totals() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.totals
}

// Unmount unmounts the file system, keeping whatever was written (a clean
// shutdown, not a power cut).
func (f *FS) Unmount() error {
	f.mu.Lock()
	server := f.server
	f.mu.Unlock()
	err := unmount(server)
	f.mu.Lock()
	for ino, u := range f.pending {
		_ = unix.Close(u.fd)
		delete(f.pending, ino)
	}
	f.mu.Unlock()
	return err
}

// beforeWrite records the content of the pages [off, off+n) of the file
// open as fd before a write changes them, unless already recorded since
// its last sync. It reports false while a power cut drops writes.
func (f *FS) beforeWrite(fd int, off, n int64) (bool, syscall.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut {
		return false, 0
	}
	u, errno := f.undoLocked(fd)
	if errno != 0 {
		return false, errno
	}
	for p := off / pageSize; p*pageSize < off+n; p++ {
		if _, ok := u.pages[p]; ok {
			continue
		}
		img := make([]byte, pageSize)
		if p*pageSize < u.size {
			if _, err := unix.Pread(fd, img, p*pageSize); err != nil {
				return false, fs.ToErrno(err)
			}
		}
		u.pages[p] = img
	}
	return true, 0
}

// undoLocked returns the file's undo record, starting one (at the file's
// current, synced state) if it has none.
func (f *FS) undoLocked(fd int) (*undo, syscall.Errno) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fs.ToErrno(err)
	}
	if u, ok := f.pending[st.Ino]; ok {
		return u, 0
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	u := &undo{fd: dup, size: st.Size, pages: map[int64][]byte{}}
	f.pending[st.Ino] = u
	return u, 0
}

// detach takes the file's undo record out before a sync: writes that
// arrive while the sync runs start a new one (whose pages are read after
// the detach, so they hold what the sync makes durable). It reports false
// while a power cut drops syncs.
func (f *FS) detach(ino uint64) (*undo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cut {
		return nil, false
	}
	u := f.pending[ino]
	delete(f.pending, ino)
	return u, true
}

// reattach puts back an undo record detached for a sync that failed:
// nothing it covered became durable. Its pages are older than those of a
// record started meanwhile, so they win.
func (f *FS) reattach(ino uint64, u *undo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.pending[ino]
	if !ok {
		f.pending[ino] = u
		return
	}
	for p, img := range u.pages {
		cur.pages[p] = img
	}
	cur.size = u.size
	_ = unix.Close(u.fd)
}

// resized records a durable size change (truncate, fallocate) of the file
// of inode ino: its synced size becomes its current size, and what it
// cut off is forgotten.
func (f *FS) resized(ino uint64, size int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.pending[ino]
	if !ok {
		return
	}
	u.size = size
	for p := range u.pages {
		if p*pageSize >= size {
			delete(u.pages, p)
		}
	}
}

// zeroed records that [off, off+n) was zeroed durably (fallocate with
// FALLOC_FL_ZERO_RANGE or FALLOC_FL_PUNCH_HOLE): its synced content is
// zeros now.
func (f *FS) zeroed(ino uint64, off, n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.pending[ino]
	if !ok {
		return
	}
	for p, img := range u.pages {
		lo, hi := max(off, p*pageSize), min(off+n, (p+1)*pageSize)
		if lo < hi {
			clear(img[lo-p*pageSize : hi-p*pageSize])
		}
	}
}

// node is a loopback node whose files are tracked.
type node struct {
	fs.LoopbackNode
	fsys *FS
}

var (
	_ fs.NodeOpener    = (*node)(nil)
	_ fs.NodeCreater   = (*node)(nil)
	_ fs.NodeSetattrer = (*node)(nil)
)

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return n.fsys.wrap(fh), fl, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return in, n.fsys.wrap(fh), fl, 0
}

// Setattr covers a truncate by path (one through a descriptor reaches
// file.Setattr).
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	errno := n.LoopbackNode.Setattr(ctx, fh, in, out)
	if _, isFile := fh.(*file); errno == 0 && !isFile {
		if sz, ok := in.GetSize(); ok {
			var st syscall.Stat_t
			if syscall.Stat(filepath.Join(n.fsys.backing, n.Path(nil)), &st) == nil {
				n.fsys.resized(st.Ino, int64(sz))
			}
		}
	}
	return errno
}

func (f *FS) wrap(fh fs.FileHandle) fs.FileHandle {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return fh
	}
	fd, ok := lf.PassthroughFd()
	if !ok {
		return fh
	}
	return &file{LoopbackFile: lf, fd: fd, fsys: f}
}

// file is a loopback file whose writes are recorded and whose syncs make
// them durable. It never offers passthrough: every read and write must
// reach the daemon.
type file struct {
	*fs.LoopbackFile
	fd   int
	fsys *FS
}

// PassthroughFd refuses kernel passthrough (which would bypass Write).
func (f *file) PassthroughFd() (int, bool) { return -1, false }

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	ok, errno := f.fsys.beforeWrite(f.fd, off, int64(len(data)))
	if errno != 0 {
		return 0, errno
	}
	if !ok {
		return uint32(len(data)), 0 // lost with the power
	}
	return f.LoopbackFile.Write(ctx, data, off)
}

func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	var n int64
	for _, d := range data {
		n += int64(len(d))
	}
	ok, errno := f.fsys.beforeWrite(f.fd, off, n)
	if errno != 0 {
		return 0, errno
	}
	if !ok {
		return uint32(n), 0
	}
	return f.LoopbackFile.Writev(ctx, data, off)
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	ino, ok := f.ino()
	if !ok {
		return f.LoopbackFile.Fsync(ctx, flags)
	}
	u, ok := f.fsys.detach(ino)
	if !ok {
		return 0 // lost with the power
	}
	if errno := f.LoopbackFile.Fsync(ctx, flags); errno != 0 {
		if u != nil {
			f.fsys.reattach(ino, u)
		}
		return errno
	}
	if u != nil {
		_ = unix.Close(u.fd)
	}
	return 0
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if errno := f.LoopbackFile.Setattr(ctx, in, out); errno != 0 {
		return errno
	}
	if sz, ok := in.GetSize(); ok {
		if ino, ok := f.ino(); ok {
			f.fsys.resized(ino, int64(sz))
		}
	}
	return 0
}

func (f *file) Allocate(ctx context.Context, off, sz uint64, mode uint32) syscall.Errno {
	if errno := f.LoopbackFile.Allocate(ctx, off, sz, mode); errno != 0 {
		return errno
	}
	ino, ok := f.ino()
	if !ok {
		return 0
	}
	if mode&(unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_PUNCH_HOLE) != 0 {
		f.fsys.zeroed(ino, int64(off), int64(sz))
	}
	if mode&unix.FALLOC_FL_KEEP_SIZE == 0 {
		var st unix.Stat_t
		if unix.Fstat(f.fd, &st) == nil {
			f.fsys.resized(ino, st.Size)
		}
	}
	return 0
}

func (f *file) ino() (uint64, bool) {
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return 0, false
	}
	return st.Ino, true
}
