package commitlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// magicHole marks a damaged range skipped by recovery with SkipCorrupt:
// [size int32][magicHole] at its start; readers step over size bytes.
const magicHole int32 = 0x484F4C45 // "HOLE"

// fillerName names a hole or pad filler in messages.
func fillerName(magic int32) string {
	if magic == magicPad {
		return "pad"
	}
	return "hole"
}

// RecoveryReport says what Open found and did. It is also written to
// StateDir/recovery-report.json.
type RecoveryReport struct {
	Clean            bool           `json:"clean"` // the last shutdown was clean (no abort marker)
	CheckpointFound  bool           `json:"checkpointFound"`
	CheckpointOffset int64          `json:"checkpointOffset"`
	Segments         int            `json:"segments"`
	ScanFrom         int64          `json:"scanFrom"` // first offset checked
	MinOffset        int64          `json:"minOffset"`
	MaxOffset        int64          `json:"maxOffset"` // recovered end
	RecordsScanned   int64          `json:"recordsScanned"`
	TornTail         *TornTail      `json:"tornTail,omitempty"`
	Corrupt          []CorruptRange `json:"corrupt,omitempty"`
	RemovedSegments  []string       `json:"removedSegments,omitempty"`
	ExtendedSegments []string       `json:"extendedSegments,omitempty"` // short files grown back to full size
	LostFlushed      int64          `json:"lostFlushedBytes,omitempty"` // bytes the checkpoint said were durable but are gone
	StartedAt        time.Time      `json:"startedAt"`
	DurationMS       float64        `json:"durationMs"`
}

// TornTail describes an incomplete final write that recovery discarded.
type TornTail struct {
	Segment        string `json:"segment"`
	Offset         int64  `json:"offset"`         // log offset where the valid data ends
	TruncatedBytes int64  `json:"truncatedBytes"` // non-zero bytes discarded after it in its segment
	Reason         string `json:"reason"`
	// DiscardedFrom and DiscardedRecords describe valid-looking records
	// found after the torn write and dropped with it: they lay beyond the
	// checkpointed durable end, so no SyncFlush append had been
	// acknowledged for them unless the disk itself was damaged.
	DiscardedFrom    int64 `json:"discardedFrom,omitempty"`
	DiscardedRecords int   `json:"discardedRecords,omitempty"`
}

// CorruptRange is a damaged range skipped with SkipCorrupt.
type CorruptRange struct {
	Segment string `json:"segment"`
	Offset  int64  `json:"offset"` // log offset of the damage
	End     int64  `json:"end"`    // log offset of the next valid record
	Reason  string `json:"reason"`
	SavedTo string `json:"savedTo"` // copy of the damaged bytes
}

// recover opens the segments, validates the tail, truncates a torn write,
// and sets the offsets.
func (l *Log) recover(ctx context.Context) error {
	start := time.Now()
	r := &l.report
	r.StartedAt = l.cfg.Now().UTC()
	r.Clean = !fsx.Exists(l.fs, l.abortPath())
	cp, ok := l.readCheckpoint()
	segs, err := l.openSegments(r, cp.segBytes)
	if err != nil {
		return err
	}
	l.segs.Store(&segList{segs: segs})
	if len(segs) == 0 {
		seg, err := l.createSegment(ctx, 0, false)
		if err != nil {
			return err
		}
		l.segs.Store(&segList{segs: []*segment{seg}})
		l.active = seg
		r.Segments = 1
		return l.finishRecovery(start)
	}
	r.CheckpointFound, r.CheckpointOffset = ok, cp.flushed
	l.cp.seq = cp.seq
	from := 0
	if ok && !l.cfg.VerifyAll {
		if s := (&segList{segs: segs}).find(cp.flushed); s != nil {
			from = int((s.base - segs[0].base) / s.size)
		} else if cp.flushed >= segs[len(segs)-1].end() {
			from = len(segs) - 1
		}
	}
	r.ScanFrom = segs[from].base
	// Damage at or beyond safe may be a write the crash tore while later,
	// equally unsynced pages reached the disk: recovery ends the log there.
	// Damage before safe, which was durable, followed by valid records is
	// corruption. After a clean shutdown everything was durable.
	safe := int64(math.MaxInt64)
	if !r.Clean {
		safe = 0
		if ok {
			safe = cp.flushed
		}
	}
	end, err := l.scan(ctx, segs, from, safe)
	if err != nil {
		return err
	}
	// Everything scanned is now what the log holds; after a process crash
	// part of it may still be only in the page cache. Make it durable so
	// that FlushedOffset and the checkpoint can say so.
	for _, s := range l.segs.Load().segs {
		if s.base < segs[from].base {
			continue
		}
		if err := s.file.Sync(); err != nil {
			return fmt.Errorf("commitlog: sync %s: %w", s.path, err)
		}
	}
	if ok && cp.flushed > end {
		r.LostFlushed = cp.flushed - end
		l.log.Warn("data the checkpoint recorded as durable is missing", "checkpoint", cp.flushed, "recovered", end)
	}
	return l.finishRecovery(start)
}

