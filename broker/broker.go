package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker/dedup"
	"github.com/gantrymq/gantry/broker/delivery"
	"github.com/gantrymq/gantry/broker/limits"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/tick"
)

// Broker is the protocol-independent core of a broker: topics, send, pull
// with long polling, offsets, consumer groups and status over one store.
// Its methods are safe for concurrent use.
type Broker struct {
	cfg     Config
	log     *slog.Logger
	store   messageStore // storage.go
	meta    *metadata.Metadata
	polls   *notifier
	clients *consumerTable
	locks   *lockTable
	watches *watchTable
	started time.Time

	delivery     *delivery.Service // parked messages, send-backs, dead letters
	deliveryOpen atomic.Bool       // delivery is open: the log's pin may be computed
	limits       *limits.Service   // retention, backlog limits and TTL (limits.go)
	limitsOpen   atomic.Bool       // limits is open: the log's pin may be computed
	repl         replicationState  // replicas.go
	dedup        *dedup.Table      // keys of recent user sends; nil when DuplicationWindow is off
	users        *auth.Store       // auth.go; nil when authentication is off
	guard        *auth.Guard       // nil when authentication is off
	usersMu      sync.Mutex        // serializes user and rule changes (users.go)

	membership hooks[string]      // AddConsumersChangedHook's hooks
	resetHooks hooks[OffsetReset] // AddOffsetResetHook's hooks
	resets     *resetTable        // offsets reset and not yet pulled from

	topicMu sync.Mutex // serializes topic check-then-put (create, update, delete)
	groupMu sync.Mutex // serializes the creation of groups (maxConsumerGroups)
	rr      sync.Map   // topic -> *atomic.Uint32: the broker-picked queue round robin

	deleteMu sync.Mutex // one topic or group deletion at a time (lifecycle.go); taken before topicMu

	msgsPut atomic.Int64 // messages stored by Send
	msgsGot atomic.Int64 // messages returned by Pull

	calls     *gate         // in-flight calls; closed by Close
	closing   chan struct{} // closed when Close starts: wakes held pulls
	shutOnce  sync.Once
	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open validates cfg, recovers the store under cfg.StorePathRootDir and
// starts the broker's background work. ctx bounds recovery only.
func Open(ctx context.Context, cfg Config) (*Broker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.rocketmq.logIgnored(cfg)
	b := &Broker{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "broker"),
		polls:   newNotifier(),
		started: cfg.Now(),
		calls:   newGate(),
		closing: make(chan struct{}),
	}
	b.clients = newConsumerTable(cfg.Now, cfg.ChannelExpiredTimeout)
	b.locks = newLockTable(cfg.Now, cfg.QueueLockTTL)
	b.watches = newWatchTable()
	b.resets = newResetTable(cfg.Now, resetGrace, cfg.ChannelExpiredTimeout)
	if cfg.SlaveReadEnable && cfg.BrokerRole != Slave {
		b.repl.behind = slaveReadBehind(cfg)
	}
	if err := b.openAuth(); err != nil {
		return nil, err
	}
	sc := cfg.StoreConfig()
	sc.OnDispatch = chainDispatch(sc.OnDispatch, b.polls.notify)
	sc.KeepFrom = b.keepFrom // limits.go
	sc.OnCommit = b.notifyCommit
	sc.DispatchLimit = cfg.DispatchLimit
	meta, err := metadata.Open(metadata.Config{Dir: filepath.Join(sc.Root, "config"), FS: sc.FS, Now: sc.Now, Logger: sc.Logger})
	if err != nil {
		b.closeUsers()
		return nil, fmt.Errorf("broker: open store: %w", err)
	}
	sc.Metadata = meta // the store saves it with the log
	st, err := store.Open(ctx, sc)
	if err != nil {
		b.closeUsers()
		return nil, fmt.Errorf("broker: open store: %w%s", err, storeHint(err))
	}
	b.store, b.meta = st, meta
	if err := b.openDelivery(sc); err != nil { // delivery.go
		_ = st.Close()
		b.closeUsers()
		return nil, err
	}
	if err := b.openDedup(ctx); err != nil {
		_ = st.Close()
		b.closeUsers()
		return nil, err
	}
	if err := b.finishDeletions(); err != nil { // lifecycle.go
		_ = st.Close()
		b.closeUsers()
		return nil, err
	}
	if err := b.openLimits(sc); err != nil { // limits.go
		_ = st.Close()
		b.closeUsers()
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.stop = stop
	b.wg.Go(func() { tick.Every(runCtx, expireInterval, b.expireClientsAndLocks) })
	if cfg.BrokerRole != Slave { // a slave's delays, retries and dead letters are its master's
		b.delivery.Start()
	}
	b.limits.Start()
	b.log.Info("broker open", "name", cfg.BrokerName, "cluster", cfg.BrokerClusterName,
		"root", cfg.StorePathRootDir, "topics", len(b.Topics()))
	return b, nil
}

// storeHint says which broker.conf key a store's Open error calls for, ""
// if none.
func storeHint(err error) string {
	var se *store.SpaceError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("; lower maxIndexNum (now %d) and maxHashSlotNum (now %d), which size an index file "+
			"(40 + 4*maxHashSlotNum + 20*maxIndexNum bytes), or mappedFileSizeCommitLog (now %d), or put storePathRootDir on a larger filesystem",
			se.IndexEntries, se.IndexSlots, se.SegmentBytes)
	case errors.Is(err, commitlog.ErrCorrupt):
		return "; to start with them, the damaged range copied to corrupt/ and reported, set skipCorrupt=true in broker.conf " +
			"or run gantry broker --skip-corrupt"
	}
	return ""
}

