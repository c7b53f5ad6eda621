package commitlog

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
)

// Copy is a buffer of log bytes read with ReadCopy, shared by the Regions
// cut from it; it goes back to its pool when the last of them and the
// Copy itself are released.
type Copy struct {
	b    []byte
	refs atomic.Int32
}

// Region returns [from, to) of the copy as a Region, which holds a
// reference to the copy until it is released.
func (c *Copy) Region(from, to int) Region {
	c.refs.Add(1)
	return Region{B: c.b[from:to:to], cp: c}
}

// Release drops the reference ReadCopy returned the copy with.
func (c *Copy) Release() {
	if c.refs.Add(-1) == 0 {
		putCopy(c)
	}
}

// Copies are pooled by size class: powers of two from 64 KiB to 16 MiB;
// larger ones are not kept.
const (
	minCopyShift = 16
	maxCopyShift = 24
)

var copyPools [maxCopyShift - minCopyShift + 1]sync.Pool

func copyClass(n int) int {
	if n <= 1<<minCopyShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minCopyShift
}

func getCopy(n int) *Copy {
	cl := copyClass(n)
	if cl < len(copyPools) {
		if c, ok := copyPools[cl].Get().(*Copy); ok {
			c.b = c.b[:n]
			return c
		}
		return &Copy{b: make([]byte, n, 1<<(cl+minCopyShift))}
	}
	return &Copy{b: make([]byte, n)}
}

func putCopy(c *Copy) {
	if cl := copyClass(cap(c.b)); cl < len(copyPools) && cap(c.b) == 1<<(cl+minCopyShift) {
		copyPools[cl].Put(c)
	}
}

// Span is the log range [Off, End).
type Span struct{ Off, End int64 }

// ReadCopy reads the spans, in order, back to back into a buffer of its
// own with one pread each, under the same rules as Read: each span must
// lie in one segment and below MaxOffset. The caller cuts Regions from the
// copy (Copy.Region; the first span starts at 0, each next one where the
// one before ends) and then releases it; each Region is released as
// usual.
//
// It is for readers of many records at once when the log is written with
// pwrite (writeDirect): its pages are then in the page cache in small
// folios that a read through the mapping faults in one 4 KiB page at a
// time, where pread copies them through the kernel's own mapping
// (docs/decisions/0024-reading-the-commit-log.md).
// Under writeBuffered it copies what the last flushes still hold in memory
// (stage.go) from there. Safe for concurrent use.
func (l *Log) ReadCopy(spans []Span) (*Copy, error) {
	total := int64(0)
	for _, sp := range spans {
		if sp.End <= sp.Off {
			return nil, fmt.Errorf("%w: span [%d, %d)", ErrBadOffset, sp.Off, sp.End)
		}
		total += sp.End - sp.Off
	}
	if len(spans) == 0 || total > maxCopy {
		return nil, fmt.Errorf("%w: %d spans of %d bytes in all", ErrBadOffset, len(spans), total)
	}
	c := getCopy(int(total))
	at := 0
	for _, sp := range spans {
		n := int(sp.End - sp.Off)
		if err := l.readAt(c.b[at:at+n], sp.Off); err != nil {
			putCopy(c)
			return nil, err
		}
		at += n
	}
	c.refs.Store(1)
	return c, nil
}

// maxCopy bounds a ReadCopy.
const maxCopy = 1 << 30

// readAt fills b from log offset off, under Read's rules.
func (l *Log) readAt(b []byte, off int64) error {
	seg, err := l.acquireRange(off, len(b))
	if err != nil {
		return err
	}
	defer seg.release()
	if k, err := l.readInto(seg, b, off); k < len(b) {
		return fmt.Errorf("commitlog: read %s at %d: %d of %d bytes: %w", seg.path, off-seg.base, k, len(b), err)
	}
	return nil
}

// readInto fills b with the log bytes from off on, which lie in seg (the
// caller holds a reader reference to it) below the readable end: what
// the last flushes still hold in memory (stage.go), then, of a segment
// written directly, from the block cache (blocks.go), and the rest from
// the file with pread. It returns how many bytes it read; fewer than
// len(b) only with the file's error.
func (l *Log) readInto(seg *segment, b []byte, off int64) (int, error) {
	k := l.copyStaged(b, off)
	if k < len(b) && l.directOn.Load() {
		k += l.readBlocks(seg, b[k:], off+int64(k))
	}
	if k == len(b) {
		return k, nil
	}
	r, err := seg.file.ReadAt(b[k:], off-seg.base+int64(k))
	return k + r, err
}
