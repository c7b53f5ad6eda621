package fsx

import (
	"io"
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

var _ InlineFile = (*osFile)(nil)

// WriteAtInline writes b at off with pwrite(2) made inline (InlineFile),
// looping over short writes and EINTR as os.File.WriteAt does.
func (f *osFile) WriteAtInline(b []byte, off int64) (int, error) {
	return pwriteInline(f.f.Fd(), f.f.Name(), b, off)
}

// pwriteInline writes b at off of descriptor fd (of file name) with
// pwrite(2) made inline, looping over short writes and EINTR.
func pwriteInline(fd uintptr, name string, b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		k, _, e := syscall.RawSyscall6(syscall.SYS_PWRITE64, fd, uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n), uintptr(off+int64(n)), 0, 0)
		switch {
		case e == syscall.EINTR:
			continue
		case e != 0:
			runtime.KeepAlive(b)
			return n, &os.PathError{Op: "write", Path: name, Err: e}
		case k == 0:
			runtime.KeepAlive(b)
			return n, &os.PathError{Op: "write", Path: name, Err: io.ErrShortWrite}
		}
		n += int(k)
	}
	runtime.KeepAlive(b)
	return n, nil
}

// SyncInline is Sync (fdatasync(2)) made inline (InlineFile).
func (f *osFile) SyncInline() error {
	fd := f.f.Fd()
	for {
		_, _, e := syscall.RawSyscall(syscall.SYS_FDATASYNC, fd, 0, 0)
		switch e {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return &os.PathError{Op: "fdatasync", Path: f.f.Name(), Err: e}
	}
}
