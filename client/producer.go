package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/cpu"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/message"
)

// Limits the producer checks before sending, so that bad
// input fails at once and never spoils a coalesced request: a body of at
// most MaxBodyBytes (message.MaxBodyBytes, a broker's largest
// maxMessageSize), properties of at most MaxPropertiesBytes, and the
// records of one Send at most MaxSendBytes in total (message.MaxBatchBytes:
// the largest body with the most record overhead; a broker with a lower
// maxMessageSize refuses more than message.BatchLimit of it).
const (
	MaxBodyBytes       = message.MaxBodyBytes
	MaxPropertiesBytes = 32 << 10
	MaxSendBytes       = message.MaxBatchBytes
)

// maxTTL is the longest Message.TTL a broker takes: 100 years.
const maxTTL = 100 * 365 * 24 * time.Hour

// Message is a message to send.
type Message struct {
	// Topic is required: 1 to 127 of [a-zA-Z0-9_%-].
	Topic string
	// Body is required, at most MaxBodyBytes.
	Body []byte
	// Tags is the tag consumers filter on (one tag).
	Tags string
	// Keys are indexed by the broker for lookups (Admin.QueryMessageByKey).
	// They must not be empty or contain spaces.
	Keys []string
	// Properties are user properties; system property names are refused by
	// the broker.
	Properties map[string]string
	// DelayLevel, 1 to 18 (the broker's messageDelayLevel: 1s 5s 10s 30s
	// 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h by default), makes the
	// broker deliver the message that long after storing it. 0: at once.
	DelayLevel int
	// DeliverAt, when set, makes the broker deliver the message at that
	// time (within about 100 ms), up to the broker's timerMaxDelay ahead
	// (72 h by default). A time already past delivers at once. It
	// overrides DelayLevel.
	DeliverAt time.Time
	// ShardingKey, when set, sends every message with the same key to the
	// same queue, which keeps their order: the default selector
	// (ByShardingKey) hashes it. A RoundRobin selector refuses it
	// (ErrInvalidArgument); a custom selector gets it. It stays on the
	// client: it is not sent.
	ShardingKey string
	// IdempotencyKey, when set, is sent as the IDEMPOTENCY_KEY property:
	// the broker de-duplicates sends to the topic by it instead of by the
	// message id the producer gives every message (UNIQ_KEY), so that
	// sends of one business event by different calls or processes store
	// it once within the broker's duplication window, and Idempotent
	// consumers handle it once. No spaces or separator bytes.
	IdempotencyKey string
	// QueueID is internal: the producer sets it to the queue the message was
	// stored in. It is not read.
	QueueID int32
	// TTL, when set, is the message's time to live, whole milliseconds from
	// 1 ms to 100 years, counted from its send (delays and retries
	// included): once it has passed, the broker never delivers the message
	// (pulls skip it; it is counted as expired), whatever the topic's
	// ttl.default.ms. Sent as the TTL_MS property.
	TTL time.Duration
}

// SendResult describes one stored message.
type SendResult struct {
	// MsgID is the offset message id (store host and commit-log offset);
	// Admin.QueryMessageByID finds the message by it.
	MsgID string
	// UniqKey is the client message id (UNIQ_KEY), made by the producer.
	UniqKey     string
	QueueID     int32
	QueueOffset int64
	// Broker is the name of the broker that stored the message.
	Broker string
	// Duplicate reports that the broker had already stored the message
	// (same IdempotencyKey, else same UNIQ_KEY, in the topic, within its
	// duplicationWindow) and stored nothing this time: the fields above
	// are the stored message's. It is how a retry after an indeterminate
	// failure (WithRetryIndeterminate) learns the first attempt had
	// succeeded.
	Duplicate bool
	// Attempts is how many attempts the send took: 1 when the first
	// succeeded. Every message of a Send has the same count.
	Attempts int
}