// storeFS is the store's filesystem.
func storeFS(sc store.Config) fsx.FS {
	if sc.FS == nil {
		return fsx.OS
	}
	return sc.FS
}

// chainDispatch calls first (if set), then then.
func chainDispatch(first, then func(string, int32, int64)) func(string, int32, int64) {
	if first == nil {
		return then
	}
	return func(topic string, queueID int32, maxOffset int64) {
		first(topic, queueID, maxOffset)
		then(topic, queueID, maxOffset)
	}
}

// Close shuts the broker down: later calls fail with ErrShuttingDown, held
// pulls answer at once with no messages, group watches are told (their
// Changed channels close), calls in flight are waited for
// (until ctx ends: then Close returns ctx's error and may be called again),
// the delivery of parked messages stops and records its progress, and the
// store is closed, which flushes the log and saves the metadata.
// Close after a completed Close returns ErrShuttingDown.
func (b *Broker) Close(ctx context.Context) error {
	b.shutOnce.Do(func() {
		b.calls.close()
		close(b.closing)
		b.watches.shutdown()
	})
	if err := b.calls.wait(ctx); err != nil {
		return fmt.Errorf("broker: close: waiting for calls in flight: %w", err)
	}
	err := ErrShuttingDown
	b.closeOnce.Do(func() {
		b.stop()
		b.wg.Wait()
		b.closeUsers()
		b.closeErr = errors.Join(b.delivery.Close(), b.limits.Close(), b.store.Close())
		err = b.closeErr
		b.log.Info("broker closed", "err", err)
	})
	return err
}

// Ready reports whether the broker accepts calls: recovery is done and
// Close has not started.
func (b *Broker) Ready() bool { return !b.calls.isClosed() }

// Config returns the broker's configuration, defaults filled in.
func (b *Broker) Config() Config { return b.cfg }

// gate counts calls in flight and refuses new ones once closed.
type gate struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{} // closed once closed with no call in flight
}

func newGate() *gate { return &gate{idle: make(chan struct{})} }

// enter admits a call, or reports false once the gate is closed. Every
// admitted call must leave.
func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.closed && g.n == 0 {
		close(g.idle)
	}
}

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	if g.n == 0 {
		close(g.idle)
	}
}

func (g *gate) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// wait returns once the gate is closed and no call is in flight, or with
// ctx's error.
func (g *gate) wait(ctx context.Context) error {
	select {
	case <-g.idle: // idle wins over an ended ctx
		return nil
	default:
	}
	select {
	case <-g.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
