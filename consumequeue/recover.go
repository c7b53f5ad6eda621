package consumequeue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gantrymq/gantry/internal/fsx"
)

// scanFiles is how many trailing files recovery scans entry by entry
// without a hint; earlier files are full by construction (a file is
// created only when the previous one is full and durable).
const scanFiles = 3

// scanChunk is how many bytes recovery reads at a time: a whole number of
// entries.
const scanChunk = 64 << 10 / EntrySize * EntrySize

// diskFile is a file found at Open.
type diskFile struct {
	base int64
	path string
	size int64
}

// recover finds the queue's files, its min and max offsets, zeroes what
// lies after the end and maps the files it keeps. It reads the entries
// after the hint (or in the last scanFiles files without one) and, after
// the end, only the parts of the files that hold data: an empty queue's
// recovery reads a few bytes, not its 6 MB file.
func (q *Queue) recover(ctx context.Context) error {
	found, err := q.listFiles()
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return nil
	}
	found, removed := q.cutAtGap(found)
	r := &scan{q: q, files: found, handles: make([]fsx.File, len(found))}
	defer r.close()
	if err := r.run(ctx); err != nil {
		return err
	}
	info, err := r.repair(ctx, removed)
	if err != nil {
		return err
	}
	for i, d := range r.files {
		h, err := r.handle(i)
		if err != nil {
			return err
		}
		r.handles[i] = nil // mapFile takes it
		reserved := q.fileBytes
		if d.base+int64(q.fileBytes) > r.endPos {
			// Written (or placeholder) bytes have blocks; from the last
			// written page on, the next append reserves again.
			reserved = int(max(r.endPos-d.base, 0)) / fsx.PageSize * fsx.PageSize
		}
		f, err := mapFile(q.cfg.FS, q.cfg.Dir, h, d.base, q.fileBytes, reserved)
		if err != nil {
			return err
		}
		l := q.files.Load()
		q.files.Store(&fileList{files: append(slices.Clip(l.files), f)})
	}
	q.min.Store(r.minPos / EntrySize)
	q.max.Store(r.endPos / EntrySize)
	q.flushed = r.endPos
	info.Files = len(r.files)
	info.MinOffset, info.MaxOffset = q.MinOffset(), q.MaxOffset()
	q.recovery = info
	q.scanInfo = ScanInfo{Bytes: r.scanned, Trusted: r.trusted}
	q.log.Debug("recovered", "files", info.Files, "min", info.MinOffset, "max", info.MaxOffset,
		"truncated", info.TruncatedEntries, "readBytes", r.scanned, "trusted", r.trusted)
	return nil
}

// listFiles returns the queue files in Dir, oldest first, checking names and sizes.
func (q *Queue) listFiles() ([]diskFile, error) {
	names, err := q.cfg.FS.ReadDir(q.cfg.Dir)
	if errors.Is(err, fs.ErrNotExist) && q.cfg.DeferCreate {
		return nil, nil // a new queue: Materialize creates the directory
	}
	if err != nil {
		return nil, fmt.Errorf("consumequeue: list %s: %w", q.cfg.Dir, err)
	}
	var found []diskFile
	for _, name := range names {
		if strings.HasSuffix(name, creatingSuffix) { // a crash during Materialize: it held no durable entry
			path := filepath.Join(q.cfg.Dir, name)
			if err := q.cfg.FS.Remove(path); err != nil {
				return nil, fmt.Errorf("consumequeue: remove %s: %w", path, err)
			}
			continue
		}
		base, ok := parseFileName(name)
		if !ok {
			continue
		}
		path := filepath.Join(q.cfg.Dir, name)
		st, err := q.cfg.FS.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("consumequeue: stat %s: %w", path, err)
		}
		if st.IsDir {
			continue
		}
		if base%int64(q.fileBytes) != 0 || st.Size > int64(q.fileBytes) {
			return nil, fmt.Errorf("consumequeue: file %s (%d bytes) does not fit %d-byte files: was EntriesPerFile changed?", path, st.Size, q.fileBytes)
		}
		found = append(found, diskFile{base: base, path: path, size: st.Size})
	}
	slices.SortFunc(found, func(a, b diskFile) int { return compareInt64(a.base, b.base) })
	return found, nil
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cutAtGap keeps the files up to the first missing one; the rest are
// returned for removal.
func (q *Queue) cutAtGap(found []diskFile) (kept, removed []diskFile) {
	for i := 1; i < len(found); i++ {
		if found[i].base != found[i-1].base+int64(q.fileBytes) {
			q.log.Warn("missing file: queue ends before it", "after", found[i-1].path, "next", found[i].path)
			return found[:i], found[i:]
		}
	}
	return found, nil
}

