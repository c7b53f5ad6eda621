package consumequeue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Queue is one consume queue: the ordered list of entries of one
// (topic, queueId). See the package documentation for which methods may run
// concurrently.
type Queue struct {
	cfg       Config
	log       *slog.Logger
	fileBytes int // EntriesPerFile * EntrySize

	// wmu serializes the writer methods (Append, TruncatePhysical,
	// DeleteBelow) and Close.
	wmu sync.Mutex
	// rmu is held shared by readers while they touch mapped memory and
	// exclusively by the rare writer steps that change bytes below MaxOffset
	// or unmap files (TruncatePhysical, DeleteBelow, restart, Close).
	rmu    sync.RWMutex
	closed bool // guarded by rmu (written under wmu+rmu)

	files atomic.Pointer[fileList]
	min   atomic.Int64 // first valid queue offset
	max   atomic.Int64 // next queue offset; published after the entry bytes

	// fmu serializes Flush; flushed is the logical byte offset below which
	// everything is durable.
	fmu     sync.Mutex
	flushed int64

	recovery RecoveryInfo
	scanInfo ScanInfo

	// pend holds the entries of a queue whose first file is not created
	// yet (Config.DeferCreate); nil otherwise. Written under wmu (and rmu
	// when it shrinks); readers load it after max and before files.
	pend atomic.Pointer[pending]
	// cmu serializes Materialize, which creates the first file without
	// holding wmu; taken before wmu.
	cmu sync.Mutex
}

// pending is the in-memory start of a queue without files: entries from
// queue offset from on, from at the start of a file. The slice is never
// written below its length once published.
type pending struct {
	from    int64
	entries []Entry
}

// maxPending is how many entries a queue holds in memory before Append
// creates its file itself.
const maxPending = 4096

// ScanInfo says what Open read to recover the queue.
type ScanInfo struct {
	Bytes   int64 // bytes of the queue's files read
	Trusted bool  // the end came from a clean close's hint (Config.Hint)
}

// RecoveryInfo reports what Open found.
type RecoveryInfo struct {
	Files            int   // files kept
	MinOffset        int64 // first valid queue offset
	MaxOffset        int64 // next queue offset to be written
	TruncatedEntries int64 // non-zero entry slots after the end that were zeroed or removed
}

// Open opens the queue in cfg.Dir, creating the directory if missing, and
// recovers it: the queue ends at the first invalid entry, and everything
// after it is zeroed on disk. The caller's ctx bounds recovery only.
func Open(ctx context.Context, cfg Config) (*Queue, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	q := &Queue{
		cfg:       cfg,
		log:       cfg.Logger.With("component", "consumequeue", "dir", cfg.Dir),
		fileBytes: cfg.EntriesPerFile * EntrySize,
	}
	q.files.Store(&fileList{})
	if !cfg.DeferCreate { // else the first file's creation makes it
		if err := cfg.FS.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("consumequeue: create %s: %w", cfg.Dir, err)
		}
	}
	if err := q.recover(ctx); err != nil {
		q.closeFiles()
		return nil, err
	}
	return q, nil
}

// Recovery reports what Open found.
func (q *Queue) Recovery() RecoveryInfo { return q.recovery }

// RecoveryScan reports what Open read to find the queue's end.
func (q *Queue) RecoveryScan() ScanInfo { return q.scanInfo }

// MinOffset is the first valid queue offset.
func (q *Queue) MinOffset() int64 { return q.min.Load() }

// MaxOffset is the next queue offset to be written: one past the last entry.
func (q *Queue) MaxOffset() int64 { return q.max.Load() }

// Append stores e at queueOffset.
//
// At MaxOffset it appends, rolling to a new file when the
// current one is full. Below MaxOffset it is a no-op when the stored entry
// equals e (re-dispatch after a crash is idempotent) and ErrConflict
// otherwise. Beyond MaxOffset it starts the queue there if the queue is
// empty (MinOffset == MaxOffset), and fails with ErrNotContiguous if not.
func (q *Queue) Append(queueOffset int64, e Entry) error {
	if !e.Valid() {
		return fmt.Errorf("%w: queue offset %d: %+v (want Offset >= 0, Size > 0)", ErrInvalidEntry, queueOffset, e)
	}
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.isClosed() {
		return ErrClosed
	}
	max, min := q.max.Load(), q.min.Load()
	switch {
	case queueOffset < max:
		return q.checkStored(queueOffset, e)
	case queueOffset > max && max != min:
		return fmt.Errorf("%w: offset %d, max offset %d", ErrNotContiguous, queueOffset, max)
	case queueOffset > max:
		if err := q.restartAt(queueOffset); err != nil {
			return err
		}
	}
	return q.appendAt(queueOffset, e)
}