// Producer sends messages. It is safe for concurrent use. See the package
// doc for how it chooses queues, retries and coalesces concurrent sends.
type Producer struct {
	c       *core
	opts    producerOptions
	log     *slog.Logger
	failed  *failedBrokers
	closing chan struct{} // closed when Close stops waiting: retries end
	senders group         // queue sender goroutines
	buf     *sendBuffer   // sends accepted and not completed (WithMaxBuffered)
	keys    keyRule       // what the selector does with ShardingKeys

	// What every send reads: written rarely, and kept off the cache lines
	// that the senders write for every request (ids, async), which made
	// each SendAsync's read of them a cache miss
	// (docs/decisions/0020-client-hot-paths.md).
	_        cpu.CacheLinePad
	refusing atomic.Bool                            // set when Close begins: new sends fail
	closed   atomic.Bool                            // set under mu by Close once it stops waiting for sends
	live     atomic.Pointer[map[Queue]*queueSender] // a copy of queues, replaced under mu
	_        cpu.CacheLinePad

	ids   atomic.Uint64 // SendStream request ids
	async group         // SendAsync goroutines
	_     cpu.CacheLinePad

	mu         sync.Mutex // guards the fields below; taken before queueSender.mu
	queues     map[Queue]*queueSender
	brokers    map[string]*brokerSender
	closeCalls int
}

// NewProducer returns a producer for the cluster of cfg. It connects
// lazily: the first Send of a topic reads its route; WithWarmUp makes it
// read the routes of topics and connect to their brokers first, within
// ctx. ctx is not used after NewProducer returns.
func NewProducer(ctx context.Context, cfg Config, opts ...ProducerOption) (*Producer, error) {
	o := defaultProducerOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	c, err := newCore(ctx, cfg, "producer")
	if err != nil {
		return nil, err
	}
	p := &Producer{
		c: c, opts: o, log: c.log, failed: newFailedBrokers(), closing: make(chan struct{}),
		buf: newSendBuffer(o.maxBufferedMessages, o.maxBufferedBytes), keys: keyRuleOf(o.selector),
		queues: map[Queue]*queueSender{}, brokers: map[string]*brokerSender{},
	}
	if err := p.warmUp(ctx); err != nil {
		return nil, errors.Join(err, p.Close(context.Background()))
	}
	return p, nil
}

// batch is a validated Send: its messages with the client message ids and
// born time every attempt keeps.
type batch struct {
	topic string
	msgs  []*Message
	props []map[string]string // copies of the messages' properties
	uniq  []string
	born  int64
	bytes int64
	enc   []byte // the messages encoded, queue id 0; nil until a SendAsync's first attempt fails
	epoch uint64 // the sendBuffer epoch it was accepted in
	// encSize is the size of the encoding of a SendAsync's message, which
	// its first attempt writes straight into its request (sendOp.lazy).
	encSize int
	used    bool // enc went into a request: later attempts copy it
	// copied: a later attempt took a copy of enc, so enc may still be in
	// the request of an attempt its caller gave up on.
	copied bool

	// Backing arrays for a one-message batch (SendAsync, most Sends), so
	// that it takes one allocation instead of four.
	oneMsg   [1]*Message
	oneProps [1]map[string]string
	oneUniq  [1]string

	// encp is the pool's pointer enc came from, put back with it.
	encp *[]byte
	// async is the first attempt of a SendAsync: its op and what its
	// outcome needs, in the batch's allocation.
	async asyncAttempt
}

// asyncAttempt is the first attempt of a SendAsync of one message.
type asyncAttempt struct {
	op       sendOp
	p        *Producer
	b        *batch
	ctx      context.Context
	q        Queue
	writable []Queue
	cb       SendCallback
}

// completeOp implements opCompleter: it finishes the SendAsync, or hands a
// failure to asyncFailed (which may retry).
func (a *asyncAttempt) completeOp(res []*gantryv1.SendResult, err error) {
	p, b := a.p, a.b
	if err != nil {
		p.c.brokerFailed(b.topic, err)
		p.asyncFailed(a.ctx, b, a.q, a.writable, indeterminateOf(err, a.q, b.uniq), a.cb)
		return
	}
	b.release()
	p.asyncDone(b, p.result(a.q, b, 0, res[0], 1), nil, a.cb)
	b.recycle()
}

