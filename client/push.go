package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
	"time"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
)

// ConsumeResult is what a push consumer's handler says about a batch.
type ConsumeResult int

const (
	// ConsumeSuccess: the batch is handled; its offsets may be committed.
	ConsumeSuccess ConsumeResult = iota
	// ConsumeRetryLater: handle the batch again later. In clustering a
	// concurrent consumer sends each message back to the broker, which
	// delivers it again through the group's retry topic after the retry
	// ladder's next delay (10 s, 30 s, 1 m, ... 2 h) and, after
	// MaxReconsumeTimes failures (16 by default), moves it to the group's
	// dead-letter topic; the rest of the queue goes on meanwhile. Where the
	// broker cannot take it back (and in broadcasting) the batch is handed
	// to the handler again after the retry delay. An ordered consumer
	// behaves as for ConsumeSuspend.
	ConsumeRetryLater
	// ConsumeSuspend (ordered consumption): pause the queue for the suspend
	// time, then hand the same batch again; later messages of the queue
	// wait. After MaxReconsumeTimes attempts (unlimited by default) the
	// batch is dead-lettered and the queue goes on.
	ConsumeSuspend
	// ConsumeDeadLetter: move the batch to the group's dead-letter topic at
	// once, without retries (in broadcasting too: each member that
	// dead-letters its copy stores one).
	ConsumeDeadLetter
)

// String returns the result's name.
func (r ConsumeResult) String() string {
	switch r {
	case ConsumeSuccess:
		return "SUCCESS"
	case ConsumeRetryLater:
		return "RETRY_LATER"
	case ConsumeSuspend:
		return "SUSPEND"
	case ConsumeDeadLetter:
		return "DEAD_LETTER"
	}
	return fmt.Sprintf("ConsumeResult(%d)", int(r))
}

// MessageHandler handles a batch of messages of one queue (at most the
// consume batch size, 1 by default). ctx ends at the consume timeout
// (WithConsumeTimeout) or when Shutdown stops waiting for handlers. A
// panic, or a call that outlasts the consume timeout, counts as
// ConsumeRetryLater. The messages alias their pull's response (see
// MessageExt): Detach those kept after the handler returns.
//
// The result settles the whole batch. To settle a message of it apart,
// call its RetryAfter or DeadLetter before returning: the result then
// applies to the other messages only.
type MessageHandler func(ctx context.Context, msgs []*MessageExt) ConsumeResult

// ConsumeModel is how the members of a group share the messages.
type ConsumeModel int

const (
	// Clustering (the default): each queue is consumed by one member, and
	// the group's offsets are kept on the brokers.
	Clustering ConsumeModel = iota
	// Broadcasting: every member consumes every queue; each member's
	// offsets are kept on the brokers under its Config.ClientID, so a
	// member restarted with the same ClientID resumes where it stopped.
	Broadcasting
)

// String returns the model's RocketMQ name.
func (m ConsumeModel) String() string {
	if m == Broadcasting {
		return "BROADCASTING"
	}
	return "CLUSTERING"
}

// ConsumeFrom is where a group that has no committed offset for a queue
// starts.
type ConsumeFrom int

const (
	// ConsumeFromLastOffset (the default) starts at the end of the queue:
	// only messages stored from then on.
	ConsumeFromLastOffset ConsumeFrom = iota
	// ConsumeFromFirstOffset starts at the oldest message kept.
	ConsumeFromFirstOffset
	// ConsumeFromTimestamp starts at the first message stored at or after
	// the time given by WithConsumeTimestamp (default: 30 minutes before
	// NewPushConsumer).
	ConsumeFromTimestamp
)

