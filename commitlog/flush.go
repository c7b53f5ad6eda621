package commitlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/gantrymq/gantry/internal/failpoint"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// waiter is a SyncFlush appender waiting for its records to be durable.
type waiter struct {
	end int64
	ch  chan error // buffered: the flusher never blocks on it
}

var waiterPool = sync.Pool{New: func() any { return &waiter{ch: make(chan error, 1)} }}

// addWaiter registers a waiter for end. l.mu is held, so waiters are added
// in offset order.
func (l *Log) addWaiter(end int64) *waiter {
	w := waiterPool.Get().(*waiter)
	w.end = end
	l.wmu.Lock()
	l.waiters = append(l.waiters, w)
	l.wmu.Unlock()
	return w
}

// wait blocks until w's records are durable, the flush fails, the
// SyncFlushTimeout passes or ctx ends.
func (l *Log) wait(ctx context.Context, w *waiter) error {
	timer := time.NewTimer(l.cfg.SyncFlushTimeout)
	defer timer.Stop()
	select {
	case err := <-w.ch:
		waiterPool.Put(w)
		return err
	case <-timer.C:
		return fmt.Errorf("%w: offset %d not durable after %s", ErrFlushTimeout, w.end, l.cfg.SyncFlushTimeout)
	case <-ctx.Done():
		return fmt.Errorf("commitlog: waiting for flush of offset %d: %w (the records are stored)", w.end, ctx.Err())
	}
}

// releaseWaiters answers every waiter whose records end at or below upTo.
func (l *Log) releaseWaiters(upTo int64) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	i := 0
	for i < len(l.waiters) && l.waiters[i].end <= upTo {
		l.waiters[i].ch <- nil
		i++
	}
	if i > 0 {
		n := copy(l.waiters, l.waiters[i:])
		clear(l.waiters[n:])
		l.waiters = l.waiters[:n]
	}
}

// failWaiters answers every waiter with err.
func (l *Log) failWaiters(err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	for _, w := range l.waiters {
		w.ch <- err
	}
	clear(l.waiters)
	l.waiters = l.waiters[:0]
}

func (l *Log) kickFlusher() {
	select {
	case l.flushKick <- struct{}{}:
	default:
	}
}

// flushLoop runs the flusher. Under SyncFlush it flushes whenever appenders
// wait, covering every record appended so far in one flush (group commit).
// One flusher: several flushes in flight were measured slower, as
// concurrent fdatasyncs split the groups more than they overlap
// (docs/decisions/0013-sync-flush-group-commit-one-flusher.md). Under AsyncFlush it
// flushes every FlushInterval when FlushLeastPages are dirty, and
// everything every FlushThoroughInterval.
func (l *Log) flushLoop(ctx context.Context) {
	if l.cfg.FlushMode != SyncFlush {
		l.asyncFlushLoop(ctx)
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.flushKick:
			l.flush() // a failure is recorded in l.failErr and answered to waiters
		}
	}
}

func (l *Log) asyncFlushLoop(ctx context.Context) {
	ticker := time.NewTicker(l.cfg.FlushInterval)
	defer ticker.Stop()
	lastFull := time.Now()
	least := int64(l.cfg.FlushLeastPages) * 4096
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-l.flushKick:
		}
		dirty := l.committed.Load() - l.flushed.Load()
		full := time.Since(lastFull) >= l.cfg.FlushThoroughInterval
		if dirty <= 0 || (dirty < least && !full) {
			continue
		}
		if l.flush() == nil && full {
			lastFull = time.Now()
		}
	}
}

// Flush makes every record appended before the call durable. It is safe to
// call concurrently with appends and with the background flusher.
func (l *Log) Flush() error {
	if l.closed.Load() {
		return ErrClosed
	}
	return l.flush()
}

// flush makes everything appended so far durable, then advances the
// flushed offset and answers waiters. A failure is final.
func (l *Log) flush() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if p := l.failErr.Load(); p != nil {
		return *p
	}
	if l.cfg.writeMode == writeBuffered && l.cfg.FlushMode == SyncFlush {
		for l.flushBufferedOnce() {
		}
		if p := l.failErr.Load(); p != nil {
			return *p
		}
		return nil
	}
	if l.cfg.writeMode == writeBuffered {
		// AsyncFlush: appenders write their staged bytes themselves
		// (writeThrough); this writes what is staged now.
		if err := l.writeThrough(math.MaxInt64); err != nil {
			return err
		}
	}
	from, end := l.flushed.Load(), l.committed.Load()
	sync := func(s *segment, lo, hi int64) error { return s.m.Sync(int(lo), int(hi-lo)) }
	if l.cfg.writeMode == writeDirect {
		sync = func(s *segment, _, _ int64) error { return l.syncFile(s) }
	}
	err := injectFlush("commitlog/flush-before-sync")
	if err == nil {
		err = l.syncRange(from, end, sync)
	}
	if err == nil {
		err = injectFlush("commitlog/flush-after-sync")
	}
	if err != nil {
		return l.fail(err)
	}
	l.advanceFlushed(end)
	l.dropWritten(end)
	return nil
}

