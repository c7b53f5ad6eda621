package verify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

const (
	logDir = "commitlog"

	// maxRecordBytes bounds the records Run reads: Gantry's limits (4 MiB
	// body, 32 KiB properties) stay far below it, and a damaged TOTALSIZE
	// cannot make it allocate a segment's worth of memory.
	maxRecordBytes = 64 << 20

	// magicHole starts a damaged range that recovery skipped on request:
	// [size int32]["HOLE"] (commitlog/recover.go; the format's owner keeps
	// it unexported).
	magicHole int32 = 0x484F4C45

	// magicPad starts a filler that pads a flush to a 4 KiB block before
	// a direct write: [size int32]["PAD!"] (commitlog/stage.go).
	magicPad int32 = 0x50414421

	// maxOpenSegments bounds the segment files kept open for random reads.
	maxOpenSegments = 16
)

// stateFiles are the commit log's own files, which may sit beside the
// segments when its StateDir is its Dir.
var stateFiles = map[string]bool{
	"abort": true, "commitlog.checkpoint": true, "recovery-report.json": true, "corrupt": true, "lock": true,
}

// segment is one commit-log file.
type segment struct {
	base int64
	path string
	size int64 // file size; segBytes when the file is whole
}

// logFiles reads the commit log's segments at random offsets, keeping a
// few files open.
type logFiles struct {
	fsys     fsx.FS
	segs     []segment // by base
	segBytes int64
	open     map[int]fsx.File
	lru      []int // open segment indexes, least recently used first
	buf      []byte
}

func newLogFiles(fsys fsx.FS) *logFiles {
	return &logFiles{fsys: fsys, open: map[int]fsx.File{}}
}

// find returns the index of the segment holding log offset off, or -1.
func (l *logFiles) find(off int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > off }) - 1
	if i < 0 || off >= l.segs[i].base+l.segBytes {
		return -1
	}
	return i
}