// batchPool holds the batches of SendAsyncs that are done (recycle), so
// that a producer does not allocate (and collect) one per message.
var batchPool sync.Pool // of *batch

// recycle puts b, a SendAsync's batch whose first attempt succeeded and
// whose callback has returned, in batchPool. Nothing refers to it any more:
// its op was the sender's until finish, which the sender reads nothing of
// afterwards, and no retry was made (a failed attempt goes to asyncFailed
// instead).
func (b *batch) recycle() {
	*b = batch{}
	batchPool.Put(b)
}

// encode writes the messages in RocketMQ's record layout (what the broker
// stores), for queue 0; the __CRC32# tail is left for the broker to seal
// after it stamps the record.
func (b *batch) encode() error {
	buf, p := encBuffer(int(b.bytes) + len(b.msgs)*256)
	b.encp = p
	buf, err := b.appendTo(buf, 0)
	if err != nil {
		return err
	}
	b.enc = buf
	return nil
}

// appendTo appends the messages' records for queue queueID to dst, as
// encode does.
func (b *batch) appendTo(dst []byte, queueID int32) ([]byte, error) {
	var room [6]message.Property // tags, keys, a delay and a few user properties without allocating
	for i := range b.msgs {
		rec := b.record(i, room[:0], queueID)
		var err error
		if dst, err = message.AppendUnsealed(dst, &rec, b.uniq[i]); err != nil {
			return dst, fmt.Errorf("client: message %d: %w: %w", i, ErrInvalidArgument, err)
		}
	}
	return dst, nil
}

// measure validates what encode would write, without writing it, and
// returns its size: a SendAsync's message is encoded later, straight into
// its queue's next request (appendTo), but its errors belong to SendAsync.
func (b *batch) measure() (int, error) {
	var room [6]message.Property
	n := 0
	for i := range b.msgs {
		rec := b.record(i, room[:0], 0)
		size, err := message.UnsealedSize(&rec, b.uniq[i])
		if err != nil {
			return 0, fmt.Errorf("client: message %d: %w: %w", i, ErrInvalidArgument, err)
		}
		n += size
	}
	return n, nil
}

// record returns message i as the record to encode, its properties in
// props (which it appends to).
func (b *batch) record(i int, props message.Properties, queueID int32) message.Message {
	m := b.msgs[i]
	if m.Tags != "" {
		props = append(props, message.Property{Key: message.PropTags, Value: m.Tags})
	}
	if len(m.Keys) > 0 {
		props = append(props, message.Property{Key: message.PropKeys, Value: strings.Join(m.Keys, " ")})
	}
	for k, v := range b.props[i] {
		props = append(props, message.Property{Key: k, Value: v})
	}
	if m.IdempotencyKey != "" {
		props = append(props, message.Property{Key: message.PropIdempotencyKey, Value: m.IdempotencyKey})
	}
	if m.TTL > 0 {
		props = append(props, message.Property{Key: message.PropTTLMs, Value: strconv.FormatInt(m.TTL.Milliseconds(), 10)})
	}
	switch {
	case !m.DeliverAt.IsZero():
		props = append(props, message.Property{Key: message.PropTimerDeliverMS, Value: strconv.FormatInt(m.DeliverAt.UnixMilli(), 10)})
	case m.DelayLevel > 0:
		props = append(props, message.Property{Key: message.PropDelay, Value: strconv.Itoa(m.DelayLevel)})
	}
	return message.Message{Topic: b.topic, QueueID: queueID, Body: m.Body, BornTimestamp: b.born, Properties: props}
}

// records returns the encoded messages for queue id: the encoding itself
// for the first attempt, a copy for every later one, since an earlier
// request may still be in flight when the next is built.
func (b *batch) records(queueID int32) []byte {
	out := b.enc
	if b.used {
		out = bytes.Clone(b.enc)
		b.copied = true
	}
	b.used = true
	for off := 0; off < len(out); {
		size, _, _ := message.RecordSize(out[off:])
		message.SetQueueID(out[off:], queueID)
		off += int(size)
	}
	return out
}

// encPool holds encoding buffers of sends that are done, so that a
// producer does not allocate (and collect) a buffer per message.
var encPool sync.Pool // of *[]byte

