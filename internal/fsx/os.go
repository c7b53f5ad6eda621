package fsx

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// OS is the real filesystem.
var OS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

func (osFS) Remove(name string) error                  { return os.Remove(name) }
func (osFS) Rename(oldpath, newpath string) error      { return os.Rename(oldpath, newpath) }
func (osFS) MkdirAll(p string, perm fs.FileMode) error { return os.MkdirAll(p, perm) }

func (osFS) ReadDir(name string) ([]string, error) {
	ents, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return sortedNames(names), nil
}

func (osFS) Stat(name string) (Info, error) {
	st, err := os.Stat(name)
	if err != nil {
		return Info{}, err
	}
	return Info{Size: st.Size(), IsDir: st.IsDir()}, nil
}

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (osFS) DiskUsage(path string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Usage{}, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	return statfsUsage(&st), nil
}

// statfsUsage is the usage df reports: Total is what is used plus what an
// unprivileged process may still use, so blocks reserved for root count in
// neither (RocketMQ's getDiskPartitionSpaceUsedPercent does the same).
// Counting them as used made a broker on a volume with a large reserve
// see it far fuller than df does, and its forced cleaning delete
// unconsumed segments.
func statfsUsage(st *unix.Statfs_t) Usage {
	// f_blocks, f_bfree and f_bavail count fragments (f_frsize), which on
	// some filesystems differ from the preferred I/O size f_bsize.
	bs := st.Frsize
	if bs == 0 {
		bs = st.Bsize
	}
	used := int64(st.Blocks-min(st.Bfree, st.Blocks)) * bs
	free := int64(st.Bavail) * bs
	return Usage{Total: used + free, Free: free}
}

type osFile struct {
	f *os.File

	// The O_DIRECT descriptor of WriteAtDirect, opened on first use, or
	// why it could not be.
	dmu  sync.Mutex
	df   *os.File
	dErr error
}

// SeekData returns the offset of the first byte of data at or after off
// (lseek SEEK_DATA): what lies before it is a hole, which reads as zeros.
// With no data after off it returns the size. On ext4 a fallocated extent
// never written, and not in the page cache, is a hole.
func (f *osFile) SeekData(off int64) (int64, error) {
	n, err := unix.Seek(int(f.f.Fd()), off, unix.SEEK_DATA)
	if errors.Is(err, unix.ENXIO) {
		return f.Size()
	}
	if err != nil {
		return 0, &os.PathError{Op: "seek data", Path: f.f.Name(), Err: err}
	}
	return n, nil
}

// SeekHole returns the offset of the first hole at or after off (lseek
// SEEK_HOLE); the end of the file counts as one.
func (f *osFile) SeekHole(off int64) (int64, error) {
	n, err := unix.Seek(int(f.f.Fd()), off, unix.SEEK_HOLE)
	if err != nil {
		return 0, &os.PathError{Op: "seek hole", Path: f.f.Name(), Err: err}
	}
	return n, nil
}

func (f *osFile) Name() string                             { return f.f.Name() }
func (f *osFile) ReadAt(b []byte, off int64) (int, error)  { return f.f.ReadAt(b, off) }
func (f *osFile) WriteAt(b []byte, off int64) (int, error) { return f.f.WriteAt(b, off) }
func (f *osFile) Truncate(size int64) error                { return f.f.Truncate(size) }

func (f *osFile) Close() error {
	f.dmu.Lock()
	df := f.df
	f.df, f.dErr = nil, os.ErrClosed
	f.dmu.Unlock()
	if df != nil {
		_ = df.Close() // nothing buffered: its writes were made durable through f
	}
	return f.f.Close()
}