// dropUnit is the granule in which the appends' mapping lets go of what
// was flushed: a huge page, which the page cache often holds the log in.
const dropUnit = 2 << 20

// dropWritten drops the appends' mapping's page table entries below end
// (flushed), in whole dropUnits: appends never go back there, and the
// readers map what they read on their own, so the pages would otherwise
// count twice in the process's RSS (RssFile). It stops short of the unit
// end is in, which appends may still be writing. l.flushMu is held.
func (l *Log) dropWritten(end int64) {
	to := end &^ (dropUnit - 1)
	from := max(l.dropped, l.minOff.Load())
	for from < to {
		seg := l.segs.Load().find(from)
		if seg == nil {
			break
		}
		hi := min(to, seg.end())
		if seg.acquire() {
			if w := seg.ownWriter(); w != nil {
				if err := w.Drop(int(from-seg.base), int(hi-from)); err != nil && !l.dropWarned {
					l.log.Warn("could not drop the appends' mapping of flushed data; RSS counts those pages twice", "segment", seg.path, "err", err)
					l.dropWarned = true
				}
			}
			seg.release()
		}
		from = hi
	}
	l.dropped = from
}

// injectFlush evaluates a flush failpoint (package failpoint): an injected
// error counts as a failed sync. Without the failpoint build tag it is nil
// and compiled to nothing.
func injectFlush(name string) error {
	if failpoint.Enabled {
		return failpoint.Inject(name)
	}
	return nil
}

// advanceFlushed records that everything below end is durable and answers
// the waiters it covers.
func (l *Log) advanceFlushed(end int64) {
	if old := l.flushed.Load(); end > old {
		l.flushed.Store(end)
		l.stats.flushes.Add(1)
		l.stats.flushedBytes.Add(end - old)
	}
	l.releaseWaiters(end)
}

// flushBufferedOnce writes the staging buffer (writeBufferedOnce), then
// fdatasyncs it and advances the flushed offset: a SyncFlush group commit.
// It reports whether it took anything. l.flushMu is held.
func (l *Log) flushBufferedOnce() bool {
	l.writeMu.Lock()
	took, start, end := l.writeBufferedOnce()
	l.writeMu.Unlock()
	if !took || l.failErr.Load() != nil {
		return false
	}
	err := injectFlush("commitlog/flush-before-sync")
	if err == nil {
		err = l.syncRange(start, end, func(s *segment, _, _ int64) error { return l.syncFile(s) })
	}
	if err == nil {
		err = injectFlush("commitlog/flush-after-sync")
	}
	if err != nil {
		l.fail(err)
		return false
	}
	l.advanceFlushed(end)
	return true
}

// writeThrough returns once the log bytes below end, which the caller
// appended, are written into the segment files (AsyncFlush with
// writeBuffered: a process that dies after the append returned must not
// lose them), or, for an end past the log (Flush), once everything staged
// is. Whoever holds l.writeMu writes everything staged so far, so
// concurrent appenders queue there and find their bytes written by the
// one before them, or write the next group themselves: group writes
// without a flusher goroutine's hand-off, which one send at a time would
// wait for. l.writeMu is held across the writes: it orders them.
func (l *Log) writeThrough(end int64) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	for l.committed.Load() < end {
		if took, _, _ := l.writeBufferedOnce(); !took {
			break
		}
	}
	if p := l.failErr.Load(); p != nil {
		return *p
	}
	if c := l.committed.Load(); c < end && end != math.MaxInt64 {
		return fmt.Errorf("commitlog: offset %d not written (written up to %d)", end, c)
	}
	return nil
}