func (l *logFiles) file(i int) (fsx.File, error) {
	if f, ok := l.open[i]; ok {
		for j, k := range l.lru {
			if k == i {
				l.lru = append(append(l.lru[:j:j], l.lru[j+1:]...), i)
				break
			}
		}
		return f, nil
	}
	if len(l.lru) >= maxOpenSegments {
		old := l.lru[0]
		l.lru = l.lru[1:]
		l.open[old].Close()
		delete(l.open, old)
	}
	f, err := l.fsys.OpenFile(l.segs[i].path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	l.open[i] = f
	l.lru = append(l.lru, i)
	return f, nil
}

// readAt reads up to len(b) bytes at position pos of segment i; fewer at
// the end of the file, which is not an error.
func (l *logFiles) readAt(i int, b []byte, pos int64) (int, error) {
	f, err := l.file(i)
	if err != nil {
		return 0, err
	}
	n, err := f.ReadAt(b, pos)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

func (l *logFiles) close() {
	for _, f := range l.open {
		f.Close()
	}
	clear(l.open)
	l.lru = nil
}

// headReason judges the first 8 bytes of what should be a record at
// position pos of a segment: "" when they may start a record (a record,
// filler or hole), else why not. A nil head means the file ends there.
func headReason(head []byte, pos, segBytes, fileSize int64) string {
	size, magic, ok := message.RecordSize(head)
	rest := segBytes - pos
	switch {
	case !ok && pos >= fileSize && fileSize < segBytes:
		return fmt.Sprintf("the file ends at %d bytes, before a record or the end-of-segment filler (truncated?)", fileSize)
	case !ok:
		return fmt.Sprintf("only %d bytes left in the segment, no room for a record or filler", min(rest, fileSize-pos))
	case magic == message.MagicBlank:
		if int64(size) != rest {
			return fmt.Sprintf("end-of-segment filler says %d bytes remain, %d do", size, rest)
		}
		return ""
	case magic == magicHole:
		if size < message.BlankSize || int64(size) > rest {
			return fmt.Sprintf("skipped-range (HOLE) marker of bad size %d", size)
		}
		return ""
	case magic == magicPad:
		if size < message.BlankSize || int64(size) > rest {
			return fmt.Sprintf("block padding (PAD!) of bad size %d", size)
		}
		return ""
	case size == 0 && magic == 0:
		return "zeros where a record should start"
	case magic != message.MagicV1 && magic != message.MagicV2:
		return fmt.Sprintf("0x%08X is not a record magic code", uint32(magic))
	case size < message.MinRecordSize:
		return fmt.Sprintf("record size %d is below the minimum %d", size, message.MinRecordSize)
	case int64(size) > rest-message.BlankSize:
		return fmt.Sprintf("record size %d does not fit the %d bytes left in the segment", size, rest)
	case size > maxRecordBytes:
		return fmt.Sprintf("record size %d exceeds %d", size, maxRecordBytes)
	case int64(size) > fileSize-pos:
		return fmt.Sprintf("record of %d bytes runs past the end of the file (%d bytes: truncated?)", size, fileSize)
	}
	return ""
}

// recordAt reads the record that should start at log offset off and checks
// it as recovery does (message.Check with the __CRC32# tail required). It
// returns the record's bytes, valid until the next call, or why there is
// no valid record there. hint is the expected size, to read it in one go.
// err is a read failure.
func (l *logFiles) recordAt(off int64, hint int32) (rec []byte, reason string, err error) {
	i := l.find(off)
	if i < 0 {
		return nil, "no commit-log segment holds this offset", nil
	}
	seg := l.segs[i]
	pos := off - seg.base
	want := int64(512)
	if hint >= message.MinRecordSize && hint <= maxRecordBytes {
		want = int64(hint)
	}
	b, err := l.read(i, pos, want)
	if err != nil {
		return nil, "", err
	}
	if len(b) < message.BlankSize {
		b = nil
	}
	if r := headReason(b, pos, l.segBytes, seg.size); r != "" {
		return nil, r, nil
	}
	size, magic, _ := message.RecordSize(b)
	switch magic {
	case message.MagicBlank:
		return nil, "end-of-segment filler, not a record", nil
	case magicHole:
		return nil, "start of a damaged range recovery skipped (HOLE), not a record", nil
	case magicPad:
		return nil, "block padding (PAD!), not a record", nil
	}
	if int(size) > len(b) {
		if b, err = l.read(i, pos, int64(size)); err != nil {
			return nil, "", err
		}
	}
	if int(size) > len(b) {
		return nil, fmt.Sprintf("short read: %d of the record's %d bytes", len(b), size), nil
	}
	rec = b[:size]
	if err := message.Check(rec, off, true); err != nil {
		return nil, err.Error(), nil
	}
	return rec, "", nil
}

// read reads up to n bytes at pos of segment i into l.buf.
func (l *logFiles) read(i int, pos, n int64) ([]byte, error) {
	n = max(0, min(n, l.segs[i].size-pos))
	if int64(cap(l.buf)) < n {
		l.buf = make([]byte, n)
	}
	got, err := l.readAt(i, l.buf[:n], pos)
	return l.buf[:got], err
}

// listSegments finds the segment files of dir/commitlog, reports bad
// names, sizes and gaps, and sets v.log's segments and segment size.
func (v *verifier) listSegments() {
	dir := filepath.Join(v.dir, logDir)
	var segs []segment
	for _, name := range v.listDir(dir, KindSegment) {
		path := filepath.Join(dir, name)
		base, ok := fsx.ParseOffsetName(name)
		if !ok {
			if !stateFiles[name] && !strings.HasSuffix(name, ".tmp") {
				v.addf(KindSegment, path, 0, "unexpected file in the commit-log directory: not a 20-digit segment name")
			}
			continue
		}
		info, err := v.fsys.Stat(path)
		switch {
		case err != nil:
			v.addf(KindIO, path, 0, "cannot stat segment: %v", err)
			continue
		case info.IsDir:
			v.addf(KindSegment, path, 0, "a directory has a segment's name")
			continue
		}
		segs = append(segs, segment{base: base, path: path, size: info.Size})
	}
	l := v.log
	l.segs = segs
	l.segBytes = v.segmentBytes(segs)
	if len(segs) == 0 {
		return
	}
	if l.segBytes < 2*message.BlankSize {
		v.addf(KindSegment, segs[0].path, 0, "cannot tell the segment size (files of %d bytes)", l.segBytes)
		l.segs = nil
		return
	}
	v.checkSegmentLayout()
}

// checkSegmentLayout reports segments that are misnamed, missing or of
// the wrong size.
func (v *verifier) checkSegmentLayout() {
	l, segs := v.log, v.log.segs
	for i, s := range segs {
		if s.base%l.segBytes != 0 {
			v.addf(KindSegment, s.path, 0, "start offset %d is not a multiple of the segment size %d", s.base, l.segBytes)
		}
		if i > 0 && s.base != segs[i-1].base+l.segBytes {
			v.addf(KindSegment, s.path, 0, "segment does not follow the previous one (%s): expected start %d, a segment file is missing",
				filepath.Base(segs[i-1].path), segs[i-1].base+l.segBytes)
		}
		if s.size != l.segBytes {
			p := Problem{File: s.path, Offset: s.base + s.size, FileOffset: s.size, Kind: KindSegment,
				Message: fmt.Sprintf("file is %d bytes, segments are %d", s.size, l.segBytes)}
			if s.size < l.segBytes {
				p.Message += ": truncated"
			}
			v.add(p)
		}
	}
}

// segmentBytes works out the segment size: the commit-log checkpoint's
// record of it when every start offset is a multiple of it, else the
// smallest distance between consecutive starts, else the largest file.
func (v *verifier) segmentBytes(segs []segment) int64 {
	cp := readCheckpointSegBytes(v.fsys, filepath.Join(v.dir, "commitlog.checkpoint"))
	if cp <= 0 {
		cp = readCheckpointSegBytes(v.fsys, filepath.Join(v.dir, logDir, "commitlog.checkpoint"))
	}
	if cp > 0 {
		ok := true
		for _, s := range segs {
			ok = ok && s.base%cp == 0
		}
		if ok {
			return cp
		}
	}
	var d, largest int64
	for i, s := range segs {
		largest = max(largest, s.size)
		if i > 0 && (d == 0 || s.base-segs[i-1].base < d) {
			d = s.base - segs[i-1].base
		}
	}
	if d > 0 {
		return d
	}
	return largest
}

// readCheckpointSegBytes reads the segment size from the commit log's
// checkpoint file (commitlog/checkpoint.go: two 64-byte slots of
// [magic u32][seq u64][flushed i64][storeTs i64][segBytes i64][crc32 u32];
// the valid slot with the highest seq wins), or returns 0.
func readCheckpointSegBytes(fsys fsx.FS, path string) int64 {
	const slot, magic = 64, 0x47434B50
	b, err := fsx.ReadFile(fsys, path)
	if err != nil {
		return 0
	}
	var best uint64
	var segBytes int64
	for off := 0; off+40 <= len(b) && off < 2*slot; off += slot {
		s := b[off:]
		if binary.BigEndian.Uint32(s) != magic || binary.BigEndian.Uint32(s[36:]) != crc32.ChecksumIEEE(s[:36]) {
			continue
		}
		if seq := binary.BigEndian.Uint64(s[4:]); segBytes == 0 || seq > best {
			best, segBytes = seq, int64(binary.BigEndian.Uint64(s[28:]))
		}
	}
	return segBytes
}
