package verify

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// scanChunk is how much of a segment a sequential scan reads at a time.
const scanChunk = 4 << 20

// window reads a file sequentially through a buffer of scanChunk bytes
// (more for a larger record).
type window struct {
	f    fsx.File
	size int64 // file size
	buf  []byte
	off  int64 // file position of buf[0]
}

// bytes returns up to n bytes at pos: fewer at the end of the file.
func (w *window) bytes(pos int64, n int) ([]byte, error) {
	n = int(max(0, min(int64(n), w.size-pos)))
	if pos >= w.off && pos+int64(n) <= w.off+int64(len(w.buf)) {
		return w.buf[pos-w.off : pos-w.off+int64(n)], nil
	}
	want := max(n, int(min(scanChunk, w.size-pos)))
	if cap(w.buf) < want {
		w.buf = make([]byte, want)
	}
	got, err := w.f.ReadAt(w.buf[:want], pos)
	w.buf, w.off = w.buf[:got], pos
	if got >= n {
		return w.buf[:n], nil
	}
	if err == nil {
		err = fmt.Errorf("short read: %d of %d bytes", got, want)
	}
	return nil, err
}

// segEnd says how a segment's scan ended.
type segEnd int

const (
	endSealed  segEnd = iota // the end-of-segment filler
	endZeros                 // zeros where a record should start: the data may end here
	endDamaged               // bytes that are not a valid record
	endIO                    // a read failed (already reported)
)

// checkLog scans the commit log record by record.
func (v *verifier) checkLog() {
	v.listSegments()
	l := v.log
	sum := &v.rep.CommitLog
	sum.Segments, sum.SegmentBytes = len(l.segs), l.segBytes
	if len(l.segs) == 0 {
		return
	}
	v.logMin, v.logEnd = l.segs[0].base, l.segs[0].base
	sum.MinOffset = v.logMin
	defer func() { sum.LastValidOffset = v.logEnd }()
	for i, pos := 0, int64(0); i < len(l.segs) && v.ctx.Err() == nil; {
		v.progress("commitlog: scanning %s (%d/%d)", l.segs[i].path, i+1, len(l.segs))
		how, at, reason := v.scanSegment(i, pos)
		switch how {
		case endSealed, endIO:
			i, pos = i+1, 0
			continue
		}
		next, firstNZ, lastNZ, ok := v.findValid(i, at)
		if !ok {
			return
		}
		v.reportEnd(how, i, at, reason, next, firstNZ, lastNZ)
		if next < 0 {
			return
		}
		i = l.find(next)
		pos = next - l.segs[i].base
	}
}

// reportEnd reports where the data of segment i stops at position at,
// given what follows: the next valid record (next, or -1) and the first
// and last non-zero bytes before it (-1 if none).
func (v *verifier) reportEnd(how segEnd, i int, at int64, reason string, next, firstNZ, lastNZ int64) {
	seg := v.log.segs[i]
	off := seg.base + at
	var msg string
	switch {
	case next >= 0 && how == endZeros:
		msg = fmt.Sprintf("valid data after damage: zeros where a record should start, yet a valid record follows at offset %d (%d bytes later)", next, next-off)
	case next >= 0:
		msg = fmt.Sprintf("valid data after damage: %s; the next valid record is at offset %d (%d bytes later)", reason, next, next-off)
	case how == endZeros && firstNZ < 0:
		return // the log ends here
	case how == endZeros:
		msg = fmt.Sprintf("torn tail: the data ends here (zeros) but non-zero bytes follow at offsets %d..%d with no valid record among them", firstNZ, lastNZ)
	case lastNZ >= 0:
		msg = fmt.Sprintf("torn tail: %s; no valid record follows (non-zero bytes up to offset %d)", reason, lastNZ)
	default:
		msg = fmt.Sprintf("torn tail: %s; no valid record follows", reason)
	}
	v.add(Problem{File: seg.path, Offset: off, FileOffset: at, Kind: KindRecord, Message: msg})
}

