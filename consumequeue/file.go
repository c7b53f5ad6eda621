package consumequeue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gantrymq/gantry/internal/fsx"
)

// qfile is one preallocated, mapped file of the queue.
type qfile struct {
	base int64 // logical byte offset of byte 0
	path string
	file fsx.File
	m    fsx.Mapping
	b    []byte // m.Bytes(), len == file size
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

// mapFile opens and maps an existing file that is already size bytes long.
func mapFile(fsys fsx.FS, dir string, base int64, size int) (*qfile, error) {
	path := filepath.Join(dir, fileName(base))
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("consumequeue: open %s: %w", path, err)
	}
	m, err := f.Map(size)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("consumequeue: map %s: %w", path, err)
	}
	return &qfile{base: base, path: path, file: f, m: m, b: m.Bytes()}, nil
}

// createFile creates, preallocates and maps a new zeroed file, and makes it
// and its size durable before anything is written to it, so that a crash
// never leaves a short file behind a full one.
func createFile(fsys fsx.FS, dir string, base int64, size int) (*qfile, error) {
	path := filepath.Join(dir, fileName(base))
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("consumequeue: create %s: %w", path, err)
	}
	fail := func(what string, err error) (*qfile, error) {
		f.Close()
		fsys.Remove(path)
		return nil, fmt.Errorf("consumequeue: %s %s: %w", what, path, err)
	}
	if err := f.Allocate(0, int64(size)); err != nil {
		return fail("allocate", err)
	}
	if err := f.Sync(); err != nil {
		return fail("sync", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fail("sync dir of", err)
	}
	m, err := f.Map(size)
	if err != nil {
		return fail("map", err)
	}
	return &qfile{base: base, path: path, file: f, m: m, b: m.Bytes()}, nil
}

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
