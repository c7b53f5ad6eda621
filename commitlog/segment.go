package commitlog

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/gantrymq/gantry/internal/fsx"
)

// segment is one preallocated, mapped file of the log.
type segment struct {
	base int64 // global offset of byte 0
	size int64
	path string
	file fsx.File
	m    fsx.Mapping
	b    []byte // m.Bytes()

	// wm is the appends' mapping (see writerView), made once; wOwn is set
	// once it is a mapping of its own, not m.
	wOnce sync.Once
	wm    fsx.Mapping
	wOwn  atomic.Bool

	// refs counts readers holding Regions; the closed bit is set when the
	// segment is deleted, after which no new reference is granted and the
	// last release unmaps.
	refs atomic.Int64
}

const segClosed = int64(1) << 62

// segmentName is the 20-digit zero-padded start offset.
func segmentName(base int64) string { return fsx.OffsetName(base) }

// openSegment opens and maps an existing segment file of the given size.
func openSegment(fsys fsx.FS, dir string, base, size int64) (*segment, error) {
	path := filepath.Join(dir, segmentName(base))
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("commitlog: open segment %s: %w", path, err)
	}
	m, err := f.Map(int(size))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("commitlog: map segment %s: %w", path, err)
	}
	return &segment{base: base, size: size, path: path, file: f, m: m, b: m.Bytes()}, nil
}

// end is the global offset just past the segment.
func (s *segment) end() int64 { return s.base + s.size }

// acquire takes a reader reference; it fails once the segment is deleted.
func (s *segment) acquire() bool {
	for {
		v := s.refs.Load()
		if v&segClosed != 0 {
			return false
		}
		if s.refs.CompareAndSwap(v, v+1) {
			return true
		}
	}
}

func (s *segment) release() {
	if s.refs.Add(-1) == segClosed {
		s.unmap()
	}
}

// retire marks the segment deleted; it is unmapped now or at the last release.
func (s *segment) retire() {
	if s.refs.Add(segClosed) == segClosed {
		s.unmap()
	}
}

// writerView returns the mapping appends are copied into and pre-faulted
// through: a second mapping of the file, made on first use, so that the
// readers' mapping (s.m) is never written through. Writeback write-protects
// every writable page table entry of the pages it cleans, so that the next
// write faults to dirty the page again; with one mapping for both, every
// flush took the readers' entries with it, and the first read of a
// flushed page then cost a page-table fill, several times a record's
// read through a mapping of their own (BenchmarkReadAfterFlush;
// docs/decisions/0024-reading-the-commit-log.md). The readers fault their entries in read-only, and
// writeback leaves those alone.
//
// With random (writeHybrid) the writer's mapping is marked random access,
// so that faulting its pages in reads nothing ahead: readahead past the
// append position would zero pages that pwrite then overwrites whole, and
// marks a page to read ahead again once the readers fault it in, so that it
// would run ahead of the appends for good. writeMapped keeps readahead,
// which fills the page cache with large folios, and asks for huge pages. If
// the second mapping cannot be had, it is the segment's mapping.
func (s *segment) writerView(random bool) fsx.Mapping {
	s.wOnce.Do(func() {
		s.wm = s.m
		m, err := s.file.Map(int(s.size))
		if err != nil {
			return
		}
		if random {
			if err := m.Random(0, int(s.size)); err != nil {
				m.Unmap()
				return
			}
		} else {
			_ = m.Huge(0, int(s.size)) // writeMapped: appends fill it in order; advisory
		}
		s.wm = m
		s.wOwn.Store(true)
	})
	return s.wm
}

// ownWriter returns the appends' mapping if one of its own was made, else
// nil; it never makes one.
func (s *segment) ownWriter() fsx.Mapping {
	if s.wOwn.Load() {
		return s.wm
	}
	return nil
}

func (s *segment) unmap() {
	if w := s.ownWriter(); w != nil {
		w.Unmap()
	}
	if s.m != nil {
		s.m.Unmap()
	}
	if s.file != nil {
		s.file.Close()
	}
}

// segList is an immutable, ordered list of segments; the Log swaps it whole.
type segList struct {
	segs []*segment
}

// find returns the segment holding global offset off, or nil.
func (l *segList) find(off int64) *segment {
	segs := l.segs
	if len(segs) == 0 || off < segs[0].base {
		return nil
	}
	size := segs[0].size
	i := int((off - segs[0].base) / size)
	if i >= len(segs) {
		return nil
	}
	return segs[i]
}

func (l *segList) last() *segment {
	if len(l.segs) == 0 {
		return nil
	}
	return l.segs[len(l.segs)-1]
}