// scan walks the entries of the found files to find the queue's bounds.
type scan struct {
	q       *Queue
	files   []diskFile
	handles []fsx.File // files[i] opened, or nil
	buf     []byte
	minPos  int64 // logical byte offset of the first real entry
	endPos  int64 // logical byte offset just past the last valid entry
	scanned int64 // bytes read
	trusted bool  // a clean hint gave endPos: nothing after it to check
}

// handle returns files[i] opened for reading and writing.
func (r *scan) handle(i int) (fsx.File, error) {
	if r.handles[i] == nil {
		f, err := r.q.cfg.FS.OpenFile(r.files[i].path, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("consumequeue: open %s: %w", r.files[i].path, err)
		}
		r.handles[i] = f
	}
	return r.handles[i], nil
}

func (r *scan) close() {
	for i, f := range r.handles {
		if f != nil {
			f.Close()
			r.handles[i] = nil
		}
	}
}

// readAt reads up to n bytes of files[i] at off (fewer at its end) into
// the scan's buffer.
func (r *scan) readAt(i int, off int64, n int) ([]byte, error) {
	f, err := r.handle(i)
	if err != nil {
		return nil, err
	}
	if r.buf == nil {
		r.buf = make([]byte, scanChunk)
	}
	n = int(min(int64(n), r.files[i].size-off))
	if n <= 0 {
		return nil, nil
	}
	b := r.buf[:n]
	got, err := f.ReadAt(b, off)
	r.scanned += int64(got)
	if err != nil && !(errors.Is(err, io.EOF) && got == len(b)) {
		return nil, fmt.Errorf("consumequeue: read %s: %w", r.files[i].path, err)
	}
	return b, nil
}

// fileAt returns the index of the file holding logical byte pos, or -1.
func (r *scan) fileAt(pos int64) int {
	if pos < r.files[0].base {
		return -1
	}
	i := (pos - r.files[0].base) / int64(r.q.fileBytes)
	if i >= int64(len(r.files)) {
		return -1
	}
	return int(i)
}

// entryAt reads the entry at logical byte pos; ok is false when no file
// holds all of it.
func (r *scan) entryAt(pos int64) (e Entry, ok bool, err error) {
	i := r.fileAt(pos)
	if i < 0 {
		return Entry{}, false, nil
	}
	b, err := r.readAt(i, pos-r.files[i].base, EntrySize)
	if err != nil || len(b) < EntrySize {
		return Entry{}, false, err
	}
	return decodeEntry(b), true, nil
}

// walk decodes the entries from logical byte pos on, file after file, and
// returns the position of the first one stop accepts, or where the files
// end: the end of a short file (the entries it lacks never made it) or of
// the last one.
func (r *scan) walk(ctx context.Context, pos int64, stop func(Entry) bool) (int64, error) {
	fb := int64(r.q.fileBytes)
	chunk := int64(EntrySize) // doubling: a queue of a few entries reads a few entries
	for {
		i := r.fileAt(pos)
		if i < 0 {
			return pos, nil
		}
		d := r.files[i]
		limit := d.size - d.size%EntrySize
		for off := pos - d.base; off < limit; {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			b, err := r.readAt(i, off, int(min(chunk, limit-off)))
			chunk = min(2*chunk, scanChunk)
			if err != nil {
				return 0, err
			}
			for j := 0; j+EntrySize <= len(b); j += EntrySize {
				if stop(decodeEntry(b[j:])) {
					return d.base + off + int64(j), nil
				}
			}
			off += int64(len(b))
		}
		if limit < fb {
			return d.base + limit, nil
		}
		pos = d.base + fb
	}
}

// run sets minPos and endPos. Leading placeholders come before minPos.
// The end is found from the hint when the files agree with it: at it for
// a clean one, else by scanning from it; without one, by scanning the last
// scanFiles files (files before them that are full-sized are taken as
// full of valid entries).
func (r *scan) run(ctx context.Context) error {
	var err error
	r.minPos, err = r.walk(ctx, r.files[0].base, func(e Entry) bool { return !e.isPlaceholder() })
	if err != nil {
		return err
	}
	hint := r.q.cfg.Hint
	hp := int64(-1)
	if hint.MaxOffset > 0 && hint.MaxOffset <= math.MaxInt64/EntrySize {
		hp = hint.MaxOffset * EntrySize
	}
	if hint.Clean && hp >= 0 {
		ok, err := r.cleanEnd(hp)
		if err != nil {
			return err
		}
		if ok {
			r.endPos, r.trusted = hp, true
			return nil
		}
		r.q.log.Warn("queue files disagree with the clean-close hint; scanning them", "hint", hint.MaxOffset)
	}
	fb := int64(r.q.fileBytes)
	scanFrom := max(0, len(r.files)-scanFiles)
	for i, d := range r.files[:scanFrom] {
		if d.size != fb {
			scanFrom = i
			break
		}
	}
	start := r.files[scanFrom].base
	if hp > start {
		ok, err := r.hintHolds(hp)
		if err != nil {
			return err
		}
		if ok {
			start = hp
		}
	}
	r.endPos, err = r.walk(ctx, max(start, r.minPos), func(e Entry) bool { return !e.Valid() || e.isPlaceholder() })
	return err
}

