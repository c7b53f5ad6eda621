package consumequeue

import (
	"errors"
	"fmt"
	"slices"
)

// TruncatePhysical drops the trailing entries whose record ends beyond
// physEnd (the recovered commit-log end) and zeroes them on disk. It returns
// how many entries it dropped. It is meant for start-up, before consumers
// read, but is safe to call concurrently with readers.
func (q *Queue) TruncatePhysical(physEnd int64) (removed int64, err error) {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.isClosed() {
		return 0, ErrClosed
	}
	minOff, max := q.min.Load(), q.max.Load()
	l := q.files.Load()
	newMax := max
	for newMax > minOff {
		if e, _ := q.entryLocked(newMax - 1); e.End() <= physEnd {
			break
		}
		newMax--
	}
	if newMax == max {
		return 0, nil
	}
	q.rmu.Lock()
	q.max.Store(newMax)
	if p := q.pend.Load(); p != nil {
		// Clipped: later appends must not write where readers of the old
		// list may still look.
		q.pend.Store(&pending{from: p.from, entries: slices.Clip(p.entries[:newMax-p.from])})
	} else {
		err = q.zeroRange(l, newMax*EntrySize, max*EntrySize)
	}
	q.rmu.Unlock()
	q.fmu.Lock()
	q.flushed = min(q.flushed, newMax*EntrySize)
	q.fmu.Unlock()
	q.log.Info("truncated to commit-log end", "physEnd", physEnd, "max", newMax, "removed", max-newMax)
	return max - newMax, err
}

// zeroRange zeroes logical bytes [from, to) durably; the caller holds rmu.
func (q *Queue) zeroRange(l *fileList, from, to int64) error {
	for pos := from; pos < to; {
		f := l.find(pos)
		hi := min(to, f.end())
		if err := f.file.ZeroRange(pos-f.base, hi-pos); err != nil {
			return fmt.Errorf("consumequeue: zero %s: %w", f.path, err)
		}
		clear(f.b[pos-f.base : hi-f.base]) // no-op on a coherent mapping; keeps the view right otherwise
		if err := f.file.Sync(); err != nil {
			return fmt.Errorf("consumequeue: sync %s: %w", f.path, err)
		}
		pos = hi
	}
	return nil
}

// DeleteBelow deletes, oldest first, the whole files whose last entry ends
// at or below physMin (the commit log's min offset), never the last file,
// and advances MinOffset past them. Reads below the new MinOffset fail with
// ErrOffsetTooSmall. Entries of the remaining first file may still point
// below physMin.
func (q *Queue) DeleteBelow(physMin int64) (filesRemoved int, err error) {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.isClosed() {
		return 0, ErrClosed
	}
	l := q.files.Load()
	end := q.max.Load() * EntrySize
	n := 0
	for ; n < len(l.files)-1; n++ {
		f := l.files[n]
		last := min(f.end(), end) - EntrySize
		if last < f.base || last < q.min.Load()*EntrySize || decodeEntry(f.b[last-f.base:]).End() > physMin {
			break
		}
	}
	if n == 0 {
		return 0, nil
	}
	gone := l.files[:n]
	var errs []error
	q.rmu.Lock()
	q.files.Store(&fileList{files: slices.Clone(l.files[n:])})
	q.min.Store(max(q.min.Load(), l.files[n].base/EntrySize))
	for _, f := range gone {
		errs = append(errs, f.close())
	}
	q.rmu.Unlock()
	for _, f := range gone {
		errs = append(errs, q.cfg.FS.Remove(f.path))
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("consumequeue: delete below %d: %w", physMin, err)
	}
	if err := q.cfg.FS.SyncDir(q.cfg.Dir); err != nil {
		return n, fmt.Errorf("consumequeue: sync dir %s: %w", q.cfg.Dir, err)
	}
	q.log.Info("deleted files below commit-log min", "physMin", physMin, "files", n, "min", q.MinOffset())
	return n, nil
}