// openSegments lists, checks and maps the segment files.
// segBytes is the segment size the checkpoint recorded, or 0.
func (l *Log) openSegments(r *RecoveryReport, segBytes int64) ([]*segment, error) {
	names, err := l.fs.ReadDir(l.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("commitlog: list %s: %w", l.cfg.Dir, err)
	}
	var bases []int64
	for _, n := range names {
		if b, ok := fsx.ParseOffsetName(n); ok {
			bases = append(bases, b)
		}
	}
	if len(bases) == 0 {
		return nil, nil
	}
	size := l.cfg.SegmentBytes
	if len(bases) > 1 {
		segBytes = bases[1] - bases[0]
	}
	if segBytes >= minSegmentBytes && segBytes != size {
		size = segBytes
		l.log.Warn("existing segments have another size than configured; keeping theirs", "configured", l.cfg.SegmentBytes, "existing", size)
		l.cfg.SegmentBytes = size
	}
	var segs []*segment
	for i, base := range bases {
		if base%size != 0 || (i > 0 && base != bases[i-1]+size) {
			closeAll(segs)
			return nil, &CorruptError{Segment: filepath.Join(l.cfg.Dir, segmentName(base)), Offset: base, NextValid: base,
				Reason: fmt.Sprintf("segment does not follow the previous one (expected start %d): a segment file is missing", bases[max(i-1, 0)]+size)}
		}
		path := filepath.Join(l.cfg.Dir, segmentName(base))
		info, err := l.fs.Stat(path)
		if err != nil {
			closeAll(segs)
			return nil, fmt.Errorf("commitlog: stat %s: %w", path, err)
		}
		if info.Size < size {
			if err := l.extendSegment(path, info.Size, size); err != nil {
				closeAll(segs)
				return nil, err
			}
			r.ExtendedSegments = append(r.ExtendedSegments, path)
		}
		seg, err := openSegment(l.fs, l.cfg.Dir, base, size)
		if err != nil {
			closeAll(segs)
			return nil, err
		}
		segs = append(segs, seg)
	}
	r.Segments = len(segs)
	return segs, nil
}