// maxPooledEnc is the largest buffer kept for reuse.
const maxPooledEnc = 64 << 10

// encBuffer returns an empty buffer of at least size bytes, and the pool's
// pointer it came from (nil for a new one) for release to put back.
func encBuffer(size int) ([]byte, *[]byte) {
	if size <= maxPooledEnc {
		if p, ok := encPool.Get().(*[]byte); ok {
			if cap(*p) >= size {
				return (*p)[:0], p
			}
			encPool.Put(p)
		}
	}
	return make([]byte, 0, size), nil
}

// release returns b's encoding for reuse once its attempt is over. Only the
// attempt that sent enc itself may release it: it is answered, so no
// request holds enc any more (gRPC marshals a request before Send
// returns). After a copy went out, an abandoned attempt may still hold enc,
// and it is left to the garbage collector.
func (b *batch) release() {
	if b.copied || b.enc == nil || cap(b.enc) > maxPooledEnc {
		return
	}
	p := b.encp
	if p == nil {
		p = new([]byte)
	}
	*p = b.enc[:0]
	b.enc, b.encp = nil, nil
	encPool.Put(p)
}

// Send stores msg and returns where it was stored. Concurrent sends to
// the same queue may share one request (see the package doc). Retryable
// failures are retried (see IsRetryable and the options); ctx bounds the
// whole send, retries and backoff included, and the wait for room when
// the producer's buffer is full (WithMaxBuffered). An error is either
// definite (nothing was stored) or an *IndeterminateError, which names the
// queue and the messages' ids to check.
func (p *Producer) Send(ctx context.Context, msg *Message) (sr SendResult, err error) {
	defer p.c.hooks.sendEnd(p.c.hooks.sendStart(ctx, msg), msg, &sr, &err) // Config.Hooks
	if p.isClosed() {
		return SendResult{}, ErrClosed
	}
	b, err := prepareOne(msg)
	if err != nil {
		return SendResult{}, err
	}
	res, err := p.sendAccepted(ctx, b)
	if err != nil {
		return SendResult{}, err
	}
	return res[0], nil
}

// SendBatch stores msgs, which must share one topic, as one batch in one
// queue, in order, and returns one result per message; it is Send for
// several messages, and fails or succeeds for all of them together. The
// queue selector gets the first message with a ShardingKey (else the
// first message); with the default selector the messages' ShardingKeys,
// where set, must be equal.
func (p *Producer) SendBatch(ctx context.Context, msgs []*Message) (res []SendResult, err error) {
	defer p.c.hooks.batchEnd(p.c.hooks.batchStart(ctx, msgs), msgs, &res, &err) // Config.Hooks
	if p.isClosed() {
		return nil, ErrClosed
	}
	b, err := prepare(msgs)
	if err != nil {
		return nil, err
	}
	return p.sendAccepted(ctx, b)
}

// SendCallback receives the outcome of a SendAsync: the message it was
// given (so that one function value can serve every message, with no
// closure per send), and its result or error.
type SendCallback func(msg *Message, res SendResult, err error)