func (q *Queue) isClosed() bool {
	q.rmu.RLock()
	defer q.rmu.RUnlock()
	return q.closed
}

// checkStored implements Append below MaxOffset; the caller holds wmu.
func (q *Queue) checkStored(queueOffset int64, e Entry) error {
	if queueOffset < q.min.Load() {
		return fmt.Errorf("%w: append at %d, min offset %d", ErrOffsetTooSmall, queueOffset, q.min.Load())
	}
	got, ok := q.entryLocked(queueOffset)
	if !ok {
		return fmt.Errorf("consumequeue: no file holds offset %d", queueOffset) // broken invariant
	}
	if got != e {
		return fmt.Errorf("%w: offset %d holds %+v, append brought %+v", ErrConflict, queueOffset, got, e)
	}
	return nil
}

// entryLocked returns the stored entry at queueOffset (below MaxOffset);
// the caller holds wmu.
func (q *Queue) entryLocked(queueOffset int64) (Entry, bool) {
	if p := q.pend.Load(); p != nil {
		i := queueOffset - p.from
		if i < 0 || i >= int64(len(p.entries)) {
			return Entry{}, false
		}
		return p.entries[i], true
	}
	pos := queueOffset * EntrySize
	f := q.files.Load().find(pos)
	if f == nil {
		return Entry{}, false
	}
	return decodeEntry(f.b[pos-f.base:]), true
}

// appendAt writes e at queueOffset == MaxOffset and publishes it.
func (q *Queue) appendAt(queueOffset int64, e Entry) error {
	pos := queueOffset * EntrySize
	l := q.files.Load()
	if p := q.pend.Load(); p != nil || (q.cfg.DeferCreate && len(l.files) == 0 && pos%int64(q.fileBytes) == 0) {
		if p == nil {
			p = &pending{from: queueOffset}
		}
		if len(p.entries) < min(maxPending, q.cfg.EntriesPerFile) { // they all go into the first file
			q.pend.Store(&pending{from: p.from, entries: append(p.entries, e)})
			q.max.Store(queueOffset + 1)
			return nil
		}
		// Nobody created the file in time: create it here.
		f, err := q.createFirst(p, "")
		if err != nil {
			return err
		}
		if err := q.fillPending(f); err != nil {
			return err
		}
		l = q.files.Load()
	}
	f := l.find(pos)
	if f == nil {
		var err error
		if f, err = q.roll(l, pos); err != nil {
			return err
		}
	}
	if err := f.reserve(int(pos-f.base) + EntrySize); err != nil {
		return err
	}
	putEntry(f.b[pos-f.base:], e)
	q.max.Store(queueOffset + 1)
	return nil
}

// Deferred reports whether Append holds the queue's entries in memory,
// its first file not created yet (Config.DeferCreate): Materialize
// creates it.
func (q *Queue) Deferred() bool { return q.pend.Load() != nil }

// Materialize creates the first file of a queue whose entries Append
// holds in memory (Config.DeferCreate) and moves them into it; it does
// nothing for a queue with files. The file is created under a temporary
// name without blocking Append, then renamed and filled under the writer
// lock. Flush calls it.
func (q *Queue) Materialize() error {
	q.cmu.Lock()
	defer q.cmu.Unlock()
	p := q.pend.Load()
	if p == nil || q.isClosed() { // closed: no directory made again for a queue being removed
		return nil
	}
	base := p.from * EntrySize
	final := filepath.Join(q.cfg.Dir, fileName(base))
	f, err := q.createFirst(p, creatingSuffix)
	if err != nil {
		return err
	}
	discard := func() {
		f.close()
		q.cfg.FS.Remove(f.path)
	}
	err = func() error {
		q.wmu.Lock()
		defer q.wmu.Unlock()
		if now := q.pend.Load(); q.isClosed() || now == nil || now.from != p.from {
			discard() // closed, restarted or created by Append meanwhile
			f = nil
			return nil
		}
		if err := q.cfg.FS.Rename(f.path, final); err != nil {
			discard()
			return fmt.Errorf("consumequeue: rename %s: %w", f.path, err)
		}
		f.path = final
		return q.fillPending(f)
	}()
	if err != nil || f == nil {
		return err
	}
	// The directory entry's fsync here, off the writer's path, spares the
	// first Flush (or Close) of the queue from it.
	return f.settle()
}

