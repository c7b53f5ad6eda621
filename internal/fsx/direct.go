package fsx

import (
	"errors"
	"fmt"
	"io/fs"
	"unsafe"
)

// DirectAlign is the alignment direct writes (DirectWriter) need: of the
// buffer's address, its length and the file offset. 4 KiB covers the
// logical block size of the disks Gantry runs on (512 B or 4 KiB).
const DirectAlign = 4096

// DirectWriter is a File that can also be written (and read) around the
// page cache (O_DIRECT): the data goes from the caller's buffer to the
// disk, with no copy into the page cache, no dirty pages for writeback to
// find and write-protect, and no page cache to allocate: a fraction of the
// system time of durable writes through the page cache
// (docs/decisions/0010-commit-log-writes-through-staging-buffers.md).
//
// Reading the file through the page cache stays correct, but the kernel
// keeps the two coherent only by dropping cached pages a direct write
// overlaps, and it cannot drop a page someone holds at that moment: a
// caller must never write directly over a range that readers may have
// brought into the page cache (or may bring in meanwhile, as read-ahead
// does), or they may go on reading the old bytes.
type DirectWriter interface {
	// PrepareDirect opens what direct writes need and turns read-ahead off
	// for the file's reads (posix_fadvise RANDOM), so that reading it does
	// not bring into the page cache ranges that are yet to be written
	// directly. Errors are as WriteAtDirect's.
	PrepareDirect() error
	// WriteAtDirect writes b at off with O_DIRECT. The address of b, len(b)
	// and off must be multiples of DirectAlign. It returns an error
	// matching errors.ErrUnsupported when the file system does not do
	// direct I/O (tmpfs) or refuses the alignment; the caller then writes
	// the usual way. inline makes the call as InlineFile's are.
	WriteAtDirect(b []byte, off int64, inline bool) (int, error)
	// ReadAtDirect reads into b from off with O_DIRECT, under
	// WriteAtDirect's alignment rules and errors: from the disk into b,
	// without the page cache (which it keeps coherent with: dirty cached
	// pages in the range are written first). Past the end of the file it
	// reads short, as ReadAt does.
	ReadAtDirect(b []byte, off int64) (int, error)
}

// DirectAligned reports whether b's address, its length and off are all
// multiples of DirectAlign, as a direct write of b at off needs.
func DirectAligned(b []byte, off int64) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%DirectAlign == 0 && len(b)%DirectAlign == 0 && off%DirectAlign == 0
}

// checkDirect checks the alignment of a direct op ("write" or "read") of b
// at off.
func checkDirect(op, name string, b []byte, off int64) error {
	if len(b) > 0 && !DirectAligned(b, off) {
		return &fs.PathError{Op: "direct " + op, Path: name,
			Err: fmt.Errorf("%w: %d bytes at %d from a buffer not aligned to %d bytes", errors.ErrUnsupported, len(b), off, DirectAlign)}
	}
	return nil
}