// extendSegment grows a short segment (a crash during creation, or a
// truncated file) back to full size; the scan then finds where data ends.
func (l *Log) extendSegment(path string, have, size int64) error {
	l.log.Warn("segment is shorter than the segment size; extending it", "segment", path, "size", have, "want", size)
	f, err := l.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("commitlog: open short segment %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Allocate(0, size); err != nil {
		return l.allocErr(path, "extend", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("commitlog: sync extended segment %s: %w", path, err)
	}
	return nil
}

func closeAll(segs []*segment) {
	for _, s := range segs {
		s.retire()
	}
}

// scan validates records from segment index from onward and returns the
// recovered end. It truncates a torn tail, removes segments past the end,
// and handles damage followed by valid records per SkipCorrupt.
func (l *Log) scan(ctx context.Context, segs []*segment, from int, safe int64) (int64, error) {
	r := &l.report
	for i := from; i < len(segs); i++ {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("commitlog: recovery interrupted: %w", err)
		}
		seg := segs[i]
		if err := seg.m.Sequential(0, int(seg.size)); err != nil {
			l.log.Debug("read-ahead advice failed", "segment", seg.path, "err", err)
		}
		pos := int64(0)
		for sealed := false; !sealed; {
			size, magic, reason := recordAt(seg, pos)
			if reason == "" {
				switch magic {
				case message.MagicBlank:
					if i == len(segs)-1 {
						return l.endAt(ctx, segs, i, seg.end(), "", -1)
					}
					sealed = true
				case magicHole, magicPad:
					pos += int64(size)
				default:
					r.RecordsScanned++
					l.lastTs.Store(message.StoreTimestampOf(seg.b[pos:]))
					pos += int64(size)
				}
				continue
			}
			next, lastNZ := findValid(segs, i, pos)
			if next < 0 {
				return l.endAt(ctx, segs, i, seg.base+pos, reason, lastNZ)
			}
			if seg.base+pos >= safe {
				n := countValid(segs, next)
				l.log.Warn("discarding records written after a torn write: they were never known durable",
					"segment", seg.path, "offset", seg.base+pos, "reason", reason, "discardedFrom", next, "discardedRecords", n)
				end, err := l.endAt(ctx, segs, i, seg.base+pos, reason, -2)
				if r.TornTail == nil {
					r.TornTail = &TornTail{Segment: seg.path, Offset: end, Reason: reason}
				}
				r.TornTail.DiscardedFrom, r.TornTail.DiscardedRecords = next, n
				return end, err
			}
			cerr := &CorruptError{Segment: seg.path, Offset: seg.base + pos, FileOff: pos, NextValid: next, Reason: reason}
			if !l.cfg.SkipCorrupt {
				return 0, cerr
			}
			if err := l.skipDamage(segs, cerr); err != nil {
				return 0, err
			}
			l.log.Warn("skipped damaged range", "segment", cerr.Segment, "offset", cerr.Offset, "end", next, "reason", reason)
			i = int((next - segs[0].base) / seg.size)
			seg, pos = segs[i], next-segs[i].base
		}
	}
	// Unreachable: the last segment either ends in a blank or the scan ends inside it.
	return segs[len(segs)-1].end(), nil
}

// recordAt checks the entry at pos of seg: a valid record, a blank filler
// that ends the segment, or a hole. reason is empty when it is valid.
func recordAt(seg *segment, pos int64) (size int32, magic int32, reason string) {
	rest := seg.b[pos:]
	size, magic, ok := message.RecordSize(rest)
	switch {
	case !ok:
		return 0, 0, fmt.Sprintf("only %d bytes left in the segment, no room for a record or filler", len(rest))
	case magic == message.MagicBlank:
		if int64(size) != seg.size-pos {
			return 0, 0, fmt.Sprintf("segment filler says %d bytes remain, %d do", size, seg.size-pos)
		}
		return size, magic, ""
	case magic == magicHole || magic == magicPad:
		if size < 8 || int64(size) > seg.size-pos {
			return 0, 0, fmt.Sprintf("%s marker of bad size %d", fillerName(magic), size)
		}
		return size, magic, ""
	case size == 0 && magic == 0:
		return 0, 0, "zeros where a record should start"
	case size < message.MinRecordSize:
		return 0, 0, fmt.Sprintf("record size %d is below the minimum %d", size, message.MinRecordSize)
	}
	if int64(size) > seg.size-pos-message.BlankSize {
		return 0, 0, fmt.Sprintf("record size %d does not fit the %d bytes left", size, seg.size-pos)
	}
	if err := message.Check(rest[:size], seg.base+pos, true); err != nil {
		return 0, 0, err.Error()
	}
	return size, magic, ""
}

var magicV1Bytes = []byte{0xDA, 0xA3, 0x20, 0xA7} // message.MagicV1, big-endian

// findValid returns the log offset of the first valid record at or after
// position pos of segment i (searching later segments too), or -1. A valid
// record has the V1 magic, its own position as PHYSICALOFFSET, and passes
// every check. When it finds none it also returns the position in segment i
// of the last non-zero byte at or after pos (-1 if all zeros), found in the
// same pass: the usual tail is gigabytes of zeros, read once, and the
// holes among them (dataExtents) not at all.
func findValid(segs []*segment, i int, pos int64) (next int64, lastNZ int64) {
	lastNZ = -1
	for k := i; k < len(segs); k, pos = k+1, 0 {
		seg := segs[k]
		for _, ext := range dataExtents(seg, pos) {
			if next, nz := findValidIn(seg, pos, ext[0], ext[1]); next >= 0 {
				return seg.base + next, -1
			} else if k == i && nz >= 0 {
				lastNZ = nz
			}
		}
	}
	return -1, lastNZ
}