// Defaults of the push consumer's options (RocketMQ's, unless said).
const (
	DefaultConsumeConcurrency     = 20
	DefaultFetchBatchSize         = 256              // messages per fetch (RocketMQ: 32, which fetches slower here)
	DefaultFetchThresholdMessages = 1024             // cached messages per queue
	DefaultFetchThresholdBytes    = 64 << 20         // cached body bytes per queue (RocketMQ: 512 MiB)
	DefaultMaxSpan                = 2000             // offset span of cached messages per queue
	DefaultRebalanceInterval      = 20 * time.Second //
	DefaultCommitInterval         = 5 * time.Second
	DefaultHeartbeatInterval      = 30 * time.Second // liveness only: membership rides on the group watch
	DefaultFetchHold              = 15 * time.Second // long polling
	DefaultRetryDelay             = time.Second      // local retries of a concurrent consumer
	DefaultSuspendTime            = time.Second      // ConsumeSuspend, ordered
	DefaultConsumeTimeout         = 15 * time.Minute // a handler call taking longer counts as failed
	DefaultShutdownTimeout        = 15 * time.Second // Shutdown's drain when its context has already ended
	DefaultLockRenewInterval      = 20 * time.Second // clustering: locks live 60 s on the broker
	lockLocalExpiry               = 30 * time.Second // clustering: a lock not renewed for this long is not trusted
	flowControlPause              = 50 * time.Millisecond
	// workBuffer is how many tasks wait for the workers at most. Memory is
	// bounded by the process queues' limits, not by this buffer: it is
	// large so that a pull loop hands a pull's tasks over and pulls again
	// instead of waiting for workers to come free.
	workBuffer                  = 1024
	retryRebalanceAfterLockFail = 200 * time.Millisecond
)

// PushConsumerOption sets an option of a PushConsumer.
type PushConsumerOption func(*pushOptions)

type pushOptions struct {
	model          ConsumeModel
	ordered        bool
	from           ConsumeFrom
	fromTime       time.Time
	strategy       AllocateStrategy
	batchSize      int
	concurrency    int
	pullBatch      int
	threshMsgs     int
	threshBytes    int64
	maxSpan        int64
	rebalanceEvery time.Duration
	commitEvery    time.Duration
	heartbeatEvery time.Duration
	hold           time.Duration
	holdMargin     time.Duration
	retryDelay     time.Duration
	suspendTime    time.Duration
	lockRenewEvery time.Duration
	maxReconsume   int // <= 0: the group's (concurrent) or unlimited (ordered)
	consumeTimeout time.Duration
	shutdownGrace  time.Duration
	backLinger     time.Duration // sendBackLinger; tests change it
}

func defaultPushOptions() pushOptions {
	return pushOptions{
		strategy: AllocateAveragely, batchSize: 1, concurrency: DefaultConsumeConcurrency,
		pullBatch: DefaultFetchBatchSize, threshMsgs: DefaultFetchThresholdMessages, threshBytes: DefaultFetchThresholdBytes,
		maxSpan: DefaultMaxSpan, rebalanceEvery: DefaultRebalanceInterval, commitEvery: DefaultCommitInterval,
		heartbeatEvery: DefaultHeartbeatInterval, hold: DefaultFetchHold, holdMargin: DefaultHoldMargin,
		retryDelay: DefaultRetryDelay, suspendTime: DefaultSuspendTime, lockRenewEvery: DefaultLockRenewInterval,
		consumeTimeout: DefaultConsumeTimeout, shutdownGrace: DefaultShutdownTimeout, backLinger: sendBackLinger,
	}
}