// hintHolds reports whether the entries below logical byte hp can be
// trusted: every file before it is whole up to it, and the entry just
// before it is a valid one after minPos.
func (r *scan) hintHolds(hp int64) (bool, error) {
	if hp <= r.minPos {
		return false, nil
	}
	for _, d := range r.files {
		if d.base >= hp {
			break
		}
		if d.size < min(int64(r.q.fileBytes), hp-d.base) {
			return false, nil
		}
	}
	e, ok, err := r.entryAt(hp - EntrySize)
	if err != nil || !ok {
		return false, err
	}
	return e.Valid() && !e.isPlaceholder(), nil
}

// cleanEnd reports whether the queue can end at logical byte hp, a clean
// close's hint, without a scan: the entries below it hold (hintHolds, or
// hp is minPos), the slot at hp is unused, no file lies wholly after it and
// the last file is full-sized.
func (r *scan) cleanEnd(hp int64) (bool, error) {
	last := r.files[len(r.files)-1]
	fb := int64(r.q.fileBytes)
	if hp < r.minPos || hp < last.base || hp > last.base+fb || last.size != fb {
		return false, nil
	}
	if hp > r.minPos {
		if ok, err := r.hintHolds(hp); err != nil || !ok {
			return false, err
		}
	}
	if hp == last.base+fb {
		return true, nil
	}
	i := len(r.files) - 1
	b, err := r.readAt(i, hp-last.base, EntrySize)
	if err != nil {
		return false, err
	}
	return len(b) == EntrySize && isZero(b), nil
}

// repair zeroes everything after endPos, extends a short end file, removes
// files wholly after endPos (and those behind a gap), and keeps in r.files
// the files that remain. After a clean close's end (trusted) there is
// nothing to do.
func (r *scan) repair(ctx context.Context, gapFiles []diskFile) (RecoveryInfo, error) {
	var info RecoveryInfo
	if r.trusted {
		return info, nil
	}
	fsys, fb := r.q.cfg.FS, int64(r.q.fileBytes)
	keep := len(r.files)
	for i, d := range r.files {
		if d.base > r.endPos {
			keep = i
			break
		}
	}
	validAfter := false
	for i := keep; i < len(r.files); i++ {
		n, v, err := r.clearAfter(ctx, i, 0, false)
		if err != nil {
			return info, err
		}
		info.TruncatedEntries += n
		validAfter = validAfter || v
	}
	for _, d := range gapFiles {
		n, v, err := r.countGapFile(ctx, d)
		if err != nil {
			return info, err
		}
		info.TruncatedEntries += n
		validAfter = validAfter || v
	}
	if last := keep - 1; r.files[last].base+fb > r.endPos {
		n, v, err := r.zeroTail(ctx, last)
		if err != nil {
			return info, err
		}
		info.TruncatedEntries += n
		validAfter = validAfter || v
	}
	if validAfter {
		r.q.log.Warn("invalid entry followed by valid ones: queue ends there (consume queues are rebuilt from the commit log)",
			"offset", r.endPos/EntrySize)
	} else if info.TruncatedEntries > 0 {
		r.q.log.Warn("torn tail truncated", "offset", r.endPos/EntrySize, "entries", info.TruncatedEntries)
	}
	drop := slices.Clone(gapFiles)
	for i := keep; i < len(r.files); i++ {
		drop = append(drop, r.files[i])
		if f := r.handles[i]; f != nil {
			f.Close()
			r.handles[i] = nil
		}
	}
	for _, d := range drop {
		if err := fsys.Remove(d.path); err != nil {
			return info, fmt.Errorf("consumequeue: remove %s: %w", d.path, err)
		}
	}
	if len(drop) > 0 {
		if err := fsys.SyncDir(r.q.cfg.Dir); err != nil {
			return info, fmt.Errorf("consumequeue: sync dir %s: %w", r.q.cfg.Dir, err)
		}
	}
	r.files, r.handles = r.files[:keep], r.handles[:keep]
	return info, nil
}

