package consumequeue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/gantrymq/gantry/internal/fsx"
)

// scanFiles is how many trailing files recovery scans entry by entry;
// earlier files are full by construction (a file is created only when the
// previous one is full and durable).
const scanFiles = 3

// diskFile is a file found at Open.
type diskFile struct {
	base int64
	path string
	size int64
}

// recover finds the queue's files, its min and max offsets, zeroes what
// lies after the end and maps the files it keeps.
func (q *Queue) recover(ctx context.Context) error {
	found, err := q.listFiles()
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return nil
	}
	found, removed := q.cutAtGap(found)
	r := &scan{q: q, files: found, buf: make([]byte, q.fileBytes)}
	if err := r.run(ctx); err != nil {
		return err
	}
	info, err := r.repair(removed)
	if err != nil {
		return err
	}
	for _, d := range r.files {
		f, err := mapFile(q.cfg.FS, q.cfg.Dir, d.base, q.fileBytes)
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
	q.log.Info("recovered", "files", info.Files, "min", info.MinOffset, "max", info.MaxOffset, "truncated", info.TruncatedEntries)
	return nil
}

// listFiles returns the queue files in Dir, oldest first, checking names and sizes.
func (q *Queue) listFiles() ([]diskFile, error) {
	names, err := q.cfg.FS.ReadDir(q.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("consumequeue: list %s: %w", q.cfg.Dir, err)
	}
	var found []diskFile
	for _, name := range names {
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
	q      *Queue
	files  []diskFile
	buf    []byte
	minPos int64 // logical byte offset of the first real entry
	endPos int64 // logical byte offset just past the last valid entry
}

func (r *scan) read(d diskFile) ([]byte, error) {
	f, err := r.q.cfg.FS.OpenFile(d.path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("consumequeue: open %s: %w", d.path, err)
	}
	defer f.Close()
	b := r.buf[:d.size]
	if n, err := f.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
		return nil, fmt.Errorf("consumequeue: read %s: %w", d.path, err)
	}
	return b, nil
}

// run sets minPos and endPos. Leading placeholders of the first file come
// before minPos; files before the last scanFiles that are full-sized are
// taken as full of valid entries.
func (r *scan) run(ctx context.Context) error {
	fb := int64(r.q.fileBytes)
	scanFrom := max(0, len(r.files)-scanFiles)
	for i, d := range r.files[:scanFrom] {
		if d.size != fb {
			scanFrom = i
			break
		}
	}
	r.minPos = r.files[0].base
	leading := true
	for i, d := range r.files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if i > 0 && i < scanFrom {
			leading = false
			continue
		}
		b, err := r.read(d)
		if err != nil {
			return err
		}
		n := len(b) - len(b)%EntrySize
		for off := 0; off < n; off += EntrySize {
			e := decodeEntry(b[off:])
			if leading && e.isPlaceholder() {
				r.minPos = d.base + int64(off) + EntrySize
				continue
			}
			leading = false
			if i < scanFrom { // first file, not scanned past its placeholders
				break
			}
			if !e.Valid() || e.isPlaceholder() {
				r.endPos = d.base + int64(off)
				return nil
			}
		}
		if i >= scanFrom && int64(n) < fb {
			r.endPos = d.base + int64(n) // short file: the entries it lacks never made it
			return nil
		}
	}
	r.endPos = r.files[len(r.files)-1].base + fb
	return nil
}

// repair zeroes everything after endPos, extends a short end file, removes
// files wholly after endPos (and those behind a gap), and keeps in r.files
// the files that remain.
func (r *scan) repair(gapFiles []diskFile) (RecoveryInfo, error) {
	var info RecoveryInfo
	fsys, fb := r.q.cfg.FS, int64(r.q.fileBytes)
	var keep, drop []diskFile
	for _, d := range r.files {
		if d.base <= r.endPos {
			keep = append(keep, d)
		} else {
			drop = append(drop, d)
		}
	}
	drop = append(drop, gapFiles...)
	validAfter := false
	for _, d := range drop {
		b, err := r.read(d)
		if err != nil {
			return info, err
		}
		n, v := countAfter(b)
		info.TruncatedEntries += n
		validAfter = validAfter || v
	}
	if last := keep[len(keep)-1]; last.base+fb > r.endPos {
		n, v, err := r.zeroTail(fsys, last)
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
	r.files = keep
	return info, nil
}

// zeroTail zeroes the end file after endPos and extends it to full size,
// durably, so a later crash cannot resurrect stale entries.
func (r *scan) zeroTail(fsys fsx.FS, d diskFile) (n int64, validAfter bool, err error) {
	b, err := r.read(d)
	if err != nil {
		return 0, false, err
	}
	from := r.endPos - d.base
	n, validAfter = countAfter(b[min(from, int64(len(b))):])
	dirty := !isZero(b[min(from, int64(len(b))):])
	if !dirty && d.size == int64(r.q.fileBytes) {
		return n, validAfter, nil
	}
	f, err := fsys.OpenFile(d.path, os.O_RDWR, 0)
	if err != nil {
		return 0, false, fmt.Errorf("consumequeue: open %s: %w", d.path, err)
	}
	defer f.Close()
	if dirty {
		if err := f.ZeroRange(from, d.size-from); err != nil {
			return 0, false, fmt.Errorf("consumequeue: zero %s from %d: %w", d.path, from, err)
		}
	}
	if d.size < int64(r.q.fileBytes) {
		if err := f.Allocate(0, int64(r.q.fileBytes)); err != nil {
			return 0, false, fmt.Errorf("consumequeue: allocate %s: %w", d.path, err)
		}
	}
	if err := f.Sync(); err != nil {
		return 0, false, fmt.Errorf("consumequeue: sync %s: %w", d.path, err)
	}
	return n, validAfter, nil
}

// countAfter counts the non-zero entry slots of b (a partial trailing slot
// counts) and reports whether any of them is a valid entry.
func countAfter(b []byte) (n int64, valid bool) {
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