func (o pushOptions) validate() error {
	var errs []error
	positive := func(name string, v int64) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("client: push consumer option %s must be positive, got %d", name, v))
		}
	}
	positive("consume batch size", int64(o.batchSize))
	positive("consume concurrency", int64(o.concurrency))
	positive("fetch batch size", int64(o.pullBatch))
	positive("fetch threshold messages", int64(o.threshMsgs))
	positive("fetch threshold bytes", o.threshBytes)
	positive("max span", o.maxSpan)
	for name, d := range map[string]time.Duration{
		"rebalance interval": o.rebalanceEvery, "commit interval": o.commitEvery, "heartbeat interval": o.heartbeatEvery,
		"fetch hold": o.hold, "retry delay": o.retryDelay, "suspend time": o.suspendTime, "lock renew interval": o.lockRenewEvery,
		"consume timeout": o.consumeTimeout, "shutdown timeout": o.shutdownGrace,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("client: push consumer option %s must be positive, got %s", name, d))
		}
	}
	if o.lockRenewEvery >= lockLocalExpiry {
		errs = append(errs, fmt.Errorf("client: lock renew interval %s must be below %s", o.lockRenewEvery, lockLocalExpiry))
	}
	if o.strategy == nil {
		errs = append(errs, errors.New("client: allocate strategy is nil"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return nil
}

// WithConsumeModel sets how the members of the group share the messages:
// Clustering (the default: each queue to one member) or Broadcasting
// (every member gets every message).
func WithConsumeModel(m ConsumeModel) PushConsumerOption {
	return func(o *pushOptions) { o.model = m }
}

// WithOrdered makes the consumer handle each queue strictly in offset
// order, one batch at a time, on one goroutine per queue (default:
// concurrent, on WithConsumeConcurrency goroutines). A failed batch pauses
// its queue for WithSuspendTime and is handed again; nothing later in the
// queue overtakes it.
func WithOrdered() PushConsumerOption { return func(o *pushOptions) { o.ordered = true } }

// WithConsumeFrom sets where a queue the group has no committed offset
// for starts (default ConsumeFromLastOffset: only messages stored from
// then on).
func WithConsumeFrom(f ConsumeFrom) PushConsumerOption {
	return func(o *pushOptions) { o.from = f }
}

// WithConsumeTimestamp sets the time ConsumeFromTimestamp starts at
// (default 30 minutes before NewPushConsumer).
func WithConsumeTimestamp(t time.Time) PushConsumerOption {
	return func(o *pushOptions) { o.fromTime = t }
}

// WithAllocateStrategy sets how the group's members share the queues in
// clustering (default AllocateAveragely).
func WithAllocateStrategy(s AllocateStrategy) PushConsumerOption {
	return func(o *pushOptions) { o.strategy = s }
}

// WithConsumeBatchSize sets the most messages of one queue the handler
// gets in one call (default 1).
func WithConsumeBatchSize(n int) PushConsumerOption {
	return func(o *pushOptions) { o.batchSize = n }
}

// WithConsumeConcurrency sets how many handler calls run at once in
// concurrent consumption (default 20). Ordered consumption runs one per
// queue.
func WithConsumeConcurrency(n int) PushConsumerOption {
	return func(o *pushOptions) { o.concurrency = n }
}

// WithFetchBatchSize sets the most messages one of the push consumer's
// background fetches of a queue asks the broker for (default 256), within
// what WithFetchThreshold leaves.
func WithFetchBatchSize(n int) PushConsumerOption {
	return func(o *pushOptions) { o.pullBatch = n }
}

// WithFetchThreshold sets the flow control of each queue: fetching pauses
// while the queue holds this many messages not handled yet, or this many
// body bytes (defaults 1,024 and 64 MiB); a fetch never asks for more than
// the message limit leaves. Both count the messages not handled yet: the
// consumer lets go of a handled message even while one before it still
// runs (or waits to go back to the broker, as a copy), keeping only its
// offset for the commit; WithMaxSpan bounds those offsets.
func WithFetchThreshold(messages int, bytes int64) PushConsumerOption {
	return func(o *pushOptions) { o.threshMsgs, o.threshBytes = messages, bytes }
}

// WithMaxSpan pauses fetching a queue while the offsets it holds span more
// than n (default 2,000): one slow message does not let the rest run ahead
// without bound. Concurrent consumption only.
func WithMaxSpan(n int64) PushConsumerOption { return func(o *pushOptions) { o.maxSpan = n } }

// WithRebalanceInterval sets how often the consumer recomputes its share
// of the queues when nothing changed (default 20 s): a safety net, since a
// member joining or leaving rebalances at once.
func WithRebalanceInterval(d time.Duration) PushConsumerOption {
	return func(o *pushOptions) { o.rebalanceEvery = d }
}

// WithCommitInterval sets how often the consumer commits its queues'
// offsets to the brokers (default 5 s); they are also committed when a
// queue is released and at Shutdown. After a crash at most this much is
// handled again.
func WithCommitInterval(d time.Duration) PushConsumerOption {
	return func(o *pushOptions) { o.commitEvery = d }
}

// WithHeartbeatInterval sets how often the consumer heartbeats to its
// brokers (default 30 s). It keeps the member alive only: joins and leaves
// reach the other members through the group watch at once.
func WithHeartbeatInterval(d time.Duration) PushConsumerOption {
	return func(o *pushOptions) { o.heartbeatEvery = d }
}

// WithFetchHold sets how long each of the push consumer's background
// fetches waits on the broker for new messages when its queue has none
// (default 15 s, long polling).
func WithFetchHold(d time.Duration) PushConsumerOption { return func(o *pushOptions) { o.hold = d } }

// WithRetryDelay sets how long a concurrent consumer waits before it
// hands a failed batch (ConsumeRetryLater) to the handler again itself
// (default 1 s): in broadcasting, and when the broker does not take a
// message back. In clustering the broker's retry ladder times retries.
func WithRetryDelay(d time.Duration) PushConsumerOption {
	return func(o *pushOptions) { o.retryDelay = d }
}

// WithSuspendTime sets how long an ordered queue pauses after a failed
// batch before it is handed again (default 1 s); MessageExt.RetryAfter
// pauses it for its own delay instead.
func WithSuspendTime(d time.Duration) PushConsumerOption {
	return func(o *pushOptions) { o.suspendTime = d }
}

// WithConsumeTimeout bounds a handler call (default 15 min): its context
// ends then, and a call that returns later counts as ConsumeRetryLater
// whatever it returned.
func WithConsumeTimeout(d time.Duration) PushConsumerOption {
	return func(o *pushOptions) { o.consumeTimeout = d }
}

// WithShutdownTimeout sets how long Shutdown lets the handlers in flight
// finish when the context it is given has already ended at the call, as
// the one of a `defer c.Shutdown(ctx)` whose ctx a signal ended (default
// 15 s); their contexts are canceled then. A context still live at the
// call bounds the drain instead.
func WithShutdownTimeout(d time.Duration) PushConsumerOption {
	return func(o *pushOptions) { o.shutdownGrace = d }
}

// WithMaxReconsumeTimes sets how many times a failed message is retried
// before it is dead-lettered. Default: the group's retryMaxTimes on the
// broker (16) for concurrent consumption, unlimited for ordered.
func WithMaxReconsumeTimes(n int) PushConsumerOption {
	return func(o *pushOptions) { o.maxReconsume = n }
}

// WithLockRenewInterval sets how often a consumer in clustering renews the
// locks of its queues on the brokers (default 20 s; below 30 s, after
// which a lock not renewed is not trusted).
func WithLockRenewInterval(d time.Duration) PushConsumerOption {
	return func(o *pushOptions) { o.lockRenewEvery = d }
}

// groupNamePattern is RocketMQ's consumer group rule.
var groupNamePattern = regexp.MustCompile(`^[%|a-zA-Z0-9_-]{1,255}$`)

// PushConsumer delivers the messages of its subscriptions to a handler:
// it joins its group on the brokers, shares the topics' queues with the
// other members (rebalancing at once when one joins or leaves), pulls each
// of its queues with long polling, keeps what it pulled within the flow
// control limits and commits offsets as the lowest offset not yet handled,
// so a message is never skipped.
//
// In clustering a member consumes a queue only while it holds the queue's
// lock on the broker: it takes the lock before it starts, renews it every
// 20 s (the broker frees it 60 s after the last renewal, or at once when
// the member's connection closes) and releases it only after its batches
// in flight finished and its offset was committed. A queue that moves
// between live members is therefore never handled by both, and no message
// is handled twice; after a member dies, the messages it handled but had
// not committed yet (at most a commit interval's worth) are handled again.
//
// When an administrator resets the group's offsets (Admin.ResetOffsetByTime),
// the broker tells the members holding the queues, which drop what they
// pulled of them and have not handled, keep the queues' locks and read them
// again from the new offsets; nothing committed afterwards undoes the reset.
//
// Create it with NewPushConsumer, Subscribe, then Start; Shutdown stops it
// and every goroutine it started.
type PushConsumer struct {
	c       *core
	group   string
	handler MessageHandler
	opts    pushOptions

	lockMu sync.Mutex // serializes lock renewals and unlocks

	mu     sync.Mutex
	subs   map[string]string // topic -> expression
	state  int               // pushNew, pushStarted, pushAborted, pushShut
	queues map[queueKey]*assignedQueue
	// releasing holds the queues a rebalance let go of whose release (the
	// end of their batches and the commit of their offsets) has not ended:
	// such a queue is not taken again before, or it would start over from
	// an offset not yet committed.
	releasing map[queueKey]bool
	brokers   map[string]*brokerLink // by address
	// watched holds, per broker address, the group's members as that
	// broker's open WatchGroup stream last reported them (sorted): a
	// rebalance reads them instead of asking the broker, which every
	// member doing so every rebalance interval made most of an idle
	// broker's work (docs/BENCHMARKS.md, "Idle and busy push consumers").
	watched map[string][]string
	backs   map[string]*backSender // by broker address
	tasks   group                  // loops, pullers, workers, watchers

	life       context.Context // ends when Shutdown begins: pulling and rebalancing stop
	stopLife   context.CancelFunc
	handlerCtx context.Context // ends when Shutdown's context does
	stopHandle context.CancelFunc
	work       chan consumeTask // concurrent consumption; Shutdown closes it once every queue is released
	kick       chan struct{}    // rebalance now
	rebalanced chan struct{}    // closed when the rebalance loop has exited
	releases   sync.WaitGroup   // releases started by rebalances
	hbKick     chan struct{}    // heartbeat now
	pullErrs   pullErrors       // since NewPushConsumer
}

// queueKey identifies a queue whatever its broker's address.
type queueKey struct {
	topic, broker string
	id            int32
}

func keyOf(q Queue) queueKey { return queueKey{q.Topic, q.BrokerName, q.ID} }

const (
	pushNew = iota
	pushStarted
	pushAborted // Start failed and released everything; Shutdown has not run
	pushShut
)

// NewPushConsumer returns a consumer of group that hands messages to
// handler. ctx is not used after it returns.
func NewPushConsumer(ctx context.Context, cfg Config, group string, handler MessageHandler, opts ...PushConsumerOption) (*PushConsumer, error) {
	if !groupNamePattern.MatchString(group) || group == "DEFAULT_CONSUMER" {
		return nil, fmt.Errorf("client: consumer group %q: want 1 to 255 of [a-zA-Z0-9_%%|-], not DEFAULT_CONSUMER: %w", group, ErrInvalidArgument)
	}
	if handler == nil {
		return nil, fmt.Errorf("client: push consumer needs a handler: %w", ErrInvalidArgument)
	}
	o := defaultPushOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.from == ConsumeFromTimestamp && o.fromTime.IsZero() {
		o.fromTime = time.Now().Add(-30 * time.Minute)
	}
	c, err := newCore(ctx, cfg, "push-consumer")
	if err != nil {
		return nil, err
	}
	c.log = c.log.With("group", group)
	return &PushConsumer{
		c: c, group: group, handler: handler, opts: o, subs: map[string]string{},
		queues: map[queueKey]*assignedQueue{}, releasing: map[queueKey]bool{}, brokers: map[string]*brokerLink{}, watched: map[string][]string{}, backs: map[string]*backSender{},
		work: make(chan consumeTask, workBuffer), kick: make(chan struct{}, 1), hbKick: make(chan struct{}, 1),
	}, nil
}

// Subscribe adds topic with a tag expression ("" or "*" for every message,
// else "TagA || TagB"); call it before Start. Filtering happens on the
// broker.
func (p *PushConsumer) Subscribe(topic, expression string) error {
	if err := validTopic(topic); err != nil {
		return fmt.Errorf("client: subscribe: %w", err)
	}
	if err := checkExpression(expression); err != nil {
		return fmt.Errorf("client: subscribe to %q: %w", topic, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != pushNew {
		return fmt.Errorf("client: subscribe to %q after Start: %w", topic, ErrInvalidArgument)
	}
	p.subs[topic] = expression
	return nil
}

// checkExpression checks a tag expression the way the broker parses it.
func checkExpression(expr string) error {
	if expr == "" || expr == "*" {
		return nil
	}
	for _, part := range splitTags(expr) {
		if part == "" || part == "*" {
			return fmt.Errorf("tag expression %q: want * or TagA || TagB: %w", expr, ErrInvalidArgument)
		}
	}
	return nil
}

// Start checks that every subscribed topic exists, joins the group on the
// topics' brokers, takes this member's share of the queues and starts
// delivering. ctx bounds Start only.
func (p *PushConsumer) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.state != pushNew {
		p.mu.Unlock()
		return fmt.Errorf("client: push consumer started twice or after Shutdown: %w", ErrInvalidArgument)
	}
	if len(p.subs) == 0 {
		p.mu.Unlock()
		return fmt.Errorf("client: push consumer of %s has no subscription: %w", p.group, ErrInvalidArgument)
	}
	p.state = pushStarted
	if p.opts.model == Clustering {
		// Messages sent back for retry come through the group's retry topic.
		p.subs[retryTopic(p.group)] = "*"
	}
	p.life, p.stopLife = context.WithCancel(p.c.life)
	p.handlerCtx, p.stopHandle = context.WithCancel(context.WithoutCancel(p.c.life))
	p.mu.Unlock()

	for _, topic := range p.topics() {
		if p.isRetryTopic(topic) {
			continue // the broker creates it at the first heartbeat
		}
		rt, err := p.c.routes.refresh(ctx, topic)
		if err == nil && len(rt.read) == 0 {
			err = fmt.Errorf("client: topic %q has no readable queue: %w", topic, ErrNoQueue)
		}
		if err != nil {
			p.abortStart()
			return fmt.Errorf("client: push consumer of %s: topic %q: %w", p.group, topic, err)
		}
	}
	if err := p.heartbeat(ctx); err != nil {
		p.abortStart()
		return fmt.Errorf("client: push consumer of %s: join the group: %w", p.group, err)
	}
	p.rebalance(ctx)
	if !p.opts.ordered {
		for range p.opts.concurrency {
			p.tasks.goFunc(p.worker)
		}
	}
	p.rebalanced = make(chan struct{})
	if !p.tasks.goFunc(func() { defer close(p.rebalanced); p.rebalanceLoop() }) {
		close(p.rebalanced)
	}
	p.tasks.goFunc(p.heartbeatLoop)
	p.tasks.goFunc(p.commitLoop)
	if p.opts.model == Clustering {
		p.tasks.goFunc(p.lockLoop)
	}
	p.c.log.Info("push consumer started", "topics", p.topics(), "model", p.opts.model, "ordered", p.opts.ordered)
	return nil
}

// abortStart undoes a failed Start.
func (p *PushConsumer) abortStart() {
	p.mu.Lock()
	p.state = pushAborted
	links := slices.Collect(maps.Values(p.brokers))
	clear(p.brokers)
	p.mu.Unlock()
	p.stopLife()
	p.stopHandle()
	for _, l := range links {
		l.stop()
	}
	p.tasks.wait()
	_ = p.c.close()
}

// topics returns the subscribed topics, sorted.
func (p *PushConsumer) topics() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.subs))
}