// countGapFile counts the non-zero slots of a file behind a gap, which
// is removed.
func (r *scan) countGapFile(ctx context.Context, d diskFile) (int64, bool, error) {
	g := &scan{q: r.q, files: []diskFile{d}, handles: make([]fsx.File, 1), buf: r.buf}
	defer g.close()
	n, v, err := g.clearAfter(ctx, 0, 0, false)
	r.scanned += g.scanned
	return n, v, err
}

// zeroTail zeroes the end file after endPos and extends it to full size
// (sparse), durably, so a later crash cannot resurrect stale entries.
func (r *scan) zeroTail(ctx context.Context, i int) (n int64, validAfter bool, err error) {
	d := r.files[i]
	n, validAfter, err = r.clearAfter(ctx, i, r.endPos-d.base, true)
	if err != nil {
		return 0, false, err
	}
	f, err := r.handle(i)
	if err != nil {
		return 0, false, err
	}
	if d.size < int64(r.q.fileBytes) {
		if err := f.Truncate(int64(r.q.fileBytes)); err != nil {
			return 0, false, fmt.Errorf("consumequeue: extend %s: %w", d.path, err)
		}
		r.files[i].size = int64(r.q.fileBytes)
	}
	if n > 0 || d.size < int64(r.q.fileBytes) {
		if err := f.Sync(); err != nil {
			return 0, false, fmt.Errorf("consumequeue: sync %s: %w", d.path, err)
		}
	}
	return n, validAfter, nil
}

// clearAfter counts the non-zero entry slots of files[i] from byte from on
// (a partial trailing slot counts) and reports whether any of them is a
// valid entry; with zero, it zeroes the chunks that hold them. It reads
// only the parts of the file that hold data (SEEK_DATA), not its holes or
// (on ext4) its reserved blocks never written.
func (r *scan) clearAfter(ctx context.Context, i int, from int64, zero bool) (n int64, valid bool, err error) {
	f, err := r.handle(i)
	if err != nil {
		return 0, false, err
	}
	size := r.files[i].size
	for _, rg := range dataRegions(f, from, size) {
		// Whole slots: a region starts at a page, not at an entry.
		lo := from + (rg[0]-from)/EntrySize*EntrySize
		hi := min(size, from+roundUp64(rg[1]-from, EntrySize))
		for off := lo; off < hi; {
			if err := ctx.Err(); err != nil {
				return 0, false, err
			}
			b, err := r.readAt(i, off, int(min(scanChunk, hi-off)))
			if err != nil {
				return 0, false, err
			}
			if len(b) == 0 {
				break
			}
			k, v := countNonZero(b)
			n += k
			valid = valid || v
			if k > 0 && zero {
				if err := f.ZeroRange(off, int64(len(b))); err != nil {
					return 0, false, fmt.Errorf("consumequeue: zero %s from %d: %w", r.files[i].path, off, err)
				}
			}
			off += int64(len(b))
		}
	}
	return n, valid, nil
}

func roundUp64(n, unit int64) int64 { return (n + unit - 1) / unit * unit }

// seeker finds a file's data and holes (lseek SEEK_DATA, SEEK_HOLE); the
// OS filesystem's files have it.
type seeker interface {
	SeekData(off int64) (int64, error)
	SeekHole(off int64) (int64, error)
}

// dataRegions returns the ranges of [from, to) of f that may hold data, in
// order: all of it when f cannot tell.
func dataRegions(f fsx.File, from, to int64) [][2]int64 {
	if from >= to {
		return nil
	}
	sk, ok := f.(seeker)
	if !ok {
		return [][2]int64{{from, to}}
	}
	var out [][2]int64
	for off := from; off < to; {
		lo, err := sk.SeekData(off)
		if err != nil {
			return [][2]int64{{off, to}} // cannot tell: read the rest
		}
		if lo >= to {
			break
		}
		hi, err := sk.SeekHole(lo)
		if err != nil {
			hi = to
		}
		hi = min(hi, to)
		out = append(out, [2]int64{lo, hi})
		off = hi
	}
	return out
}

// countNonZero counts the non-zero entry slots of b (a partial trailing
// slot counts) and reports whether any of them is a valid entry.
func countNonZero(b []byte) (n int64, valid bool) {
	for off := 0; off < len(b); off += EntrySize {
		s := b[off:min(off+EntrySize, len(b))]
		if isZero(s) {
			continue
		}
		n++
		if len(s) == EntrySize && decodeEntry(s).Valid() {
			valid = true
		}
	}
	return n, valid
}