// SendAsync sends msg in the background like Send and calls cb with the
// result, exactly once. ctx bounds the send as in Send. When the
// producer's buffer is full (WithMaxBuffered) SendAsync blocks until there
// is room; if ctx ends first, cb gets ctx's error. The message is encoded
// into its queue's next request before SendAsync returns, so the caller
// may reuse the body's buffer at once (retries send that encoding); msg
// itself is the producer's until cb (it records the queue in it).
// It joins the request without a goroutine of its own; cb runs on the
// producer's sender goroutine for that queue (or, after a retry, on
// another), so it must return quickly and must not send, Flush or Close
// (the sends it would wait for may need that goroutine): hand such work
// to a goroutine of yours. For an invalid message, a closed producer or
// no room within ctx, cb runs before SendAsync returns.
func (p *Producer) SendAsync(ctx context.Context, msg *Message, cb SendCallback) {
	cb = p.c.hooks.asyncStart(ctx, msg, cb) // Config.Hooks
	b, err := prepareAsync(msg)
	if err != nil {
		cb(msg, SendResult{}, err)
		return
	}
	if p.isClosed() || !p.async.add() {
		cb(msg, SendResult{}, ErrClosed)
		return
	}
	if err := p.accept(ctx, b); err != nil {
		cb(msg, SendResult{}, err)
		p.async.done()
		return
	}
	q, writable, err := p.pick(ctx, b.topic, b.selectMsg())
	if err != nil {
		p.asyncFailed(ctx, b, Queue{}, nil, err, cb)
		return
	}
	for retired := false; ; retired = true {
		s, err := p.queueSender(q, retired)
		if err != nil {
			p.asyncFailed(ctx, b, q, writable, err, cb)
			return
		}
		a := &b.async
		*a = asyncAttempt{p: p, b: b, ctx: ctx, q: q, writable: writable, cb: cb}
		op := a.op.initAsync(ctx, b, a)
		err = s.enqueue(op)
		if errors.Is(err, errSenderIdle) {
			continue // it just exited; the next lookup makes a new one
		}
		if err != nil {
			p.asyncFailed(ctx, b, q, writable, err, cb)
		}
		return
	}
}

// asyncFailed finishes a SendAsync whose first attempt failed: it retries
// on a goroutine when the error allows, like Send, else reports err.
func (p *Producer) asyncFailed(ctx context.Context, b *batch, q Queue, writable []Queue, err error, cb SendCallback) {
	r := retryState{last: err}
	r.note(err)
	if p.opts.retries == 0 || !p.retryable(ctx, &r, err, q, writable) {
		p.asyncDone(b, SendResult{}, err, cb)
		return
	}
	if b.enc == nil { // it failed before it was encoded: SendAsync has not returned
		if err := b.encode(); err != nil {
			p.asyncDone(b, SendResult{}, err, cb)
			return
		}
	}
	go func() {
		res, err := p.sendFrom(ctx, b, 1, r)
		if err != nil {
			p.asyncDone(b, SendResult{}, err, cb)
			return
		}
		p.asyncDone(b, res[0], nil, cb)
	}()
}

// SendOneway writes msg to a broker and returns without waiting for an
// answer: it is not retried and its failure on the broker is not reported.
// On SendStream it returns once the request is written; against a broker
// without SendStream (unary Send) it waits for the call but ignores its
// result.
func (p *Producer) SendOneway(ctx context.Context, msg *Message) (err error) {
	defer p.c.hooks.sendEnd(p.c.hooks.sendStart(ctx, msg), msg, nil, &err) // Config.Hooks
	if p.isClosed() {
		return ErrClosed
	}
	b, err := prepare([]*Message{msg})
	if err != nil {
		return err
	}
	if err := p.checkSharding(b); err != nil {
		return err
	}
	q, _, err := p.pick(ctx, b.topic, msg)
	if err != nil {
		return err
	}
	bs, err := p.broker(q.Broker)
	if err != nil {
		return err
	}
	req := &gantryv1.SendRequest{Topic: b.topic, Records: [][]byte{b.records(q.ID)}, ProducerGroup: p.opts.group, Attempt: 1}
	if err := bs.oneway(ctx, req, b.bytes); err != nil {
		p.c.brokerFailed(b.topic, err)
		return indeterminateOf(err, q, b.uniq)
	}
	return nil
}

func (p *Producer) isClosed() bool { return p.refusing.Load() }

// send is Send after validation: attempts with backoff until one succeeds,
// an error is not retryable, the retries are used up or ctx ends.
func (p *Producer) send(ctx context.Context, b *batch) ([]SendResult, error) {
	return p.sendFrom(ctx, b, 0, retryState{})
}