// PendingStart returns the first entry Append holds in memory for a queue
// whose first file is not created yet (Config.DeferCreate); ok is false
// for any other queue.
func (q *Queue) PendingStart() (e Entry, ok bool) {
	if p := q.pend.Load(); p != nil && len(p.entries) > 0 {
		return p.entries[0], true
	}
	return Entry{}, false
}

// createFirst creates the directory and the first file of a queue whose
// entries p holds.
func (q *Queue) createFirst(p *pending, suffix string) (*qfile, error) {
	if err := q.cfg.FS.MkdirAll(q.cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("consumequeue: create %s: %w", q.cfg.Dir, err)
	}
	return createFile(q.cfg.FS, q.cfg.Dir, p.from*EntrySize, q.fileBytes, suffix)
}

// creatingSuffix marks a file Materialize is creating; Open removes such
// files, left by a crash.
const creatingSuffix = ".creating"

// fillPending writes the pending entries into f, the queue's new first
// file, and publishes it in their place; the caller holds wmu. On failure
// f is removed and the entries stay pending.
func (q *Queue) fillPending(f *qfile) error {
	p := q.pend.Load()
	if err := f.reserve(len(p.entries) * EntrySize); err != nil {
		f.close()
		q.cfg.FS.Remove(f.path)
		return err
	}
	for i, e := range p.entries {
		putEntry(f.b[i*EntrySize:], e)
	}
	q.files.Store(&fileList{files: []*qfile{f}})
	q.pend.Store(nil) // after the files: a reader that finds it nil finds the file
	q.log.Debug("new file", "file", f.path, "entries", len(p.entries))
	return nil
}

// roll creates the file starting at pos (the end of the last file, or the
// aligned start of an empty queue) and publishes the longer list.
func (q *Queue) roll(l *fileList, pos int64) (*qfile, error) {
	base := pos - pos%int64(q.fileBytes)
	if last := l.last(); last != nil && last.end() != base {
		return nil, fmt.Errorf("consumequeue: roll to %d after file ending at %d", base, last.end()) // broken invariant
	} else if last != nil {
		// The full file becomes durable before any entry lands in the next
		// one, so a crash never tears an earlier file behind a later one.
		if err := last.sync(0, len(last.b)); err != nil {
			return nil, err
		}
	}
	f, err := createFile(q.cfg.FS, q.cfg.Dir, base, q.fileBytes, "")
	if err != nil {
		return nil, err
	}
	files := append(append(make([]*qfile, 0, len(l.files)+1), l.files...), f)
	q.files.Store(&fileList{files: files})
	q.log.Debug("new file", "file", f.path)
	return f, nil
}

// RestartAt empties the queue and starts it at queueOffset, which must not
// be below MaxOffset: every entry goes, and the next Append is at
// queueOffset. The store calls it for a queue whose entries all point at
// records the commit log no longer holds, when the log's next record of the
// queue comes after offsets whose records are gone too.
func (q *Queue) RestartAt(queueOffset int64) error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.isClosed() {
		return ErrClosed
	}
	max := q.max.Load()
	if queueOffset < max {
		return fmt.Errorf("consumequeue: restart at %d below max offset %d", queueOffset, max)
	}
	q.rmu.Lock()
	q.min.Store(max) // empty from here on: readers touch no file
	q.rmu.Unlock()
	return q.restartAt(queueOffset)
}

// restartAt empties the queue and starts it at queueOffset: existing files
// go, and the file holding queueOffset gets placeholders before it.
func (q *Queue) restartAt(queueOffset int64) error {
	old := q.files.Load()
	q.rmu.Lock()
	q.pend.Store(nil)
	q.files.Store(&fileList{})
	var errs []error
	for _, f := range old.files {
		errs = append(errs, f.close())
	}
	q.rmu.Unlock()
	for _, f := range old.files {
		errs = append(errs, q.cfg.FS.Remove(f.path))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consumequeue: restart at %d: %w", queueOffset, err)
	}
	pos := queueOffset * EntrySize
	if err := q.cfg.FS.MkdirAll(q.cfg.Dir, 0o755); err != nil { // a deferred queue has no directory yet
		return fmt.Errorf("consumequeue: create %s: %w", q.cfg.Dir, err)
	}
	f, err := q.roll(&fileList{}, pos)
	if err != nil {
		return err
	}
	n := int(pos - f.base)
	if err := f.reserve(n + EntrySize); err != nil {
		return err
	}
	for i := 0; i < n; i += EntrySize {
		putEntry(f.b[i:], placeholder)
	}
	if n > 0 {
		if err := f.sync(0, n); err != nil {
			return fmt.Errorf("consumequeue: sync placeholders: %w", err)
		}
	}
	q.fmu.Lock()
	q.flushed = pos
	q.fmu.Unlock()
	q.min.Store(queueOffset)
	q.max.Store(queueOffset)
	q.log.Info("queue starts at non-zero offset", "offset", queueOffset)
	return nil
}

