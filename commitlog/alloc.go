package commitlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gantrymq/gantry/internal/fsx"
)

type allocResult struct {
	base int64
	seg  *segment
	err  error
}

// allocLoop creates segments ahead of time, so that a roll never waits for
// fallocate, zero-filling or page faults.
func (l *Log) allocLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case base := <-l.allocReq:
			seg, err := l.createSegment(ctx, base, true)
			select {
			case l.allocRes <- allocResult{base: base, seg: seg, err: err}:
			case <-ctx.Done():
				if seg != nil {
					seg.retire()
				}
				return
			}
		}
	}
}

// requestSegmentLocked asks the allocator for the segment after the active
// one, unless a request is outstanding. l.mu is held.
func (l *Log) requestSegmentLocked() {
	if l.allocPending {
		return
	}
	l.allocPending = true
	l.allocReq <- l.active.end()
}

// allocRetry is how long rolls fail at once with the last error after a
// segment could not be had, instead of each trying again: under a burst of
// sends every append would otherwise repeat the failing create (and log
// it), thousands of times a second, while the disk is full or the
// directory is gone.
const allocRetry = time.Second

// nextSegmentLocked returns the preallocated segment after the active one,
// asking again once if the ahead-of-time attempt failed (space may have
// returned since). After a failure it fails at once with the same error
// for allocRetry. l.mu is held.
func (l *Log) nextSegmentLocked(ctx context.Context) (*segment, error) {
	if l.allocFailed != nil && l.cfg.Now().Before(l.allocRetryAt) {
		return nil, l.allocFailed
	}
	want := l.active.end()
	for attempt := 0; ; attempt++ {
		l.requestSegmentLocked()
		var r allocResult
		select {
		case r = <-l.allocRes:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.done:
			return nil, ErrClosed
		}
		l.allocPending = false
		switch {
		case r.err == nil && r.base == want:
			l.allocFailed = nil
			return r.seg, nil
		case r.err == nil:
			r.seg.retire() // stale: cannot happen while appends hold l.mu, but never use a wrong segment
			continue
		case attempt == 0:
			continue
		default:
			l.allocFailed, l.allocRetryAt = r.err, l.cfg.Now().Add(allocRetry)
			return nil, r.err
		}
	}
}

// createSegment creates, preallocates, syncs and maps the segment at base,
// and in mapped mode pre-faults its first PrefaultAhead bytes when populate
// is set (the background allocator: a roll then lands in mapped pages;
// recovery leaves it to the pre-faulter so that Open stays fast).
func (l *Log) createSegment(ctx context.Context, base int64, populate bool) (*segment, error) {
	path := filepath.Join(l.cfg.Dir, segmentName(base))
	size := l.cfg.SegmentBytes
	if err := fsx.CheckRoom(l.fs, l.cfg.Dir, size); err != nil { // a failing fallocate would take every free byte meanwhile
		return nil, l.allocErr(path, "fallocate", err)
	}
	f, err := l.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, l.allocErr(path, "create", err)
	}
	fail := func(op string, err error) (*segment, error) {
		f.Close()
		l.fs.Remove(path)
		return nil, l.allocErr(path, op, err)
	}
	if err := f.Allocate(0, size); err != nil {
		return fail("fallocate", err)
	}
	if *l.cfg.ZeroFillAhead {
		if err := zeroFill(ctx, f, size); err != nil {
			return fail("zero-fill", err)
		}
	}
	if err := f.Sync(); err != nil {
		return fail("sync", err)
	}
	if err := l.fs.SyncDir(l.cfg.Dir); err != nil {
		return fail("sync dir", err)
	}
	m, err := f.Map(int(size))
	if err != nil {
		return fail("map", err)
	}
	// A new segment is written and read in order, in bulk: huge pages
	// (fsx.Mapping.Huge). Not with writeDirect or writeHybrid, which write
	// with pwrite so that no page is zeroed ahead of the writes, where a
	// reader's fault would fill a 2 MiB folio. Segments reopened at startup
	// are not asked either: what is read of them is mostly read once, and
	// a cold fault would read 2-4 MiB.
	if l.cfg.writeMode == writeMapped || l.cfg.writeMode == writeBuffered && !l.directOn.Load() {
		if err := m.Huge(0, int(size)); err != nil {
			l.log.Debug("huge page advice failed", "segment", path, "err", err)
		}
	}
	seg := &segment{base: base, size: size, path: path, file: f, m: m, b: m.Bytes()}
	l.prepareDirect(seg)
	if populate && l.prefaultNext.Load() && l.cfg.writeMode != writeBuffered { // whose window follows small writes only
		if _, err := l.populate(ctx, seg, 0, min(l.cfg.PrefaultAhead, size)); err != nil {
			l.log.Warn("pre-fault of new segment failed; appends will take page faults", "segment", seg.path, "err", err)
		}
	}
	return seg, nil
}