// sendFrom is send from attempt start on (start > 0: after a failed first
// attempt, whose state is r).
func (p *Producer) sendFrom(ctx context.Context, b *batch, start int, r retryState) ([]SendResult, error) {
	for attempt := start; ; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, p.opts.backoffDelay(attempt), p.closing); err != nil {
				if errors.Is(err, ErrClosed) {
					return nil, fmt.Errorf("%w; last error: %w", ErrClosed, r.final(r.last))
				}
				return nil, r.final(r.last)
			}
		}
		q, writable, err := p.pick(ctx, b.topic, b.selectMsg())
		if r.stick.Broker != "" { // after an indeterminate failure: see retryable
			q, err, r.stick = r.stick, nil, Queue{}
		}
		if err == nil {
			var res []*gantryv1.SendResult
			if res, err = p.attempt(ctx, q, b, uint32(attempt+1)); err == nil {
				b.release()
				return p.results(q, b, res, attempt+1), nil
			}
			p.c.brokerFailed(b.topic, err)
			err = indeterminateOf(err, q, b.uniq)
			r.note(err)
		}
		r.last = err
		if !p.retryable(ctx, &r, err, q, writable) || attempt >= p.opts.retries {
			return nil, r.final(err)
		}
		p.log.Debug("send failed; retrying", "topic", b.topic, "queue", q, "attempt", attempt+1, "err", err)
	}
}

// pick chooses the queue of a send and returns it with the topic's
// writable queues.
func (p *Producer) pick(ctx context.Context, topic string, m *Message) (Queue, []Queue, error) {
	rt, err := p.c.routes.get(ctx, topic)
	// A topic nobody created yet, or whose route cannot be fetched now:
	// brokers that create topics on first send (TBW102) take it.
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && topic != AutoCreateTemplate {
		if tmpl, terr := p.c.routes.get(ctx, AutoCreateTemplate); terr == nil {
			if trt := templateRoute(topic, tmpl.route); len(trt.write) > 0 {
				rt, err = trt, nil
			}
		}
	}
	if err != nil {
		return Queue{Topic: topic}, nil, err
	}
	all := rt.write
	if len(all) == 0 {
		return Queue{Topic: topic}, nil, fmt.Errorf("client: topic %q has no writable queue: %w", topic, ErrNoQueue)
	}
	qs := all
	if m.ShardingKey == "" {
		if avail := p.failed.filter(all); len(avail) > 0 {
			qs = avail
		}
	}
	q := p.opts.selector.Select(topic, qs, m)
	if !slices.Contains(all, q) {
		return Queue{Topic: topic}, all, fmt.Errorf("client: queue selector returned %v, not a writable queue of the topic: %w", q, ErrInvalidArgument)
	}
	return q, all, nil
}

// attempt sends b to q once, as the n-th attempt of its send (from 1:
// SendRequest.attempt), bounded by the send timeout.
func (p *Producer) attempt(ctx context.Context, q Queue, b *batch, n uint32) ([]*gantryv1.SendResult, error) {
	actx, cancel := context.WithTimeout(ctx, p.opts.sendTimeout)
	defer cancel()
	op := newSendOp(actx, b.records(q.ID), len(b.msgs), b.bytes, n)
	for retired := false; ; retired = true {
		s, err := p.queueSender(q, retired)
		if err != nil {
			return nil, err
		}
		if s.direct(op) {
			s.send(oneChunk(op, op.records))
			s.release()
			break
		}
		err = s.enqueue(op)
		if errors.Is(err, errSenderIdle) {
			continue // it just exited; the next lookup makes a new one
		}
		if err != nil {
			return nil, err
		}
		break
	}
	res, err := op.wait(actx, q.Broker)
	if errors.Is(err, errOpNotStarted) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Earlier sends to the queue took the whole send timeout: nothing of
		// this one was sent, and another broker may do better.
		return nil, fmt.Errorf("client: send to %s: no turn within %s behind earlier sends: %w", q.Broker, p.opts.sendTimeout, ErrUnavailable)
	}
	return res, err
}

// results converts the broker's results of the send's attempts-th attempt
// and records the queue in msgs.
func (p *Producer) results(q Queue, b *batch, rs []*gantryv1.SendResult, attempts int) []SendResult {
	out := make([]SendResult, len(rs))
	for i, r := range rs {
		out[i] = p.result(q, b, i, r, attempts)
	}
	return out
}