// writeBufferedOnce takes the staging buffer, writes it into the segment
// files (one write per segment; one direct write if it can, see stage.go)
// and publishes it to readers. It reports whether it took anything, and
// the log range it wrote. l.writeMu is held.
func (l *Log) writeBufferedOnce() (took bool, start, end int64) {
	if l.failErr.Load() != nil {
		return false, 0, 0
	}
	l.mu.Lock()
	buf, start, split, end := l.pend, l.pendStart, l.pendSplit, l.writeOff
	if len(buf) == 0 {
		l.mu.Unlock()
		return false, 0, 0
	}
	nextBase := l.active.base
	direct := false
	if split < 0 && len(buf) >= directMinBytes && l.directOn.Load() {
		// Pad to a block boundary (if the segment keeps room for its
		// end filler), so that the next flush may go direct too.
		if pad := padSize(end); pad > 0 && end+pad+message.BlankSize <= l.active.end() {
			l.growPend(int(pad))
			buf = appendPad(l.pend, pad)
			end += pad
			l.writeOff = end
		}
		direct = fsx.DirectAligned(buf, start) && start >= l.prefaultTo // past what the mapping brought in (writeStaged)
	}
	l.pend = l.spareStage(0)
	l.pendStart, l.pendSplit = end, -1
	l.roomCond.Broadcast()
	l.mu.Unlock()

	var err error
	if direct {
		if err = l.writeDirect(buf, start); errors.Is(err, errors.ErrUnsupported) {
			direct = false // turned off; written the usual way below
		}
	}
	if !direct {
		first, second := buf, []byte(nil)
		if split >= 0 {
			first, second = buf[:split], buf[split:]
		}
		err = l.writeStaged(first, start)
		if err == nil && len(second) > 0 {
			err = l.writeStaged(second, nextBase)
		}
	}
	// The buffer just written stays readable for a while (stage.go); of
	// one across a roll, the part in the new segment. One that stops being
	// readable, which no reader holds any more, is reused.
	staged := stagedBytes{b: buf, mem: buf, off: start}
	if split >= 0 {
		staged.b, staged.off = buf[split:], nextBase
	}
	gone := l.pushStaged(l.gone[:0], staged)
	if err == nil {
		l.publish(end)
	}
	l.mu.Lock()
	for i, b := range gone {
		if l.keepSpare(b) {
			gone[i] = nil
		}
	}
	l.mu.Unlock()
	for _, b := range gone {
		freeStage(b)
	}
	clear(gone)
	l.gone = gone[:0]
	if err != nil {
		l.fail(err)
		return false, 0, 0
	}
	return true, start, end
}

// smallWindow is how far ahead of small writes through the mapping the
// pre-faulter keeps pages faulted in (writeStaged; at most PrefaultAhead).
// A window is faulted in half at a time, which holds the processor; a
// window of a few hundred KiB, faulted in a piece at a time while sends
// came one by one, raised their tail latency. A larger one costs a burst
// of large writes after small ones more: whatever of it was faulted in
// (and dirtied) goes through the page cache, not direct, and its
// writeback write-protects every page again, a TLB flush on every CPU
// each (figures: docs/decisions/0023-commit-log-chooses-how-it-writes.md).
const smallWindow = 4 << 20

// writeStaged writes staged bytes b at log offset off, inside one segment,
// through the page cache. Under AsyncFlush, fewer than DirectBytes are
// copied into the segment's mapping, as writeMapped appends are, with a
// window after them pre-faulted (smallWindow), so that one message at a
// time costs neither a syscall nor a fault, each of which a single send
// waits for (docs/decisions/0023-commit-log-chooses-how-it-writes.md).
// No direct write starts inside the window (writeBufferedOnce). Larger
// writes, and every write under SyncFlush, go with pwrite (writeAt).
// l.writeMu is held.
func (l *Log) writeStaged(b []byte, off int64) error {
	if l.cfg.FlushMode == SyncFlush || len(b) >= l.cfg.DirectBytes || !l.prefaultNext.Load() {
		return l.writeAt(b, off)
	}
	seg := l.segs.Load().find(off)
	if seg == nil || !seg.acquire() {
		return fmt.Errorf("commitlog: no segment for offset %d", off)
	}
	copy(l.writer(seg).Bytes()[off-seg.base:], b)
	seg.release()
	l.mu.Lock()
	l.kickPrefaultLocked(off + int64(len(b)))
	l.mu.Unlock()
	return nil
}

// writeAt writes b at log offset off, inside one segment.
func (l *Log) writeAt(b []byte, off int64) error {
	if len(b) == 0 {
		return nil
	}
	seg := l.segs.Load().find(off)
	if seg == nil || !seg.acquire() {
		return fmt.Errorf("commitlog: no segment for offset %d", off)
	}
	defer seg.release()
	var err error
	if in := l.inlineFile(seg.file); in != nil {
		t0 := l.cfg.Now()
		_, err = in.WriteAtInline(b, off-seg.base)
		l.inlineTook("pwrite", seg.path, l.cfg.Now().Sub(t0))
	} else {
		_, err = seg.file.WriteAt(b, off-seg.base)
	}
	if err != nil {
		return fmt.Errorf("write %s at %d: %w", seg.path, off-seg.base, err)
	}
	return nil
}

