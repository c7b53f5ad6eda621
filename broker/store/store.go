package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/consumequeue"
	"github.com/gantrymq/gantry/index"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/tick"
)

// Config configures a Store. The zero value of every field means its default.
type Config struct {
	// Root is storePathRootDir. Required.
	Root string
	// FS is the filesystem. Default fsx.OS.
	FS fsx.FS
	// StoreHost is this broker's address, stored in every record and in
	// offset message ids. Default 127.0.0.1:10911.
	StoreHost netip.AddrPort
	// Log configures the commit log; Dir, StateDir, FS, Now and Logger are
	// set by the store.
	Log commitlog.Config
	// QueueEntriesPerFile is the consume-queue file size in entries. Default 300,000.
	QueueEntriesPerFile int
	// IndexSlots and IndexEntries size the index files. Defaults 5,000,000 and 20,000,000.
	IndexSlots, IndexEntries int
	// FlushInterval is how often consume queues and the index are flushed
	// and the dispatch checkpoint written. Default 1 s.
	FlushInterval time.Duration
	// MetadataInterval is how often changed metadata (topics, groups,
	// consumer and delay offsets) is saved; Close saves too. Default 5 s.
	MetadataInterval time.Duration
	// Metadata is the metadata the store saves with the log, opened by its
	// owner (the broker). Default: opened from Root/config.
	Metadata *metadata.Metadata
	// CheckQueues makes Open cross-check every consume-queue entry against
	// its record (position, size, queue, offset, tags code) and rebuild
	// queues that disagree. It reads every record header: about a second
	// per GiB of log from a cold cache. Get always checks what it reads.
	CheckQueues bool
	// OnDispatch, if set, is called after a message of (topic, queueID) is
	// dispatched, with the queue's new max offset: the hook long polling uses.
	// Re-dispatching an entry the queue already holds (recovery) calls nothing.
	// It runs on the dispatcher goroutine and must not block.
	OnDispatch func(topic string, queueID int32, maxOffset int64)
	// OnCommit, if set, is called each time the log's end grows, after the
	// dispatcher is woken (commitlog.Config.OnCommit's rules: it must not
	// block nor call into the log). A master wakes its slaves' streams
	// with it.
	OnCommit func(end int64)
	// MaxDispatchStall is how long the dispatcher may fail to bring the
	// consume queues and the index up to the log's end (a full disk
	// refusing their next file) before PutBatch refuses messages with
	// ErrDispatchStalled, until it catches up: messages acknowledged
	// meanwhile could not be read. Default 2 s (DefaultMaxDispatchStall);
	// negative: never refuse for a stall.
	MaxDispatchStall time.Duration
	// MaxDispatchLagBytes is how far behind the log's end the dispatcher
	// may be, failing or not, before PutBatch refuses messages with
	// ErrDispatchStalled. Default 256 MiB (DefaultMaxDispatchLagBytes);
	// negative: no limit.
	MaxDispatchLagBytes int64
	// DispatchLimit, if set, bounds dispatch: a record is dispatched (and
	// so read by consumers) only once it ends at or below the log offset
	// it returns; math.MaxInt64 bounds nothing. A controller-mode master
	// bounds it at what every slave of its in-sync set holds, so that no
	// failover takes back a message a consumer has read
	// (docs/REPLICATION.md, "What consumers read"). It runs on the
	// dispatcher goroutine and in Open and must not block; call Kick when
	// its value grows.
	DispatchLimit func() int64
	// KeepFrom, if set, pins the commit log: retention does not delete a
	// segment for its age while it holds an offset at or above the value
	// KeepFrom returns (math.MaxInt64: nothing pinned; see
	// commitlog.Config.KeepFrom, which it overrides). The broker keeps its
	// unexpired dead letters this way. It runs on the log's retention
	// goroutine and may read the store.
	KeepFrom func() int64
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives lifecycle and anomaly logs. Default: discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = fsx.OS
	}
	if !c.StoreHost.IsValid() {
		c.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = time.Second
	}
	if c.MetadataInterval == 0 {
		c.MetadataInterval = 5 * time.Second
	}
	if c.MaxDispatchStall == 0 {
		c.MaxDispatchStall = DefaultMaxDispatchStall
	}
	if c.MaxDispatchLagBytes == 0 {
		c.MaxDispatchLagBytes = DefaultMaxDispatchLagBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if c.Root == "" {
		errs = append(errs, errors.New("store: Root is required"))
	}
	if c.FlushInterval < 0 {
		errs = append(errs, fmt.Errorf("store: FlushInterval must not be negative, got %s", c.FlushInterval))
	}
	if c.MetadataInterval < 0 {
		errs = append(errs, fmt.Errorf("store: MetadataInterval must not be negative, got %s", c.MetadataInterval))
	}
	return errors.Join(errs...)
}