// result converts the broker's result for message i of b, answered to the
// send's attempts-th attempt, and records its queue in the message.
func (p *Producer) result(q Queue, b *batch, i int, r *gantryv1.SendResult, attempts int) SendResult {
	uniq := r.GetUniqKey()
	if uniq == "" {
		uniq = b.uniq[i]
	}
	b.msgs[i].QueueID = r.GetQueueId()
	return SendResult{MsgID: r.GetMsgId(), UniqKey: uniq, QueueID: r.GetQueueId(), QueueOffset: r.GetQueueOffset(),
		Broker: q.BrokerName, Duplicate: r.GetDuplicate(), Attempts: attempts}
}

// queueSender returns the sender of q, starting one if needed. A sender
// it returns may have just retired or closed: its enqueue says so, and the
// caller asks again with retired, which takes the lock (behind the retiring
// sender's removal) instead of the lookup copy, which may still hold it.
func (p *Producer) queueSender(q Queue, retired bool) (*queueSender, error) {
	if m := p.live.Load(); m != nil && !retired && !p.closed.Load() {
		if s := (*m)[q]; s != nil {
			return s, nil
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if s := p.queues[q]; s != nil {
		return s, nil
	}
	b, err := p.brokerLocked(q.Broker)
	if err != nil {
		return nil, err
	}
	s := newQueueSender(p, q, b)
	if !p.senders.goFunc(s.run) {
		return nil, ErrClosed
	}
	p.queues[q] = s
	p.publishQueues()
	return s, nil
}

// publishQueues makes the lookup copy of queues current; the caller holds
// mu.
func (p *Producer) publishQueues() {
	m := maps.Clone(p.queues)
	p.live.Store(&m)
}

// retire removes an idle queue sender and reports whether it may exit.
func (p *Producer) retire(s *queueSender) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() || !s.retireIfIdle() {
		return false // on close the sender exits through quit
	}
	if p.queues[s.q] == s {
		delete(p.queues, s.q)
		p.publishQueues()
	}
	return true
}

// broker returns the sender of a broker address.
func (p *Producer) broker(addr string) (*brokerSender, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return nil, ErrClosed
	}
	return p.brokerLocked(addr)
}

func (p *Producer) brokerLocked(addr string) (*brokerSender, error) {
	if b := p.brokers[addr]; b != nil {
		return b, nil
	}
	client, err := p.c.messaging(addr)
	if err != nil {
		return nil, err
	}
	b := newBrokerSender(addr, client, p)
	p.brokers[addr] = b
	return b, nil
}

// prepare validates msgs and gives them client message ids.
// prepareOne is prepare of one message: the batch holds it and its
// properties and id in its own arrays (one allocation).
func prepareOne(msg *Message) (*batch, error) {
	return one(msg).fill(true)
}

// prepareAsync is prepareOne for SendAsync: the message is validated and
// measured, and encoded by enqueue into its queue's next request, before
// SendAsync returns.
func prepareAsync(msg *Message) (*batch, error) {
	return one(msg).fill(false)
}

func one(msg *Message) *batch {
	b, _ := batchPool.Get().(*batch)
	if b == nil {
		b = new(batch)
	}
	b.born = time.Now().UnixMilli()
	b.oneMsg[0] = msg
	b.msgs, b.props, b.uniq = b.oneMsg[:], b.oneProps[:0], b.oneUniq[:0]
	return b
}

func prepare(msgs []*Message) (*batch, error) {
	switch len(msgs) {
	case 0:
		return nil, fmt.Errorf("client: no message to send: %w", ErrInvalidArgument)
	case 1:
		return prepareOne(msgs[0])
	}
	b := &batch{msgs: msgs, born: time.Now().UnixMilli()}
	return b.fill(true)
}