// Shutdown stops pulling and rebalancing, lets the handlers in flight
// finish, commits every queue's offset, releases ordered queue locks,
// leaves the group and closes the connections. No goroutine of the
// consumer outlives it (a handler that ignores its context delays it).
//
// ctx bounds the wait for the handlers: when it ends their contexts are
// canceled. A ctx that has already ended at the call (`defer
// c.Shutdown(ctx)` with the context a signal ended) does not cancel them
// at once: they get the consumer's own grace, WithShutdownTimeout (15 s by
// default). Committing, unlocking and leaving run after the handlers,
// each under its own short timeout whatever ctx says. Shutdown returns
// the context error of the wait if handlers were still running when it
// ended, else nil.
//
// Shutdown of a consumer never started, or whose Start failed, releases
// what NewPushConsumer holds and returns nil. A second Shutdown returns
// ErrClosed.
func (p *PushConsumer) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	state := p.state
	p.state = pushShut
	p.mu.Unlock()
	switch state {
	case pushShut:
		return ErrClosed
	case pushNew:
		return p.c.close()
	case pushAborted:
		return nil // abortStart released everything
	}
	p.stopLife()
	drain := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		drain, cancel = context.WithTimeout(context.WithoutCancel(ctx), p.opts.shutdownGrace)
		defer cancel()
	}
	stop := context.AfterFunc(drain, p.stopHandle)
	defer stop()

	<-p.rebalanced // no rebalance takes or releases queues any more
	p.mu.Lock()
	qs := slices.Collect(maps.Values(p.queues))
	clear(p.queues)
	p.mu.Unlock()
	for _, aq := range qs {
		p.releases.Go(func() { p.release(aq) })
	}
	p.releases.Wait()
	close(p.work) // every queue is released: nobody sends on it
	p.closeBackSenders()
	err := drain.Err()
	p.stopHandle()
	// Leave: a final heartbeat with nothing assigned, then the watch
	// streams end, which unregisters the client at once.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	_ = p.heartbeat(hctx)
	cancel()
	p.mu.Lock()
	links := slices.Collect(maps.Values(p.brokers))
	clear(p.brokers)
	p.mu.Unlock()
	for _, l := range links {
		l.stop()
	}
	p.tasks.wait()
	if cerr := p.c.close(); err == nil {
		err = cerr
	}
	p.c.log.Info("push consumer shut down")
	return err
}