// QueueKey names a consume queue.
type QueueKey struct {
	Topic   string
	QueueID int32
}

// Store is the broker's message store: the commit log, a consume queue per
// (topic, queue) and the key index, kept in step by one dispatcher.
type Store struct {
	cfg  Config
	log  *slog.Logger
	cl   *commitlog.Log
	idx  *index.Store
	meta *metadata.Metadata

	qmu    sync.RWMutex
	queues map[QueueKey]*cqueue

	// next holds each queue's next queue offset. Only PutBatch's stamper
	// touches it after Open, under the commit log's append lock (nextOffset).
	next map[QueueKey]*int64

	dispatched atomic.Int64 // log offset up to which records are dispatched
	limitAt    atomic.Int64 // DispatchLimit's value at the last dispatch (math.MaxInt64 without one)
	// moved is closed when the dispatch position next grows, nil while
	// nobody waits for it (WaitDispatched).
	moved     atomic.Pointer[chan struct{}]
	putEnd    atomic.Int64 // PutEnd
	indexFrom int64        // records below it are already indexed (set by recovery)
	// dispatchFrom is where the dispatcher's run began: it has read every
	// record of the log from there on (under dispatchMu).
	dispatchFrom int64
	skipped      atomic.Int64 // queue offsets skipped because their records were deleted undispatched
	// recoveredEnds holds, when Open could not dispatch the whole log,
	// each queue's end in the log then (RecoveredQueueEnd); nil otherwise.
	// Set by Open, read-only after.
	recoveredEnds map[QueueKey]int64
	dispatchMu    sync.Mutex                   // one dispatcher at a time
	dcache        map[string]map[int32]*cqueue // the dispatcher's queues by topic; under dispatchMu
	dbuf          []byte                       // the dispatcher's copy of the records it reads; under dispatchMu
	kick          chan struct{}
	create        chan *cqueue // new queues whose first file the creator makes (creator.go)
	failMu        sync.Mutex
	failedCreates []*cqueue    // queues whose file the creator could not create (under failMu)
	failedCount   atomic.Int64 // len(failedCreates)
	stall         stall        // the dispatcher's failures (stall.go)
	report        RecoveryReport
	repairs       atomic.Int64 // consume queues rebuilt after a damaged entry was found
	trimmedAt     atomic.Int64 // log min offset derived data was last trimmed to (the flush loop; tests call trim too)

	deleted deletedTopics // tombstones of deleted topics (deletetopic.go)

	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open recovers the store in cfg.Root and starts its dispatcher.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "store"),
		queues: map[QueueKey]*cqueue{},
		next:   map[QueueKey]*int64{},
		kick:   make(chan struct{}, 1),
		create: make(chan *cqueue, createBacklog),
		dcache: map[string]map[int32]*cqueue{},
	}
	s.limitAt.Store(math.MaxInt64)
	meta := cfg.Metadata
	if meta == nil {
		var err error
		meta, err = metadata.Open(metadata.Config{Dir: filepath.Join(cfg.Root, "config"), FS: cfg.FS, Now: cfg.Now, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
	}
	s.meta = meta
	s.report.Metadata = meta.Report()
	lc := cfg.Log
	lc.Dir, lc.StateDir, lc.FS, lc.Now, lc.Logger = filepath.Join(cfg.Root, "commitlog"), cfg.Root, cfg.FS, cfg.Now, cfg.Logger
	lc.OnCommit = func(int64) { s.wake() }
	if f := cfg.OnCommit; f != nil {
		lc.OnCommit = func(end int64) { s.wake(); f(end) }
	}
	lc.DeleteFloor = s.dispatched.Load // no record goes before its queue entry exists
	if cfg.KeepFrom != nil {
		lc.KeepFrom = cfg.KeepFrom
	}
	if err := s.checkSpace(lc, s.indexConfig()); err != nil {
		return nil, err
	}
	cl, err := commitlog.Open(ctx, lc)
	if err != nil {
		return nil, err
	}
	s.cl = cl
	if err := s.openDeleted(); err != nil { // before the queues are opened
		s.closeAll()
		return nil, err
	}
	if err := s.recover(ctx); err != nil {
		s.closeAll()
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	s.wg.Go(func() { s.dispatchLoop(runCtx) })
	s.wg.Go(func() { s.createLoop(runCtx) })
	s.wg.Go(func() { tick.Every(runCtx, cfg.FlushInterval, s.flushStep) })
	s.wg.Go(func() {
		tick.Every(runCtx, cfg.MetadataInterval, func() {
			if err := s.meta.Save(); err != nil {
				s.log.Warn("saving metadata failed; will retry", "err", err)
			}
		})
	})
	return s, nil
}

// Close stops dispatching, flushes the queues and the index, writes the
// dispatch checkpoint and closes every file.
func (s *Store) Close() error {
	err := commitlog.ErrClosed
	s.closeOnce.Do(func() {
		s.stop()
		s.wg.Wait()
		// The consume queues, the index and the dispatch checkpoint are
		// derived from the log: if they cannot be brought up to date (a
		// full disk), the next start re-dispatches the rest from the
		// checkpoint, so closing does not fail for them.
		var errs []error
		if _, err := s.dispatch(); err != nil {
			s.log.Error("closing with records not dispatched; the next start dispatches them", "offset", s.dispatched.Load(), "err", err)
		}
		// A clean checkpoint lets the next start skip the queues' checks;
		// holding dispatchMu keeps a repair (repairQueue) from writing a
		// queue between it and the queues' close.
		s.dispatchMu.Lock()
		if err := s.checkpoint(true); err != nil {
			s.log.Error("closing without a new dispatch checkpoint; the next start dispatches from the last one", "err", err)
		}
		if err := s.closeQueues(); err != nil { // a new queue's file not created (full disk): derived data too
			s.log.Error("closing consume queues failed; the next start dispatches from the last checkpoint", "err", err)
		}
		s.dispatchMu.Unlock()
		if err := s.meta.Save(); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, s.closeAll())
		s.closeErr = errors.Join(errs...)
		err = s.closeErr
	})
	return err
}

// closeQueues closes the consume queues (each flushes first) and forgets them.
func (s *Store) closeQueues() error {
	s.qmu.Lock()
	qs := make([]*cqueue, 0, len(s.queues))
	for _, q := range s.queues {
		qs = append(qs, q)
	}
	s.queues = map[QueueKey]*cqueue{}
	s.qmu.Unlock()
	errs := make([]error, len(qs))
	_ = parallel(len(qs), func(i int) error { errs[i] = qs[i].Close(); return nil })
	return errors.Join(errs...)
}

func (s *Store) closeAll() error {
	errs := []error{s.closeQueues()}
	if s.idx != nil {
		errs = append(errs, s.idx.Close())
	}
	errs = append(errs, s.cl.Close())
	return errors.Join(errs...)
}

func (s *Store) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Kick wakes the dispatcher: Config.DispatchLimit's value grew. It does
// not block.
func (s *Store) Kick() { s.wake() }

// dispatchEnd is where a dispatch stops: the log's readable end, or
// Config.DispatchLimit's value when it is lower.
func (s *Store) dispatchEnd() int64 {
	end, lim := s.cl.MaxOffset(), int64(math.MaxInt64)
	if f := s.cfg.DispatchLimit; f != nil {
		lim = f()
	}
	s.limitAt.Store(lim)
	return min(end, lim)
}

// Metadata returns the store's topics, subscription groups and consumer
// and delay offsets, saved every MetadataInterval and at Close.
func (s *Store) Metadata() *metadata.Metadata { return s.meta }

// CommitLog returns the store's commit log.
func (s *Store) CommitLog() *commitlog.Log { return s.cl }

// cqueue is a consume queue and the first offset whose record retention
// has not deleted yet (files go whole, so the queue's own min lags).
type cqueue struct {
	*consumequeue.Queue
	key      QueueKey
	logicMin atomic.Int64
	queued   atomic.Bool // handed to the creator goroutine (creator.go)
}

// MinOffset is the first offset whose record may still be in the log.
func (q *cqueue) MinOffset() int64 { return max(q.Queue.MinOffset(), q.logicMin.Load()) }

// raiseLogicMin moves the logical min offset up to off; it never lowers it.
func (q *cqueue) raiseLogicMin(off int64) {
	for {
		cur := q.logicMin.Load()
		if off <= cur || q.logicMin.CompareAndSwap(cur, off) {
			return
		}
	}
}

// RaiseQueueMin moves a queue's min offset up to off (at most its max
// offset), hiding the entries below it from Get as retention would: the
// broker drops expired and purged dead letters this way. It never lowers
// the min offset and is not persisted: the caller re-applies it after
// Open. An unknown queue is left alone. It returns the queue's min offset.
func (s *Store) RaiseQueueMin(topic string, queueID int32, off int64) int64 {
	q, _ := s.queue(QueueKey{Topic: topic, QueueID: queueID}, false)
	if q == nil {
		return 0
	}
	q.raiseLogicMin(min(off, q.MaxOffset()))
	return q.MinOffset()
}

func (s *Store) openQueue(ctx context.Context, k QueueKey, dir string, hint consumequeue.Hint) (*cqueue, error) {
	q, err := consumequeue.Open(ctx, consumequeue.Config{
		Dir: dir, FS: s.cfg.FS, EntriesPerFile: s.cfg.QueueEntriesPerFile, Hint: hint, Logger: s.cfg.Logger,
		DeferCreate: true, // the creator goroutine creates a new queue's file (creator.go)
	})
	if err != nil {
		return nil, fmt.Errorf("store: open consume queue %s: %w", k, err)
	}
	return &cqueue{Queue: q, key: k}, nil
}

// queue returns the consume queue of k, opening or creating it.
func (s *Store) queue(k QueueKey, create bool) (*cqueue, error) {
	s.qmu.RLock()
	q := s.queues[k]
	s.qmu.RUnlock()
	if q != nil || !create {
		return q, nil
	}
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if q := s.queues[k]; q != nil {
		return q, nil
	}
	q, err := s.openQueue(context.Background(), k, s.queueDir(k), consumequeue.Hint{})
	if err != nil {
		return nil, err
	}
	s.queues[k] = q
	return q, nil
}

func (s *Store) queueDir(k QueueKey) string {
	return filepath.Join(s.cfg.Root, "consumequeue", k.Topic, strconv.Itoa(int(k.QueueID)))
}

// Queues lists the known consume queues.
func (s *Store) Queues() []QueueKey {
	s.qmu.RLock()
	defer s.qmu.RUnlock()
	keys := make([]QueueKey, 0, len(s.queues))
	for k := range s.queues {
		keys = append(keys, k)
	}
	return keys
}

// The dispatch checkpoint (dispatch.json): a log offset below which every
// record's consume-queue and index entries were flushed, and each queue's
// max offset then. At start a queue holding less than its recorded max
// (its files were deleted or damaged) makes the store rebuild from the log.
const checkpointFile = "dispatch.json"

type dispatchCheckpoint struct {
	Dispatched int64            `json:"dispatched"`
	Queues     map[string]int64 `json:"queues"` // "topic/queueId" -> max offset
	// Clean: written by Close, after which no queue was written: each
	// queue ends exactly at its recorded max offset, and Open trusts that
	// (consumequeue.Hint). Open writes the checkpoint again without it
	// before it changes any queue.
	Clean bool `json:"clean,omitempty"`
}

func (k QueueKey) String() string { return k.Topic + "/" + strconv.Itoa(int(k.QueueID)) }

func (s *Store) checkpointPath() string { return filepath.Join(s.cfg.Root, checkpointFile) }

// checkpoint flushes the queues and the index, then records the dispatch
// position reached before the flush. clean marks it Close's (see
// dispatchCheckpoint.Clean): the caller guarantees no queue is written
// after it.
func (s *Store) checkpoint(clean bool) error {
	cp := dispatchCheckpoint{Dispatched: s.dispatched.Load(), Queues: map[string]int64{}, Clean: clean}
	s.qmu.RLock()
	qs := make([]*cqueue, 0, len(s.queues))
	for _, q := range s.queues {
		qs = append(qs, q)
	}
	s.qmu.RUnlock()
	maxes := make([]int64, len(qs))
	// A new queue whose file the creator has not made yet is not made by
	// the flush loop (thousands took seconds): the checkpoint's dispatch
	// position stays at or below its first entry, so a start after it
	// dispatches them again, and the queue goes back to the creator. Close
	// makes them (Flush), so that a stopped store holds every entry.
	for i, q := range qs {
		if clean {
			break
		}
		if e, ok := q.PendingStart(); ok {
			cp.Dispatched = min(cp.Dispatched, e.Offset)
			maxes[i] = -1
			s.queueCreate(q)
		}
	}
	// In parallel: a queue's first flush syncs its new file's directory
	// too, and thousands of new queues flushed one at a time took seconds.
	err := parallel(len(qs), func(i int) error {
		if maxes[i] < 0 {
			return nil
		}
		maxes[i] = qs[i].MaxOffset()
		if err := qs[i].Flush(); err != nil {
			return fmt.Errorf("store: flush consume queue %s: %w", qs[i].key, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, q := range qs {
		if maxes[i] >= 0 {
			cp.Queues[q.key.String()] = maxes[i]
		}
	}
	if err := s.idx.Flush(); err != nil {
		return fmt.Errorf("store: flush index: %w", err)
	}
	return s.writeCheckpoint(cp)
}

func (s *Store) writeCheckpoint(cp dispatchCheckpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	return fsx.WriteFileAtomic(s.cfg.FS, s.checkpointPath(), b)
}

// queueWorkers bounds the goroutines that open or flush consume queues at
// once: their work is mostly waiting for the disk.
const queueWorkers = 16

// parallel calls fn(0) ... fn(n-1) on up to queueWorkers goroutines, all
// joined before it returns, and returns the first error.
func parallel(n int, fn func(i int) error) error {
	var (
		next atomic.Int64
		mu   sync.Mutex
		errs error
		wg   sync.WaitGroup
	)
	for range min(n, queueWorkers) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if errs == nil {
						errs = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return errs
}

func (s *Store) readCheckpoint() (dispatchCheckpoint, bool) {
	var cp dispatchCheckpoint
	b, err := fsx.ReadFile(s.cfg.FS, s.checkpointPath())
	if err == nil {
		err = json.Unmarshal(b, &cp)
	}
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("dispatch checkpoint unreadable; rebuilding consume queues and index from the whole log", "file", s.checkpointPath(), "err", err)
		}
		return dispatchCheckpoint{}, false
	}
	return cp, true
}

// flushStep flushes the queues and the index, writes the dispatch
// checkpoint and applies retention; the flush loop runs it every
// FlushInterval.
func (s *Store) flushStep() {
	if err := s.checkpoint(false); err != nil {
		s.log.Warn("store checkpoint failed", "err", err)
	}
	if err := s.trim(); err != nil {
		s.log.Warn("deleting consume-queue and index files below the log's min offset failed", "err", err)
	}
	s.forgetDeleted()
}

// trim deletes consume-queue and index files wholly below the commit log's
// min offset, once retention has moved it, and moves each queue's logical
// min offset to its first entry still in the log.
func (s *Store) trim() error {
	logMin := s.cl.MinOffset()
	if logMin <= s.trimmedAt.Load() {
		return nil
	}
	var errs []error
	s.qmu.RLock()
	qs := make([]*cqueue, 0, len(s.queues))
	for _, q := range s.queues {
		qs = append(qs, q)
	}
	s.qmu.RUnlock()
	for _, q := range qs {
		if _, err := q.DeleteBelow(logMin); err != nil {
			errs = append(errs, err)
		}
		q.raiseLogicMin(firstAtOrAbove(q.Queue, logMin))
	}
	if _, err := s.idx.DeleteBelow(logMin); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.trimmedAt.Store(logMin)
	return nil
}

// firstAtOrAbove returns the first queue offset whose entry points at or
// above phys (entries rise with the queue offset), MaxOffset if none does.
func firstAtOrAbove(q *consumequeue.Queue, phys int64) int64 {
	lo, hi := q.MinOffset(), q.MaxOffset()
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, err := q.Get(mid)
		if err != nil {
			return q.MinOffset()
		}
		if e.Offset >= phys {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// TruncateLog cuts the commit log of the store in cfg.Root at offset
// (commitlog.Truncate: recorded in Root/truncations.log), for a replica
// whose log extends past the history it shares with a new master. The
// store must be closed; Open then rebuilds the queues to the new end.
func TruncateLog(ctx context.Context, cfg Config, offset int64, reason string) (commitlog.TruncateReport, error) {
	return commitlog.Truncate(ctx, cfg.logConfig(), offset, reason)
}

// logConfig is the commit log's configuration under cfg, without the
// store's hooks.
func (cfg Config) logConfig() commitlog.Config {
	cfg = cfg.withDefaults()
	lc := cfg.Log
	lc.Dir, lc.StateDir, lc.FS, lc.Now, lc.Logger = filepath.Join(cfg.Root, "commitlog"), cfg.Root, cfg.FS, cfg.Now, cfg.Logger
	return lc
}

// ResetLog empties the commit log of the store in cfg.Root and makes it
// start at offset (commitlog.ResetTo: recorded in Root/truncations.log),
// for a replica that copies its master's log from the master's first
// segment. The store must be closed; Open then resumes each queue at the
// queue offset of its first record from there.
func ResetLog(ctx context.Context, cfg Config, offset int64, reason string) (commitlog.TruncateReport, error) {
	return commitlog.ResetTo(ctx, cfg.logConfig(), offset, reason)
}