// prefaultLoop keeps the PrefaultAhead bytes after the append position
// pre-faulted: each kick (an append that came within half a window of the
// last target) pre-faults from where the writes or the last pass ended to
// the new target, within the active segment (the allocator pre-faults the
// start of the next one). Pages already written need nothing.
func (l *Log) prefaultLoop(ctx context.Context) {
	var done int64 // where the last pass ended
	first, warned := true, false
	for {
		select {
		case <-ctx.Done():
			if first {
				close(l.prefaulted)
			}
			return
		case <-l.prefaultKick:
		}
		l.mu.Lock()
		from, to := max(l.writeOff, done), l.prefaultTo
		l.mu.Unlock()
		for from < to && ctx.Err() == nil && l.prefaultNext.Load() {
			seg := l.segs.Load().find(from)
			if seg == nil || !seg.acquire() {
				break // past the active segment (not rolled to yet), or deleted
			}
			end := min(to, seg.end())
			reached, err := l.populate(ctx, seg, from-seg.base, end-seg.base)
			seg.release()
			if err != nil {
				if !warned {
					l.log.Warn("pre-fault failed; appends will take page faults", "segment", seg.path, "err", err)
					warned = true
				}
				break
			}
			from = seg.base + reached
			if from < end {
				break // stopped: a writeHybrid decision against the window
			}
		}
		done = from
		if first {
			first = false
			close(l.prefaulted)
		}
	}
}

// populate pre-faults [from, to) of seg in chunks, stopping early when
// ctx ends or a writeHybrid decision turned the window off, and returns
// where it got to. The chunks are small because the kernel holds the
// process's mmap lock for a whole madvise call: with 64 MiB chunks, mmap
// calls elsewhere (a new consume-queue file) waited behind it long enough
// to delay dispatch after start-up; a 4 MiB chunk holds it briefly
// (docs/decisions/0023-commit-log-chooses-how-it-writes.md).
func (l *Log) populate(ctx context.Context, seg *segment, from, to int64) (int64, error) {
	const chunk = 4 << 20
	w := l.writer(seg)
	off := from
	for ; off < to && ctx.Err() == nil && l.prefaultNext.Load(); off += min(chunk, to-off) {
		if err := w.Populate(int(off), int(min(chunk, to-off))); err != nil {
			return off, err
		}
	}
	return off, nil
}

// zeroFill writes zeros over [0, size) so the extents are written, not
// merely allocated.
func zeroFill(ctx context.Context, f interface {
	WriteAt([]byte, int64) (int, error)
}, size int64) error {
	zeros := zeroBuf[:]
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(int64(len(zeros)), size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
	}
	return nil
}

// zeroBuf is never written: a source of zeros for zeroFill.
var zeroBuf [1 << 20]byte

func (l *Log) allocErr(path, op string, err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("commitlog: %s segment %s: %w", op, path, err)
	}
	if errors.Is(err, syscall.ENOSPC) {
		l.log.Warn("cannot allocate next segment: no space", "segment", path, "op", op, "err", err)
		return fmt.Errorf("%w: %s segment %s: %w", ErrDiskFull, op, path, err)
	}
	l.log.Error("cannot allocate next segment", "segment", path, "op", op, "err", err)
	return fmt.Errorf("commitlog: %s segment %s: %w", op, path, err)
}