// syncFile makes seg's written data durable (fdatasync).
func (l *Log) syncFile(seg *segment) error {
	in := l.inlineFile(seg.file)
	if in == nil {
		return seg.file.Sync()
	}
	t0 := l.cfg.Now()
	err := in.SyncInline()
	l.inlineTook("fdatasync", seg.path, l.cfg.Now().Sub(t0))
	return err
}

// inlineLimit is how long a system call made inline (fsx.InlineFile) may
// take before the log stops making them so for a while: the call held its
// processor, and any stop-the-world phase of the garbage collector, that
// long. An fdatasync of a few MiB is usually quick, but one in a few
// hundred takes several times longer (the disk's hiccups, more of them
// right after large deletes); a disk that stalls takes longer again and
// again. So a slow call stops them for inlinePauseMin, and each slow one
// right after a pause doubles the pause, up to inlinePauseMax; a quick one
// sets it back.
const (
	inlineLimit    = 50 * time.Millisecond
	inlinePauseMin = 100 * time.Millisecond
	inlinePauseMax = time.Minute
)

// inlineFile returns f as an fsx.InlineFile if the log makes its file
// writes and syncs inline: with GOMAXPROCS 2 or more, so that a processor
// is left to the rest of the process meanwhile, and outside a pause after
// a slow call (inlineTook). Otherwise it returns nil.
func (l *Log) inlineFile(f fsx.File) fsx.InlineFile {
	if runtime.GOMAXPROCS(0) < 2 {
		return nil
	}
	if until := l.inlineOffUntil.Load(); until != 0 && l.cfg.Now().UnixNano() < until {
		return nil
	}
	in, _ := f.(fsx.InlineFile)
	return in
}

// inlineTook records how long an inline call took: a slow one (over
// inlineLimit) stops inline calls for a pause, twice the last one if that
// was the previous call's doing, and says so (a warning once the pause
// reaches a second); a quick one sets the pause back to inlinePauseMin.
func (l *Log) inlineTook(op, path string, d time.Duration) {
	if d <= inlineLimit {
		l.inlinePause.Store(0)
		return
	}
	pause := time.Duration(l.inlinePause.Load())
	pause = min(max(2*pause, inlinePauseMin), inlinePauseMax)
	l.inlinePause.Store(int64(pause))
	l.inlineOffUntil.Store(l.cfg.Now().Add(pause).UnixNano())
	level := slog.LevelInfo // a hiccup
	if pause >= time.Second {
		level = slog.LevelWarn // slow call after slow call: the disk stalls
	}
	l.log.Log(context.Background(), level, "a file system call took long; the log makes them the usual way for a while, handing the processor off while they wait",
		"call", op, "file", path, "took", d, "limit", inlineLimit, "for", pause)
}

// syncRange calls sync for each segment overlapping [from, end), oldest
// first, with the overlap as file positions.
func (l *Log) syncRange(from, end int64, sync func(s *segment, lo, hi int64) error) error {
	if end <= from {
		return nil
	}
	sl := l.segs.Load()
	for _, s := range sl.segs {
		if s.end() <= from || s.base >= end {
			continue
		}
		if !s.acquire() {
			continue
		}
		lo, hi := max(from, s.base)-s.base, min(end, s.end())-s.base
		err := sync(s, lo, hi)
		s.release()
		if err != nil {
			return fmt.Errorf("sync %s [%d, %d): %w", s.path, lo, hi, err)
		}
	}
	return nil
}

// failLocked is fail for an appender holding l.mu whose write failed: the
// batch may be partly written, and the log takes no more appends.
func (l *Log) failLocked(cause error) error {
	err := l.failed("write", cause)
	l.roomCond.Broadcast()
	return err
}

// fail records a flush failure: the log refuses further appends, never
// reports the failed range as flushed, and answers every waiter.
func (l *Log) fail(cause error) error {
	err := l.failed("flush", cause)
	l.mu.Lock()
	l.roomCond.Broadcast()
	l.mu.Unlock()
	return err
}

// failed records the first failure (of a write or a flush) and answers
// every waiter with it; it returns the recorded one.
func (l *Log) failed(what string, cause error) error {
	err := fmt.Errorf("%w: %w", ErrFlushFailed, cause)
	if l.failErr.CompareAndSwap(nil, &err) {
		l.log.Error(what+" failed; refusing further appends", "flushed", l.flushed.Load(), "err", cause)
	} else {
		err = *l.failErr.Load()
	}
	l.failWaiters(err)
	return err
}