// scanSegment checks records from position pos of segment i until the
// filler, zeros, damage or a read failure, and returns which and where.
func (v *verifier) scanSegment(i int, pos int64) (how segEnd, at int64, reason string) {
	l, seg := v.log, v.log.segs[i]
	f, err := v.fsys.OpenFile(seg.path, os.O_RDONLY, 0)
	if err != nil {
		v.addf(KindIO, seg.path, 0, "cannot open segment: %v", err)
		return endIO, 0, ""
	}
	defer f.Close()
	w := &window{f: f, size: seg.size}
	sum := &v.rep.CommitLog
	for n := 0; ; n++ {
		if n%4096 == 0 && v.ctx.Err() != nil {
			return endIO, pos, ""
		}
		head, err := w.bytes(pos, message.BlankSize)
		if err != nil {
			v.addReadErr(seg, pos, err)
			return endIO, pos, ""
		}
		if len(head) < message.BlankSize {
			head = nil
		}
		if r := headReason(head, pos, l.segBytes, seg.size); r != "" {
			if head != nil && head[0]|head[1]|head[2]|head[3]|head[4]|head[5]|head[6]|head[7] == 0 {
				return endZeros, pos, r
			}
			return endDamaged, pos, r
		}
		size, magic, _ := message.RecordSize(head)
		switch magic {
		case message.MagicBlank:
			return endSealed, pos, ""
		case magicHole:
			sum.Holes++
			v.holes = append(v.holes, [2]int64{seg.base + pos, seg.base + pos + int64(size)})
			pos += int64(size)
			continue
		case magicPad:
			pos += int64(size)
			continue
		}
		rec, err := w.bytes(pos, int(size))
		if err != nil {
			v.addReadErr(seg, pos, err)
			return endIO, pos, ""
		}
		if err := message.Check(rec, seg.base+pos, true); err != nil {
			return endDamaged, pos, err.Error()
		}
		sum.Records++
		sum.Bytes += int64(size)
		v.noteQueued(rec, seg.base+pos)
		pos += int64(size)
		v.logEnd = seg.base + pos
	}
}

func (v *verifier) addReadErr(seg segment, pos int64, err error) {
	v.add(Problem{File: seg.path, Offset: seg.base + pos, FileOffset: pos, Kind: KindIO, Message: fmt.Sprintf("read failed: %v", err)})
}

var (
	magicV1Bytes = []byte{0xDA, 0xA3, 0x20, 0xA7} // message.MagicV1, big-endian
	zeroChunk    [64 << 10]byte
)

// findValid looks for the first valid record after position pos of
// segment i (where the data stopped), there and in the later segments. A
// candidate has the V1 magic and its own offset as PHYSICALOFFSET, and must
// pass recordAt. It returns the candidate's log offset (-1 if none) and the
// log offsets of the first and last non-zero bytes from pos on (-1 if
// none; lastNZ only when there is no candidate). ok is false when ctx ended
// the search or a read failed (reported).
func (v *verifier) findValid(i int, pos int64) (next, firstNZ, lastNZ int64, ok bool) {
	l := v.log
	firstNZ, lastNZ = -1, -1
	if v.findBuf == nil {
		v.findBuf = make([]byte, scanChunk+64) // 64: room to read a candidate's PHYSICALOFFSET past the chunk
	}
	buf := v.findBuf
	after := l.segs[i].base + pos // candidates must start after it
	for ; i < len(l.segs); i, pos = i+1, 0 {
		seg := l.segs[i]
		for lo := pos; lo < seg.size; lo += scanChunk {
			if v.ctx.Err() != nil {
				return -1, -1, -1, false
			}
			n, err := l.readAt(i, buf, lo)
			if err != nil {
				v.addReadErr(seg, lo, err)
				return -1, -1, -1, false
			}
			b := buf[:n]
			hi := min(int64(n), scanChunk) // the chunk proper: b[:hi]
			fnz, lnz := nonZeroSpan(b[:hi])
			if fnz < 0 {
				continue
			}
			if firstNZ < 0 {
				firstNZ = seg.base + lo + int64(fnz)
			}
			if next := v.candidate(i, b, lo, hi, after); next >= 0 {
				return next, firstNZ, lastNZ, true
			}
			lastNZ = seg.base + lo + int64(lnz)
		}
	}
	return -1, firstNZ, lastNZ, true
}

// candidate returns the log offset of the first valid record whose magic
// starts in b[:hi] (b holds segment i from position lo) and that starts
// after log offset after, or -1.
func (v *verifier) candidate(i int, b []byte, lo, hi, after int64) int64 {
	l := v.log
	base := l.segs[i].base
	for from := int64(0); from < hi; {
		j := bytes.Index(b[from:min(hi+3, int64(len(b)))], magicV1Bytes)
		if j < 0 {
			return -1
		}
		m := from + int64(j) // magic at b[m]
		from = m + 1
		c := lo + m - 4 // candidate start, segment position; may lie in the previous chunk
		if base+c <= after || m+32 > int64(len(b)) || int64(binary.BigEndian.Uint64(b[m+24:])) != base+c {
			continue
		}
		if _, reason, err := l.recordAt(base+c, 0); err == nil && reason == "" {
			return base + c
		}
	}
	return -1
}

// nonZeroSpan returns the positions of the first and last non-zero bytes
// of b, or -1, -1.
func nonZeroSpan(b []byte) (first, last int) {
	first = -1
	for lo := 0; lo < len(b); lo += len(zeroChunk) {
		hi := min(lo+len(zeroChunk), len(b))
		if bytes.Equal(b[lo:hi], zeroChunk[:hi-lo]) {
			continue
		}
		if first < 0 {
			for k := lo; k < hi; k++ {
				if b[k] != 0 {
					first = k
					break
				}
			}
		}
		for k := hi - 1; k >= lo; k-- {
			if b[k] != 0 {
				last = k
				break
			}
		}
	}
	if first < 0 {
		return -1, -1
	}
	return first, last
}
