package commitlog

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/internal/failpoint"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/tick"
	"github.com/gantrymq/gantry/internal/writemode"
	"github.com/gantrymq/gantry/message"
)

// Stamper is called for every record of an append, in order, under the
// append lock, after the record was copied to its final place and its
// physical offset and store timestamp were set, and before its CRC is
// sealed. It may change fixed-size fields in place (the queue offset); it
// must not block.
type Stamper func(rec []byte, physOff int64)

// AppendResult says where an append's records went.
type AppendResult struct {
	Offset         int64 // log offset of the first record
	End            int64 // log offset just past the last record
	Records        int   // number of records
	StoreTimestamp int64 // store time given to every record, unix ms
}

// Log is an append-only commit log of message records in preallocated,
// mapped segment files. See the package documentation.
type Log struct {
	cfg   Config
	fs    fsx.FS
	log   *slog.Logger
	hours [24]bool

	segs atomic.Pointer[segList] // immutable; swapped on roll and deletion

	mu           sync.Mutex // the append lock; guards the fields below
	roomCond     *sync.Cond // writeBuffered: signalled when the staging buffer is taken
	active       *segment
	writeOff     int64    // next append offset
	pend         []byte   // writeBuffered: staged bytes for [pendStart, writeOff), in an aligned buffer (stage.go)
	spares       [][]byte // writeBuffered: emptied staging buffers to reuse (spareStage)
	pendStart    int64
	pendSplit    int    // index in pend where the active segment starts after a roll; -1 if none
	scratch      []byte // writeDirect, writeHybrid: the batch being stamped and written (kept up to maxScratch)
	allocPending bool
	// allocFailed is why the last segment could not be had; until
	// allocRetryAt rolls fail with it at once instead of trying again
	// (see nextSegmentLocked).
	allocFailed  error
	allocRetryAt time.Time

	// writeHybrid (under mu): bytes copied into the mapping and bytes
	// written with pwrite since the last decision on the pre-fault window.
	hybridMapped, hybridDirect int64

	flushMu sync.Mutex // serializes flushes; taken before writeMu, mu and wmu
	// writeMu serializes writing the staging buffer (writeBuffered); taken
	// before mu. gone (under it) is pushStaged's scratch.
	writeMu sync.Mutex
	gone    [][]byte
	cleanMu sync.Mutex // serializes retention passes; taken before mu
	// heldWarned (under cleanMu): when Clean last warned that DeleteFloor
	// holds back a deletion disk use calls for.
	heldWarned time.Time
	cpMu       sync.Mutex // serializes checkpoint writes

	// dropped (under flushMu): the appends' mapping has no entries below
	// it (see dropWritten); dropWarned: a failure to drop was logged.
	dropped    int64
	dropWarned bool

	wmu     sync.Mutex // guards waiters; taken after mu
	waiters []*waiter  // SyncFlush appenders by End, ascending

	// writeBuffered (stage.go): directOn says flushes may be written with
	// O_DIRECT; staged holds the last staging buffers written, oldest
	// first, which readers copy from, under stageMu.
	directOn atomic.Bool
	stageMu  sync.RWMutex
	staged   []stagedBytes
	blocks   blockCache // reads of older bytes (blocks.go)

	committed      atomic.Int64 // readable end: bytes below it are in the files or in staged
	flushed        atomic.Int64 // durable end
	minOff         atomic.Int64 // first readable offset
	failErr        atomic.Pointer[error]
	inlineOffUntil atomic.Int64 // file writes and syncs are not made inline before this Unix time in ns (inlineFile)
	inlinePause    atomic.Int64 // the last pause of inline calls (inlineTook), 0 after a quick one
	diskFull       atomic.Bool
	closed         atomic.Bool
	lastTs         atomic.Int64 // store time of the last appended record

	flushKick chan struct{}
	done      chan struct{} // closed by Close
	allocReq  chan int64
	allocRes  chan allocResult
	// prefaultTo (under mu) is the end the pre-faulter was last asked to
	// reach; an append that comes within half a window of it kicks it on.
	// It only grows, so under writeBuffered (async) it is also the end of
	// what small writes through the mapping and the window after them may
	// have brought into the page cache: no direct write starts below it.
	prefaultTo   int64
	prefaultKick chan struct{}
	prefaulted   chan struct{} // closed after the pre-faulter's first pass
	// prefaultNext: the pre-faulter keeps a window after the append
	// position and the allocator pre-faults the start of each new segment
	// (always with writeMapped; with writeHybrid while small appends bring
	// most of the bytes, see tallyHybridLocked). Never set without
	// pre-faulting (PrefaultAhead > 0, writeMapped or writeHybrid).
	prefaultNext atomic.Bool

	stats      stats
	report     RecoveryReport
	truncating bool   // a Log of Truncate's: recovery writes no report
	holes      []Span // ranges skipped at recovery (holes.go); set by Open
	cp         checkpoint

	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open recovers the log in cfg.Dir (creating it if needed) and starts its
// flusher, preallocator and retention loops. ctx bounds recovery only.
func Open(ctx context.Context, cfg Config) (*Log, error) {
	if m := writemode.From(ctx); m != writemode.Auto { // a test's choice
		cfg.writeMode = m
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := newLog(cfg)
	for _, d := range []string{cfg.Dir, cfg.StateDir} {
		if err := l.fs.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("commitlog: create %s: %w", d, err)
		}
	}
	if err := l.recover(ctx); err != nil {
		l.closeSegments()
		return nil, err
	}
	if err := l.markRunning(); err != nil {
		l.closeSegments()
		return nil, err
	}
	if err := l.writeCheckpoint(); err != nil { // recovery's end is durable: later crashes scan from here
		l.closeSegments()
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	l.stop = stop
	l.prefaulted = make(chan struct{})
	mapped := l.cfg.writeMode == writeMapped || l.cfg.writeMode == writeHybrid ||
		l.cfg.writeMode == writeBuffered && l.cfg.FlushMode == AsyncFlush // its small writes (writeStaged)
	if mapped && l.cfg.PrefaultAhead > 0 {
		// The window after the recovered end (writeHybrid keeps it while
		// small appends bring most of the bytes, see tallyHybridLocked).
		l.prefaultNext.Store(true)
		l.prefaultTo = l.writeOff + l.prefaultWindow()
		l.prefaultKick <- struct{}{}
		l.wg.Go(func() { l.prefaultLoop(runCtx) })
	} else {
		close(l.prefaulted)
	}
	l.wg.Go(func() { l.allocLoop(runCtx) })
	l.wg.Go(func() { l.flushLoop(runCtx) })
	l.wg.Go(func() {
		var idle idleMark
		tick.Every(runCtx, cfg.CheckpointInterval, func() {
			if err := l.writeCheckpoint(); err != nil {
				l.log.Warn("checkpoint not written", "err", err)
			}
			l.trimIdle(&idle)
		})
	})
	if cfg.CleanInterval > 0 {
		l.wg.Go(func() {
			tick.Every(runCtx, cfg.CleanInterval, func() {
				if _, err := l.Clean(); err != nil {
					l.log.Warn("retention pass failed", "err", err)
				}
			})
		})
	}
	l.mu.Lock()
	l.requestSegmentLocked()
	l.mu.Unlock()
	return l, nil
}

// newLog returns a Log for cfg (with defaults, valid) before recovery:
// nothing is opened and no goroutine runs.
func newLog(cfg Config) *Log {
	hours, _ := parseHours(cfg.DeleteWhen)
	l := &Log{
		cfg:          cfg,
		fs:           cfg.FS,
		log:          cfg.Logger.With("component", "commitlog"),
		hours:        hours,
		pendSplit:    -1,
		flushKick:    make(chan struct{}, 1),
		prefaultKick: make(chan struct{}, 1),
		done:         make(chan struct{}),
		allocReq:     make(chan int64, 1),
		allocRes:     make(chan allocResult, 1),
	}
	l.roomCond = sync.NewCond(&l.mu)
	l.blocks.init()
	l.directOn.Store(cfg.writeMode == writeBuffered && !cfg.noDirectWrites && cfg.SegmentBytes%fsx.DirectAlign == 0)
	return l
}

// markRunning creates the abort marker: found at the next start, it says the
// log was not closed cleanly.
func (l *Log) markRunning() error {
	f, err := l.fs.OpenFile(l.abortPath(), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("commitlog: create abort marker: %w", err)
	}
	_, err = f.WriteAt(fmt.Appendf(nil, "%d\n", os.Getpid()), 0)
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err == nil {
		err = l.fs.SyncDir(l.cfg.StateDir)
	}
	if err != nil {
		return fmt.Errorf("commitlog: write abort marker: %w", err)
	}
	return nil
}

func (l *Log) abortPath() string { return filepath.Join(l.cfg.StateDir, "abort") }

// Close flushes everything, persists the checkpoint, removes the abort
// marker and releases the files. Later calls return ErrClosed.
func (l *Log) Close() error {
	err := ErrClosed
	l.closeOnce.Do(func() {
		l.stopLoops()
		l.closeErr = l.shutdown()
		err = l.closeErr
	})
	return err
}

// stopLoops refuses new work, wakes waiting appenders and joins the
// background goroutines.
func (l *Log) stopLoops() {
	l.closed.Store(true)
	close(l.done)
	l.mu.Lock()
	l.roomCond.Broadcast()
	l.mu.Unlock()
	l.stop()
	l.wg.Wait()
}

// shutdown runs after the loops stopped: a final flush, the checkpoint, the
// abort marker, the files.
func (l *Log) shutdown() error {
	var err error
	if ferr := l.flush(); ferr != nil {
		err = ferr
	}
	l.failWaiters(ErrClosed)
	if err == nil {
		err = l.writeCheckpoint()
	}
	if err == nil {
		if rerr := l.fs.Remove(l.abortPath()); rerr == nil {
			err = l.fs.SyncDir(l.cfg.StateDir)
		} else {
			err = fmt.Errorf("commitlog: remove abort marker: %w", rerr)
		}
	}
	l.closeSegments()
	l.freeStages()
	return err
}

// freeStages unmaps the staging buffers (stage.go) and the block cache
// (blocks.go) at Close.
func (l *Log) freeStages() {
	l.blocks.free()
	for _, b := range l.dropStaged() {
		freeStage(b)
	}
	l.mu.Lock()
	freeStage(l.pend)
	for _, b := range l.takeSpares() {
		freeStage(b)
	}
	l.pend = nil
	l.mu.Unlock()
}

func (l *Log) closeSegments() {
	if sl := l.segs.Load(); sl != nil {
		for _, s := range sl.segs {
			s.retire()
		}
	}
	for {
		select {
		case r := <-l.allocRes:
			if r.seg != nil {
				r.seg.retire()
			}
		default:
			return
		}
	}
}

// writable returns why the log refuses appends, or nil.
func (l *Log) writable() error {
	if l.closed.Load() {
		return ErrClosed
	}
	if p := l.failErr.Load(); p != nil {
		return *p
	}
	if l.diskFull.Load() {
		return fmt.Errorf("%w: disk usage above %.0f%%; appends resume when space is freed", ErrDiskFull, l.cfg.DiskFullRatio*100)
	}
	return nil
}

// Append appends batch, one or more encoded records back to back (each
// from message.Append with a CRC tail), as one contiguous unit in one
// segment. It sets each record's physical offset and store timestamp, calls
// stamp (if not nil), seals the record CRC, and, under SyncFlush, waits until
// the records are durable. Records are readable (Read, MaxOffset) when
// Append returns nil.
//
// A returned error other than ErrFlushTimeout (and a ctx error while waiting
// for a SyncFlush) means nothing was appended. Append is safe for
// concurrent use; concurrent appends are ordered by the append lock.
func (l *Log) Append(ctx context.Context, batch []byte, stamp Stamper) (AppendResult, error) {
	return l.AppendV(ctx, [][]byte{batch}, stamp)
}

// AppendV is Append of a batch given in pieces, each holding whole records:
// they are copied into place one after another, so the caller need not join
// them first. The pieces are modified only by the stamper, in the log's copy.
func (l *Log) AppendV(ctx context.Context, chunks [][]byte, stamp Stamper) (AppendResult, error) {
	nrec, size, err := l.validateChunks(chunks)
	if err != nil {
		return AppendResult{}, err
	}
	if err := l.writable(); err != nil {
		return AppendResult{}, err
	}
	waitFlush := l.cfg.FlushMode == SyncFlush
	writeThrough := !waitFlush && l.cfg.writeMode == writeBuffered
	var w *waiter
	l.mu.Lock()
	res, err := l.appendLocked(ctx, chunks, size, nrec, stamp, false)
	if err == nil && waitFlush {
		w = l.addWaiter(res.End)
	}
	l.mu.Unlock()
	if err != nil {
		return AppendResult{}, err
	}
	if f, ok := ctx.Value(appendedKey{}).(func()); ok {
		f()
	}
	l.stats.appends.Add(1)
	l.stats.records.Add(int64(nrec))
	l.stats.bytes.Add(int64(size))
	if writeThrough {
		return res, l.writeThrough(res.End)
	}
	if !waitFlush {
		return res, nil
	}
	l.kickFlusher()
	return res, l.wait(ctx, w)
}

// validateChunks checks every chunk's framing and the batch's size, and
// returns the record count and the size.
func (l *Log) validateChunks(chunks [][]byte) (nrec, size int, err error) {
	for _, c := range chunks {
		size += len(c)
	}
	if size == 0 {
		return 0, 0, fmt.Errorf("%w: empty", ErrInvalidBatch)
	}
	if int64(size) > l.cfg.SegmentBytes-message.BlankSize {
		return 0, 0, fmt.Errorf("%w: batch of %d bytes, segment holds %d", ErrRecordTooLarge, size, l.cfg.SegmentBytes-message.BlankSize)
	}
	for _, c := range chunks {
		if len(c) == 0 {
			continue
		}
		n, err := l.validateBatch(c)
		if err != nil {
			return 0, 0, err
		}
		nrec += n
	}
	return nrec, size, nil
}

// WaitPrefault returns once the window after the end Open recovered is
// pre-faulted in the background (or ctx ends): for benchmarks that measure
// appends without that start-up work running beside them.
func (l *Log) WaitPrefault(ctx context.Context) error {
	select {
	case <-l.prefaulted:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type appendedKey struct{}

// WithAppended returns a context that makes Append call f once the batch
// holds its place in the log, before Append waits for the flush
// (SYNC_FLUSH). A caller that must keep several batches in order can then
// start the next one without waiting for the first to be durable.
func WithAppended(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, appendedKey{}, f)
}

// validateBatch checks the framing of batch and returns its record count.
func (l *Log) validateBatch(batch []byte) (int, error) {
	if len(batch) == 0 {
		return 0, fmt.Errorf("%w: empty", ErrInvalidBatch)
	}
	if int64(len(batch)) > l.cfg.SegmentBytes-message.BlankSize {
		return 0, fmt.Errorf("%w: batch of %d bytes, segment holds %d", ErrRecordTooLarge, len(batch), l.cfg.SegmentBytes-message.BlankSize)
	}
	n := 0
	for pos := 0; pos < len(batch); n++ {
		size, magic, ok := message.RecordSize(batch[pos:])
		switch {
		case !ok || size < message.MinRecordSize || int(size) > len(batch)-pos:
			return 0, fmt.Errorf("%w: record %d at byte %d: size %d does not fit the %d bytes left", ErrInvalidBatch, n, pos, size, len(batch)-pos)
		case magic != message.MagicV1:
			return 0, fmt.Errorf("%w: record %d at byte %d: magic %#x is not V1", ErrInvalidBatch, n, pos, uint32(magic))
		case !message.HasCRC(batch[pos : pos+int(size)]):
			return 0, fmt.Errorf("%w: record %d at byte %d has no %s property tail", ErrInvalidBatch, n, pos, message.PropCRC)
		}
		pos += int(size)
	}
	return n, nil
}

// appendLocked copies the chunks (size bytes in all) into place and, unless
// raw (a replica's bytes, replica.go), stamps and seals each record. l.mu
// is held.
func (l *Log) appendLocked(ctx context.Context, chunks [][]byte, size, nrec int, stamp Stamper, raw bool) (AppendResult, error) {
	if err := l.makeRoomLocked(ctx, size); err != nil {
		return AppendResult{}, err
	}
	if failpoint.Enabled {
		if err := failpoint.Inject("commitlog/append-before-copy"); err != nil {
			return AppendResult{}, err
		}
	}
	start := l.writeOff
	direct := l.cfg.writeMode == writeDirect || l.cfg.writeMode == writeHybrid && size >= l.cfg.DirectBytes
	var dst []byte
	if l.cfg.writeMode == writeBuffered {
		n := len(l.pend)
		l.growPend(size)
		for _, c := range chunks {
			l.pend = append(l.pend, c...)
		}
		dst = l.pend[n:]
	} else if direct {
		dst = l.scratch[:0]
		for _, c := range chunks {
			dst = append(dst, c...)
		}
	} else {
		pos := start - l.active.base
		dst = l.writer(l.active).Bytes()[pos : pos+int64(size)]
		at := 0
		for _, c := range chunks {
			at += copy(dst[at:], c)
		}
	}
	now := l.cfg.Now().UnixMilli()
	off := start
	if raw {
		now, off = l.lastTs.Load(), start+int64(size) // the caller sets lastTs
	}
	for pos := 0; !raw && pos < len(dst); {
		size := int(binary.BigEndian.Uint32(dst[pos:]))
		rec := dst[pos : pos+size]
		message.SetPhysicalOffset(rec, off)
		message.SetStoreTimestamp(rec, now)
		if stamp != nil {
			stamp(rec, off)
		}
		if err := message.SealTail(rec); err != nil {
			panic(fmt.Sprintf("commitlog: seal validated record: %v", err)) // validateBatch checked the tail
		}
		pos += size
		off += int64(size)
	}
	if direct {
		err := l.writeAt(dst, start)
		if cap(dst) <= maxScratch {
			l.scratch = dst[:0]
		}
		if err != nil {
			return AppendResult{}, l.failLocked(err)
		}
	}
	if failpoint.Enabled {
		_ = failpoint.Inject("commitlog/append-after-copy") // copied: only kill, panic and sleep apply
	}
	l.writeOff = off
	l.lastTs.Store(now)
	if l.cfg.writeMode == writeBuffered {
		return AppendResult{Offset: start, End: off, Records: nrec, StoreTimestamp: now}, nil
	}
	if l.cfg.writeMode == writeHybrid && l.cfg.PrefaultAhead > 0 {
		l.tallyHybridLocked(size, direct)
	}
	if !direct && l.prefaultNext.Load() {
		l.kickPrefaultLocked(off)
	}
	l.publish(off)
	return AppendResult{Offset: start, End: off, Records: nrec, StoreTimestamp: now}, nil
}

// tallyHybridLocked counts an append's bytes by path and, every
// hybridQuantum bytes, decides whether the pre-faulter keeps a window: only
// while appends copied into the mapping brought at least as many bytes as
// pwrite did. Under batches a window would zero pages that pwrite then
// overwrites whole; a few small appends among them fault their own pages
// in. The pre-faulter stops within a chunk of a decision against it. l.mu
// is held.
func (l *Log) tallyHybridLocked(size int, direct bool) {
	if direct {
		l.hybridDirect += int64(size)
	} else {
		l.hybridMapped += int64(size)
	}
	if l.hybridMapped+l.hybridDirect >= hybridQuantum(l.cfg.PrefaultAhead) {
		l.prefaultNext.Store(l.hybridMapped >= l.hybridDirect)
		l.hybridMapped, l.hybridDirect = 0, 0
	}
}

// hybridQuantum is how many appended bytes each writeHybrid decision on the
// window looks at: a sixteenth of the window, at most 4 MiB.
func hybridQuantum(ahead int64) int64 { return max(min(ahead/16, 4<<20), 1) }

// prefaultWindow is how many bytes after the append position the
// pre-faulter keeps faulted in: PrefaultAhead, or, with writeBuffered
// (where only small writes go through the mapping), at most smallWindow.
func (l *Log) prefaultWindow() int64 {
	if l.cfg.writeMode == writeBuffered {
		return min(l.cfg.PrefaultAhead, smallWindow)
	}
	return l.cfg.PrefaultAhead
}

// kickPrefaultLocked asks the pre-faulter to extend its window once an
// append copied into the mapping came within half a window of its end.
// Called only while prefaultNext is set; l.mu is held.
func (l *Log) kickPrefaultLocked(off int64) {
	ahead := l.prefaultWindow()
	if off+ahead/2 <= l.prefaultTo {
		return
	}
	l.prefaultTo = off + ahead
	select {
	case l.prefaultKick <- struct{}{}:
	default:
	}
}

// makeRoomLocked waits until a batch of n bytes can be appended at writeOff
// in the active segment, rolling to the next segment when it does not fit.
// With writeBuffered it also waits while the staging buffer is full (a batch
// always fits an empty one) or already holds a roll. l.mu is held; waits
// release it, so the state is re-checked after each.
func (l *Log) makeRoomLocked(ctx context.Context, n int) error {
	buffered := l.cfg.writeMode == writeBuffered
	for {
		if err := l.writable(); err != nil {
			return err
		}
		fits := l.writeOff+int64(n)+message.BlankSize <= l.active.end()
		switch {
		case buffered && len(l.pend) > 0 && len(l.pend)+n > l.cfg.MaxPendingBytes,
			buffered && !fits && l.pendSplit >= 0: // one roll per staged buffer
			if l.cfg.FlushMode == SyncFlush {
				l.kickFlusher() // else the appenders of what is staged write it (writeThrough)
			}
			l.roomCond.Wait()
		case fits:
			return nil
		default:
			if err := l.rollLocked(ctx); err != nil {
				return err
			}
		}
	}
}

// maxScratch is the largest writeDirect scratch buffer kept between appends.
const maxScratch = 8 << 20

// rollLocked seals the active segment with a BLANK filler and makes the
// preallocated next segment active. Nothing is written if the next segment
// cannot be had.
func (l *Log) rollLocked(ctx context.Context) error {
	next, err := l.nextSegmentLocked(ctx)
	if err != nil {
		return err
	}
	old := l.active
	pos := l.writeOff - old.base
	var blank [message.BlankSize]byte
	message.AppendBlank(blank[:0], int32(old.size-pos))
	switch l.cfg.writeMode {
	case writeBuffered:
		l.growPend(len(blank))
		l.pend = append(l.pend, blank[:]...)
		l.pendSplit = len(l.pend)
	case writeDirect:
		if err := l.writeAt(blank[:], l.writeOff); err != nil {
			next.retire()
			return l.failLocked(err)
		}
	default:
		copy(l.writer(old).Bytes()[pos:], blank[:])
	}
	sl := l.segs.Load()
	segs := make([]*segment, len(sl.segs), len(sl.segs)+1)
	copy(segs, sl.segs)
	l.segs.Store(&segList{segs: append(segs, next)})
	l.active = next
	l.writeOff = next.base
	if l.cfg.writeMode != writeBuffered {
		l.publish(next.base)
	}
	l.requestSegmentLocked()
	l.stats.rolled.Add(1)
	l.log.Debug("rolled segment", "sealed", old.path, "active", next.path)
	return nil
}

// writer returns seg's mapping for appends and pre-faulting (see
// segment.writerView): marked random access under writeHybrid.
func (l *Log) writer(seg *segment) fsx.Mapping {
	return seg.writerView(l.cfg.writeMode == writeHybrid || l.cfg.writeMode == writeBuffered)
}

// publish makes [.., end) readable.
func (l *Log) publish(end int64) {
	l.committed.Store(end)
	if l.cfg.OnCommit != nil {
		l.cfg.OnCommit(end)
	}
}

// Read returns size bytes at off from the mapping, without copying. The
// caller must Release the region; until then it stays valid even if
// retention deletes the segment. [off, off+size) must lie in one segment
// and below MaxOffset. Safe for concurrent use.
func (l *Log) Read(off int64, size int) (Region, error) {
	seg, err := l.acquireRange(off, size)
	if err != nil {
		return Region{}, err
	}
	p := off - seg.base
	return Region{B: seg.b[p : p+int64(size) : p+int64(size)], seg: seg}, nil
}

// acquireRange returns the segment holding [off, off+size), with a reader
// reference the caller releases, under Read's rules.
func (l *Log) acquireRange(off int64, size int) (*segment, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: negative size %d", ErrBadOffset, size)
	}
	if off < l.minOff.Load() {
		return nil, fmt.Errorf("%w: %d < %d", ErrOffsetTooSmall, off, l.minOff.Load())
	}
	if end := l.committed.Load(); off+int64(size) > end {
		return nil, fmt.Errorf("%w: [%d, %d) beyond %d", ErrOffsetTooBig, off, off+int64(size), end)
	}
	seg := l.segs.Load().find(off)
	if seg == nil || !seg.acquire() {
		return nil, fmt.Errorf("%w: %d (segment deleted)", ErrOffsetTooSmall, off)
	}
	if off+int64(size) > seg.end() {
		seg.release()
		return nil, fmt.Errorf("%w: [%d, %d) crosses the end of segment %s", ErrBadOffset, off, off+int64(size), seg.path)
	}
	return seg, nil
}

// ReadRecord returns the record at off and the offset of the next one,
// stepping over segment fillers and skipped holes. At the end of the log it
// returns ErrOffsetTooBig. The caller must Release the region.
func (l *Log) ReadRecord(off int64) (rec Region, next int64, err error) {
	for {
		hdr, err := l.Read(off, 8)
		if err != nil {
			return Region{}, off, err
		}
		size, magic, _ := message.RecordSize(hdr.B)
		seg := hdr.seg
		hdr.Release()
		skip, err := frontAt(seg, off, size, magic)
		if err != nil {
			return Region{}, off, err
		}
		if skip != 0 {
			off = skip
			continue
		}
		r, err := l.Read(off, int(size))
		return r, off + int64(size), err
	}
}

// CopyRecords copies whole records into buf with one read of the segment
// file (pread), not through the mapping, and returns them: recs holds
// records back to back, the first at log offset start (off, or the first
// record after the fillers and skipped holes at off), and next is the
// offset after the last. It copies as many as fit in buf, stopping at the
// end of the segment, of the readable log, and before a hole (the next call
// steps over it); a first record larger than buf gets a buffer of its own.
// At the end of the log it returns ErrOffsetTooBig. Safe for concurrent
// use.
//
// It is for a reader that goes through every record once, right behind the
// appends (the store's dispatcher): pread copies from the page cache
// through the kernel's own mapping, while the first read of each page
// through the log's mapping costs a page-table fill, dear on a VM whose
// page tables the host shadows (docs/decisions/0024-reading-the-commit-log.md).
func (l *Log) CopyRecords(off int64, buf []byte) (recs []byte, start, next int64, err error) {
	for {
		seg, err := l.acquireRange(off, 8) // a record's front at least
		if err != nil {
			return nil, off, off, err
		}
		end := l.committed.Load()
		n := min(int64(len(buf)), end-off, seg.end()-off)
		var k int
		k, err = l.readInto(seg, buf[:n], off)
		if err == nil && k < 8 {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && k < int(n) {
			seg.release()
			return nil, off, off, fmt.Errorf("commitlog: read %s at %d: %w", seg.path, off-seg.base, err)
		}
		b := buf[:k]
		size, magic, _ := message.RecordSize(b)
		skip, err := frontAt(seg, off, size, magic)
		if err == nil && skip == 0 && off+int64(size) > min(end, seg.end()) {
			err = fmt.Errorf("%w: record at %d of %d bytes beyond %d", ErrBadOffset, off, size, min(end, seg.end()))
		}
		switch {
		case err != nil:
			seg.release()
			return nil, off, off, err
		case skip != 0: // a filler or a hole
			seg.release()
			off = skip
			continue
		case int(size) > len(b): // larger than buf (in bounds, so n was len(buf)): read it alone
			seg.release()
			buf = make([]byte, size)
			continue
		}
		p := int(size)
		for p+8 <= len(b) {
			size, magic, _ := message.RecordSize(b[p:])
			if skip, err := frontAt(seg, off+int64(p), size, magic); skip != 0 || err != nil || p+int(size) > len(b) {
				break // a filler, a hole or a bad front is for the next call; a record cut short too
			}
			p += int(size)
		}
		seg.release()
		return b[:p], off, off + int64(p), nil
	}
}

// frontAt reads the size and magic at log offset off in seg: a record's
// front (skip 0, nil), a segment's filler or a range skipped at recovery
// (skip: where the next record may start), or neither (ErrBadOffset).
func frontAt(seg *segment, off int64, size, magic int32) (skip int64, err error) {
	switch {
	case magic == message.MagicBlank:
		return seg.end(), nil
	case (magic == magicHole || magic == magicPad) && size >= 8:
		return off + int64(size), nil
	case size < message.MinRecordSize:
		return 0, fmt.Errorf("%w: %d: size %d", ErrBadOffset, off, size)
	}
	return 0, nil
}

// Region is a read-only view of log bytes: in a segment's mapping, or in
// a copy of them (ReadCopy).
type Region struct {
	B   []byte
	seg *segment // B is in seg's mapping
	cp  *Copy    // or in a copy (ReadCopy)
}

// Release returns the region; B must not be used afterwards.
func (r Region) Release() {
	switch {
	case r.seg != nil:
		r.seg.release()
	case r.cp != nil:
		r.cp.Release()
	}
}

// MinOffset is the offset of the first record still in the log.
func (l *Log) MinOffset() int64 { return l.minOff.Load() }

// MaxOffset is the readable end of the log: every record below it can be
// read. It only grows while the log is open.
func (l *Log) MaxOffset() int64 { return l.committed.Load() }

// FlushedOffset is the durable end of the log: every record below it
// survives a machine crash. It never exceeds MaxOffset and never advances
// past a failed flush.
func (l *Log) FlushedOffset() int64 { return l.flushed.Load() }

// CopyReads reports whether readers of many records should copy them out
// of the log (ReadCopy, CopyRecords) rather than read them through the
// segment's mapping: true unless the log is written through the mapping,
// as pwrite and O_DIRECT writes leave the page cache in small folios or
// empty, which the mapping faults in a page at a time.
func (l *Log) CopyReads() bool { return l.cfg.writeMode != writeMapped }

// SegmentBytes is the size of the log's segments.
func (l *Log) SegmentBytes() int64 { return l.cfg.SegmentBytes }

// Recovery returns what Open found and did.
func (l *Log) Recovery() RecoveryReport { return l.report }

// Stats are cumulative counters.
type Stats struct {
	Appends        int64 // Append calls that stored records
	Records        int64 // records appended
	Bytes          int64 // bytes appended
	Flushes        int64 // flushes that made data durable
	FlushedBytes   int64
	SegmentsRolled int64
	SegmentsDelete int64
	DirectWrites   int64 // writeBuffered flushes written with O_DIRECT (stage.go)
	BlockReads     int64 // blocks read with O_DIRECT for readers (blocks.go)
}

type stats struct {
	appends, records, bytes, flushes, flushedBytes, rolled, deleted, direct, blockReads atomic.Int64
}

// Stats returns the log's counters.
func (l *Log) Stats() Stats {
	return Stats{
		Appends: l.stats.appends.Load(), Records: l.stats.records.Load(), Bytes: l.stats.bytes.Load(),
		Flushes: l.stats.flushes.Load(), FlushedBytes: l.stats.flushedBytes.Load(),
		SegmentsRolled: l.stats.rolled.Load(), SegmentsDelete: l.stats.deleted.Load(),
		DirectWrites: l.stats.direct.Load(), BlockReads: l.stats.blockReads.Load(),
	}
}