// findValidIn is findValid within [lo, end) of seg, a range that may hold
// data: the position of the first valid record at or after pos whose magic
// lies in the range, or -1 and the position of the range's last non-zero
// byte (-1 if all zeros).
func findValidIn(seg *segment, pos, lo, end int64) (next, lastNZ int64) {
	lastNZ = -1
	for ; lo < end; lo += tailChunk {
		hi := min(lo+tailChunk, end)
		if bytes.Equal(seg.b[lo:hi], zeroChunk[:hi-lo]) {
			continue
		}
		lastNZ = lo + int64(lastNonZero(seg.b[lo:hi]))
		// Candidates whose magic starts in [lo, hi): the record starts 4 bytes earlier.
		for from := max(lo, pos+4); from < hi; {
			j := bytes.Index(seg.b[from:min(hi+3, seg.size)], magicV1Bytes)
			if j < 0 {
				break
			}
			cand := from + int64(j) - 4
			from += int64(j) + 1
			if cand < pos || cand+36 > seg.size || message.PhysicalOffsetOf(seg.b[cand:]) != seg.base+cand {
				continue
			}
			if _, _, reason := recordAt(seg, cand); reason == "" {
				return cand, lastNZ
			}
		}
	}
	return -1, lastNZ
}

const tailChunk = 64 << 10

// dataSeeker is a file that can tell where its data and its holes are
// (fsx's OS files: SEEK_DATA and SEEK_HOLE).
type dataSeeker interface {
	SeekData(off int64) (int64, error)
	SeekHole(off int64) (int64, error)
}

// dataExtents returns the ranges of seg from pos on that may hold data, in
// order: what lies between them are holes, which read as zeros, so a scan
// for records skips them without reading (the never-written rest of a
// preallocated segment is one, on ext4 until its pages are read). It
// asks before the scan reads anything there: read-ahead fills the page
// cache, and cached pages count as data. Without the file's help it is
// [pos, size).
func dataExtents(seg *segment, pos int64) [][2]int64 {
	all := [][2]int64{{pos, seg.size}}
	sd, ok := seg.file.(dataSeeker)
	if !ok {
		return all
	}
	var out [][2]int64
	for off := pos; off < seg.size; {
		lo, err := sd.SeekData(off)
		if err != nil {
			return all
		}
		if lo >= seg.size {
			break
		}
		hi, err := sd.SeekHole(lo)
		if err != nil || hi <= lo {
			return all
		}
		hi = min(hi, seg.size)
		out = append(out, [2]int64{max(lo, pos), hi})
		off = hi
	}
	return out
}

// zeroChunk is never written.
var zeroChunk [tailChunk]byte

// countValid counts the chain of valid records starting at log offset off.
func countValid(segs []*segment, off int64) int {
	sl := &segList{segs: segs}
	n := 0
	for {
		seg := sl.find(off)
		if seg == nil {
			return n
		}
		size, magic, reason := recordAt(seg, off-seg.base)
		switch {
		case reason != "":
			return n
		case magic == message.MagicBlank:
			off = seg.end()
		default:
			if magic != magicHole && magic != magicPad {
				n++
			}
			off += int64(size)
		}
	}
}

// endAt makes end (in segment i) the end of the log: it zeroes non-zero
// bytes after it, removes later segments, and makes the data durable.
// lastNZ is the segment position of the last non-zero byte at or after end
// (-1: none), or -2 when not known yet.
func (l *Log) endAt(ctx context.Context, segs []*segment, i int, end int64, reason string, lastNZ int64) (int64, error) {
	r := &l.report
	seg := segs[i]
	pos := end - seg.base
	if lastNZ == -2 {
		lastNZ = int64(lastNonZero(seg.b[pos:]))
		if lastNZ >= 0 {
			lastNZ += pos
		}
	}
	if lastNZ >= 0 {
		n := lastNZ - pos + 1
		r.TornTail = &TornTail{Segment: seg.path, Offset: end, TruncatedBytes: n, Reason: reason}
		l.log.Warn("truncating torn tail", "segment", seg.path, "offset", end, "bytes", n, "reason", reason)
		if err := seg.file.ZeroRange(pos, seg.size-pos); err != nil {
			return 0, fmt.Errorf("commitlog: zero torn tail of %s at %d: %w", seg.path, pos, err)
		}
	}
	for _, s := range segs[i+1:] {
		r.RemovedSegments = append(r.RemovedSegments, s.path)
		s.retire()
		if err := l.fs.Remove(s.path); err != nil {
			return 0, fmt.Errorf("commitlog: remove segment past the end %s: %w", s.path, err)
		}
	}
	if len(segs) > i+1 {
		if err := l.fs.SyncDir(l.cfg.Dir); err != nil {
			return 0, fmt.Errorf("commitlog: sync %s: %w", l.cfg.Dir, err)
		}
	}
	segs = segs[:i+1]
	if end == seg.end() { // the last segment is sealed: start the next one
		next, err := l.createSegment(ctx, end, false)
		if err != nil {
			return 0, err
		}
		segs = append(segs, next)
	}
	l.segs.Store(&segList{segs: segs})
	l.active = segs[len(segs)-1]
	l.writeOff = end
	return end, nil
}

