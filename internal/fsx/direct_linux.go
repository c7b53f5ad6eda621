package fsx

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

var _ DirectWriter = (*osFile)(nil)

// WriteAtDirect implements DirectWriter with a second descriptor of the
// file, opened with O_DIRECT on first use and closed with the file.
func (f *osFile) WriteAtDirect(b []byte, off int64, inline bool) (int, error) {
	df, err := f.directFor("write", b, off)
	if df == nil {
		return 0, err
	}
	if !inline {
		n, err := df.WriteAt(b, off)
		return n, directErr(err)
	}
	n, err := pwriteInline(df.Fd(), f.f.Name(), b, off)
	return n, directErr(err)
}

// ReadAtDirect implements DirectWriter with the descriptor WriteAtDirect
// uses.
func (f *osFile) ReadAtDirect(b []byte, off int64) (int, error) {
	df, err := f.directFor("read", b, off)
	if df == nil {
		return 0, err
	}
	n, err := df.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		err = nil // short, as at the end of a file
	}
	return n, directErr(err)
}

// PrepareDirect implements DirectWriter.
func (f *osFile) PrepareDirect() error {
	if _, err := f.directFile(); err != nil {
		return err
	}
	if err := unix.Fadvise(int(f.f.Fd()), 0, 0, unix.FADV_RANDOM); err != nil {
		return &os.PathError{Op: "fadvise", Path: f.f.Name(), Err: err}
	}
	return nil
}

// directFor checks a direct op ("write" or "read") of b at off and returns
// the descriptor to make it with; nil, with a nil error for an empty b.
func (f *osFile) directFor(op string, b []byte, off int64) (*os.File, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if err := checkDirect(op, f.f.Name(), b, off); err != nil {
		return nil, err
	}
	return f.directFile()
}

// directFile opens the O_DIRECT descriptor once (read-write: the files
// it is for are open for writing anyway).
func (f *osFile) directFile() (*os.File, error) {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	if f.dErr != nil {
		return nil, f.dErr
	}
	if f.df == nil {
		df, err := os.OpenFile(f.f.Name(), os.O_RDWR|syscall.O_DIRECT, 0)
		if err != nil {
			f.dErr = directErr(err)
			return nil, f.dErr
		}
		f.df = df
	}
	return f.df, nil
}

// directErr makes EINVAL, which open and write answer where direct I/O is
// not supported or the alignment not enough, match errors.ErrUnsupported.
func directErr(err error) error {
	if errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
	}
	return err
}