// fill validates b.msgs, gives each its properties copy and client id, and
// encodes them (encode) or measures their encoding (encSize).
func (b *batch) fill(encode bool) (*batch, error) {
	for i, m := range b.msgs {
		if m == nil {
			return nil, fmt.Errorf("client: message %d is nil: %w", i, ErrInvalidArgument)
		}
		if i == 0 {
			b.topic = m.Topic
		} else if m.Topic != b.topic {
			return nil, fmt.Errorf("client: message %d: topic %q differs from %q; one SendBatch takes one topic: %w", i, m.Topic, b.topic, ErrInvalidArgument)
		}
		n, err := validateMessage(m)
		if err != nil {
			return nil, fmt.Errorf("client: message %d: %w", i, err)
		}
		b.bytes += n
		b.props = append(b.props, maps.Clone(m.Properties))
		b.uniq = append(b.uniq, message.NewUniqIDAt(b.born)) // one clock read for both
	}
	var err error
	if encode {
		err = b.encode()
	} else {
		b.encSize, err = b.measure()
	}
	if err != nil {
		return nil, err
	}
	if size := max(len(b.enc), b.encSize); size > MaxSendBytes {
		return nil, fmt.Errorf("client: the %d messages take %d bytes as records, more than the %d one Send may carry "+
			"(the largest body plus one record's overhead); send them in smaller batches: %w", len(b.msgs), size, MaxSendBytes, ErrInvalidArgument)
	}
	return b, nil
}

// validateMessage checks what the broker would refuse anyway and returns
// the message's size as counted against the batch limit.
func validateMessage(m *Message) (int64, error) {
	if err := validTopic(m.Topic); err != nil {
		return 0, err
	}
	if len(m.Body) == 0 || len(m.Body) > MaxBodyBytes {
		return 0, fmt.Errorf("body of %d bytes, want 1 to %d: %w", len(m.Body), MaxBodyBytes, ErrInvalidArgument)
	}
	if strings.ContainsAny(m.Tags, "\x01\x02") {
		return 0, fmt.Errorf("tags %q contain a separator byte: %w", m.Tags, ErrInvalidArgument)
	}
	if m.DelayLevel < 0 {
		return 0, fmt.Errorf("delay level %d: want 0 (none) or a level from 1: %w", m.DelayLevel, ErrInvalidArgument)
	}
	props := len(m.Tags)
	if m.TTL != 0 {
		if m.TTL < time.Millisecond || m.TTL > maxTTL {
			return 0, fmt.Errorf("TTL %s: want 1 ms to 100 years (0: none): %w", m.TTL, ErrInvalidArgument)
		}
		props += len(message.PropTTLMs) + len(strconv.FormatInt(m.TTL.Milliseconds(), 10)) + 2
	}
	if m.IdempotencyKey != "" {
		if strings.ContainsAny(m.IdempotencyKey, " \x01\x02") {
			return 0, fmt.Errorf("idempotency key %q contains a space or separator byte: %w", m.IdempotencyKey, ErrInvalidArgument)
		}
		props += len(message.PropIdempotencyKey) + len(m.IdempotencyKey) + 2
	}
	for _, k := range m.Keys {
		if k == "" || strings.ContainsAny(k, " \x01\x02") {
			return 0, fmt.Errorf("key %q is empty or contains a space or separator byte: %w", k, ErrInvalidArgument)
		}
		props += len(k) + 1
	}
	for k, v := range m.Properties {
		if k == "" || strings.ContainsAny(k, "\x01\x02") || strings.ContainsAny(v, "\x01\x02") {
			return 0, fmt.Errorf("property %q is empty or contains a separator byte: %w", k, ErrInvalidArgument)
		}
		props += len(k) + len(v) + 2
	}
	if props > MaxPropertiesBytes {
		return 0, fmt.Errorf("properties of %d bytes, want at most %d: %w", props, MaxPropertiesBytes, ErrInvalidArgument)
	}
	return int64(len(m.Body) + props), nil
}

// validTopic checks a topic name: ^[a-zA-Z0-9_%-]{1,127}$, what a broker
// accepts.
func validTopic(t string) error {
	if t == "" || len(t) > message.MaxTopicLen {
		return fmt.Errorf("topic %q must have 1 to %d characters: %w", t, message.MaxTopicLen, ErrInvalidArgument)
	}
	for _, c := range []byte(t) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '%' || c == '-'
		if !ok {
			return fmt.Errorf("topic %q has a character outside [a-zA-Z0-9_%%-]: %w", t, ErrInvalidArgument)
		}
	}
	return nil
}