// lastNonZero returns the index of the last non-zero byte of b, or -1.
func lastNonZero(b []byte) int {
	var zeros [64 << 10]byte
	for hi := len(b); hi > 0; {
		lo := max(hi-len(zeros), 0)
		if !bytes.Equal(b[lo:hi], zeros[:hi-lo]) {
			for j := hi - 1; j >= lo; j-- {
				if b[j] != 0 {
					return j
				}
			}
		}
		hi = lo
	}
	return -1
}

// skipDamage saves the damaged bytes and marks them as holes so readers
// and later recoveries step over them.
func (l *Log) skipDamage(segs []*segment, e *CorruptError) error {
	dir := filepath.Join(l.cfg.StateDir, "corrupt")
	if err := l.fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("commitlog: create %s: %w", dir, err)
	}
	saved := filepath.Join(dir, fmt.Sprintf("%020d-%020d.bin", e.Offset, e.NextValid))
	var damaged []byte
	for off := e.Offset; off < e.NextValid; {
		seg := (&segList{segs: segs}).find(off)
		hi := min(e.NextValid, seg.end())
		damaged = append(damaged, seg.b[off-seg.base:hi-seg.base]...)
		off = hi
	}
	if err := fsx.WriteFileAtomic(l.fs, saved, damaged); err != nil {
		return fmt.Errorf("commitlog: save damaged range: %w", err)
	}
	for off := e.Offset; off < e.NextValid; {
		seg := (&segList{segs: segs}).find(off)
		hi := min(e.NextValid, seg.end())
		if hi-off < 8 {
			return fmt.Errorf("commitlog: damaged range [%d, %d) in %s is too short to mark; remove it by hand: %w", off, hi, seg.path, e)
		}
		p := off - seg.base
		binary.BigEndian.PutUint32(seg.b[p:], uint32(hi-off))
		binary.BigEndian.PutUint32(seg.b[p+4:], uint32(magicHole))
		if err := seg.m.Sync(int(p), 8); err != nil {
			return fmt.Errorf("commitlog: mark hole in %s: %w", seg.path, err)
		}
		off = hi
	}
	l.report.Corrupt = append(l.report.Corrupt, CorruptRange{Segment: e.Segment, Offset: e.Offset, End: e.NextValid, Reason: e.Reason, SavedTo: saved})
	return nil
}

// finishRecovery sets the offsets and writes the report.
func (l *Log) finishRecovery(start time.Time) error {
	l.loadHoles()
	r := &l.report
	sl := l.segs.Load()
	l.minOff.Store(sl.segs[0].base)
	l.committed.Store(l.writeOff)
	l.flushed.Store(l.writeOff)
	l.pendStart = l.writeOff
	l.prepareDirect(sl.last())
	r.MinOffset, r.MaxOffset = sl.segs[0].base, l.writeOff
	r.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	if l.truncating { // Truncate's recovery is not an Open: the last Open's report stays
		return nil
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	if err := fsx.WriteFileAtomic(l.fs, filepath.Join(l.cfg.StateDir, "recovery-report.json"), append(b, '\n')); err != nil {
		return fmt.Errorf("commitlog: write recovery report: %w", err)
	}
	l.log.Info("recovered", "clean", r.Clean, "min", r.MinOffset, "max", r.MaxOffset, "records", r.RecordsScanned,
		"segments", len(sl.segs), "duration", time.Since(start))
	return nil
}