// Assigned returns the queues the consumer holds now, sorted.
func (p *PushConsumer) Assigned() []Queue {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Queue, 0, len(p.queues))
	for _, aq := range p.queues {
		out = append(out, aq.q)
	}
	sortQueues(out)
	return out
}

// QueueStats is the state of one assigned queue.
type QueueStats struct {
	Queue Queue
	// CachedMessages and CachedBytes are held now (pulled, not yet
	// handled); PeakCachedMessages is the most ever held at once.
	CachedMessages     int
	CachedBytes        int64
	PeakCachedMessages int
	// CommitOffset is the offset the consumer commits next.
	CommitOffset int64
	// Locked (clustering) says whether the consumer holds the
	// queue's lock now.
	Locked bool
	// PullErrors counts the queue's failed pulls since it was assigned,
	// and LastPullError is the last failure (nil if none).
	PullErrors    int64
	LastPullError error
}

// Stats returns the state of every assigned queue, sorted by queue.
func (p *PushConsumer) Stats() []QueueStats {
	p.mu.Lock()
	qs := slices.Collect(maps.Values(p.queues))
	p.mu.Unlock()
	out := make([]QueueStats, 0, len(qs))
	for _, aq := range qs {
		n, b, _ := aq.pq.load()
		errs, last := aq.pullErrs.get()
		out = append(out, QueueStats{Queue: aq.q, CachedMessages: n, CachedBytes: b, PeakCachedMessages: aq.pq.peakCount(),
			CommitOffset: aq.pq.commitOffset(), Locked: aq.lockValid(), PullErrors: errs, LastPullError: last})
	}
	slices.SortFunc(out, func(a, b QueueStats) int { return compareQueues(a.Queue, b.Queue) })
	return out
}

// PullErrors returns how many pulls failed since the consumer was made,
// and the last failure (nil if none). A failed pull is logged at Warn and
// tried again after a backoff (100 ms, doubling up to 3 s): pulls that
// keep failing leave their queue unread until the cause goes away, so a
// count that keeps growing is a consumer that cannot fetch (Stats gives
// the count per queue).
func (p *PushConsumer) PullErrors() (int64, error) { return p.pullErrs.get() }

// protoModel returns the API's consume model.
func (p *PushConsumer) protoModel() gantryv1.ConsumeModel {
	if p.opts.model == Broadcasting {
		return gantryv1.ConsumeModel_CONSUME_MODEL_BROADCASTING
	}
	return gantryv1.ConsumeModel_CONSUME_MODEL_CLUSTERING
}

// retryTopic is a group's retry topic.
func retryTopic(group string) string { return "%RETRY%" + group }

func (p *PushConsumer) isRetryTopic(topic string) bool { return topic == retryTopic(p.group) }

// trigger sends a non-blocking signal.
func trigger(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// sleepCtx waits d or until ctx ends, and reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