// Get returns the entry at queueOffset.
func (q *Queue) Get(queueOffset int64) (Entry, error) {
	q.rmu.RLock()
	defer q.rmu.RUnlock()
	if q.closed {
		return Entry{}, ErrClosed
	}
	max := q.max.Load() // before the file list: the list covers every offset below it
	if min := q.min.Load(); queueOffset < min {
		return Entry{}, fmt.Errorf("%w: %d < %d", ErrOffsetTooSmall, queueOffset, min)
	}
	if queueOffset >= max {
		return Entry{}, fmt.Errorf("%w: %d >= %d", ErrOffsetTooBig, queueOffset, max)
	}
	if p := q.pend.Load(); p != nil {
		return p.entries[queueOffset-p.from], nil
	}
	pos := queueOffset * EntrySize
	f := q.files.Load().find(pos)
	return decodeEntry(f.b[pos-f.base:]), nil
}

// Read appends to dst up to max entries starting at queue offset from,
// stopping at MaxOffset, and returns the extended slice. from == MaxOffset
// returns dst unchanged.
func (q *Queue) Read(from int64, max int, dst []Entry) ([]Entry, error) {
	q.rmu.RLock()
	defer q.rmu.RUnlock()
	if q.closed {
		return dst, ErrClosed
	}
	end := q.max.Load()
	if min := q.min.Load(); from < min {
		return dst, fmt.Errorf("%w: %d < %d", ErrOffsetTooSmall, from, min)
	}
	if from > end {
		return dst, fmt.Errorf("%w: %d > %d", ErrOffsetTooBig, from, end)
	}
	if max <= 0 {
		return dst, nil
	}
	if int64(max) < end-from {
		end = from + int64(max)
	}
	if p := q.pend.Load(); p != nil {
		return append(dst, p.entries[from-p.from:end-p.from]...), nil
	}
	l := q.files.Load()
	for pos, stop := from*EntrySize, end*EntrySize; pos < stop; {
		f := l.find(pos)
		for ; pos < stop && pos < f.end(); pos += EntrySize {
			dst = append(dst, decodeEntry(f.b[pos-f.base:]))
		}
	}
	return dst, nil
}

// LastEntry returns the last entry and its queue offset; ok is false when
// the queue is empty. The commit-log end the queue covers is e.End().
func (q *Queue) LastEntry() (queueOffset int64, e Entry, ok bool) {
	for {
		max, min := q.max.Load(), q.min.Load()
		if max <= min {
			return 0, Entry{}, false
		}
		e, err := q.Get(max - 1)
		if err == nil {
			return max - 1, e, true
		}
		if !errors.Is(err, ErrOffsetTooBig) && !errors.Is(err, ErrOffsetTooSmall) {
			return 0, Entry{}, false // closed
		}
		// truncated or deleted meanwhile: look again
	}
}

// Close flushes, unmaps and closes the files. Later calls of any method
// return ErrClosed.
func (q *Queue) Close() error {
	q.cmu.Lock()
	defer q.cmu.Unlock()
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.isClosed() {
		return ErrClosed
	}
	var err error
	if p := q.pend.Load(); p != nil {
		var f *qfile
		if f, err = q.createFirst(p, ""); err == nil {
			err = q.fillPending(f)
		}
	}
	if err == nil {
		err = q.flush()
	}
	q.rmu.Lock()
	q.closed = true
	q.rmu.Unlock()
	return errors.Join(err, q.closeFiles())
}

func (q *Queue) closeFiles() error {
	var errs []error
	for _, f := range q.files.Load().files {
		errs = append(errs, f.close())
	}
	q.files.Store(&fileList{})
	return errors.Join(errs...)
}