func (f *osFile) Size() (int64, error) {
	st, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (f *osFile) Allocate(off, n int64) error {
	if err := unix.Fallocate(int(f.f.Fd()), 0, off, n); err != nil {
		return &os.PathError{Op: "fallocate", Path: f.f.Name(), Err: err}
	}
	return nil
}

func (f *osFile) ZeroRange(off, n int64) error {
	err := unix.Fallocate(int(f.f.Fd()), unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return &os.PathError{Op: "fallocate(zero range)", Path: f.f.Name(), Err: err}
	}
	// Writing zeros must not extend the file: clip to the current size, as
	// FALLOC_FL_KEEP_SIZE would.
	size, err := f.Size()
	if err != nil {
		return err
	}
	n = min(n, size-off)
	zeros := make([]byte, 1<<20)
	for n > 0 {
		c := min(n, int64(len(zeros)))
		if _, err := f.f.WriteAt(zeros[:c], off); err != nil {
			return err
		}
		off += c
		n -= c
	}
	return nil
}

func (f *osFile) Sync() error {
	if err := unix.Fdatasync(int(f.f.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.f.Name(), Err: err}
	}
	return nil
}

func (f *osFile) Map(size int) (Mapping, error) {
	cur, err := f.Size()
	if err != nil {
		return nil, err
	}
	if int64(size) > cur {
		return nil, fmt.Errorf("fsx: map %d bytes of %s: file is only %d bytes", size, f.f.Name(), cur)
	}
	b, err := unix.Mmap(int(f.f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: f.f.Name(), Err: err}
	}
	return &osMapping{b: b, name: f.f.Name()}, nil
}

type osMapping struct {
	b    []byte
	name string
}

func (m *osMapping) Bytes() []byte { return m.b }

func (m *osMapping) Sync(off, n int) error {
	lo, hi := pageRange(off, n, len(m.b))
	if lo >= hi {
		return nil
	}
	if err := unix.Msync(m.b[lo:hi], unix.MS_SYNC); err != nil {
		return &os.PathError{Op: "msync", Path: m.name, Err: err}
	}
	return nil
}

func (m *osMapping) Populate(off, n int) error {
	lo, hi := pageRange(off, n, len(m.b))
	if lo >= hi {
		return nil
	}
	err := unix.Madvise(m.b[lo:hi], unix.MADV_POPULATE_WRITE)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		return &os.PathError{Op: "madvise(populate)", Path: m.name, Err: err}
	}
	// Kernels before 5.14: touch each page so it takes the fault now, with
	// an atomic add of zero, which cannot undo a byte an appender writes
	// meanwhile (reading a byte and storing it back could).
	for p := lo; p+4 <= hi; p += PageSize {
		atomic.AddUint32((*uint32)(unsafe.Pointer(&m.b[p])), 0)
	}
	return nil
}

func (m *osMapping) Sequential(off, n int) error {
	return m.advise(off, n, unix.MADV_SEQUENTIAL, "madvise(sequential)")
}

func (m *osMapping) Huge(off, n int) error {
	return m.adviseTHP(off, n, unix.MADV_HUGEPAGE, "madvise(hugepage)")
}

func (m *osMapping) Random(off, n int) error {
	// No huge pages either (see Huge): a fault would still fill a whole 2
	// MiB folio (the kernel reads a huge page's worth even where it reads
	// nothing ahead), which is what a random mapping is to avoid.
	if err := m.adviseTHP(off, n, unix.MADV_NOHUGEPAGE, "madvise(nohugepage)"); err != nil {
		return err
	}
	return m.advise(off, n, unix.MADV_RANDOM, "madvise(random)")
}

// adviseTHP is advise for a transparent huge page advice, which a kernel
// without them refuses (EINVAL): then there is nothing to do.
func (m *osMapping) adviseTHP(off, n, advice int, op string) error {
	if err := m.advise(off, n, advice, op); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}

func (m *osMapping) Drop(off, n int) error {
	return m.advise(off, n, unix.MADV_DONTNEED, "madvise(dontneed)")
}

// advise applies a read-pattern advice to the whole pages of [off, off+n).
func (m *osMapping) advise(off, n, advice int, op string) error {
	lo, hi := pageRange(off, n, len(m.b))
	if lo >= hi {
		return nil
	}
	if err := unix.Madvise(m.b[lo:hi], advice); err != nil {
		return &os.PathError{Op: op, Path: m.name, Err: err}
	}
	return nil
}

func (m *osMapping) Unmap() error {
	if m.b == nil {
		return nil
	}
	err := unix.Munmap(m.b)
	m.b = nil
	return err
}

// pageRange widens [off, off+n) to whole pages, clipped to [0, size). An
// empty or negative-length range gives lo >= hi.
func pageRange(off, n, size int) (lo, hi int) {
	if n <= 0 {
		return 0, 0
	}
	lo = max(off&^(PageSize-1), 0)
	hi = min((off+n+PageSize-1)&^(PageSize-1), size)
	return lo, hi
}
