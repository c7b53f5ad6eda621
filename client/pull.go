package client

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/message"
)

// PullStatus says what a Pull found.
type PullStatus int

// Pull statuses (gantryv1.PullStatus).
const (
	PullStatusUnknown PullStatus = iota
	// PullFound: Messages holds messages.
	PullFound
	// PullNoNewMessage: the offset is the queue's end (after any hold).
	PullNoNewMessage
	// PullNoMatchedMessage: messages were scanned but none matched the
	// filter; continue from NextOffset.
	PullNoMatchedMessage
	// PullOffsetIllegal: the offset is below the queue's min or beyond its
	// max; NextOffset says where to go.
	PullOffsetIllegal
)

// String returns the status's name.
func (s PullStatus) String() string {
	switch s {
	case PullFound:
		return "FOUND"
	case PullNoNewMessage:
		return "NO_NEW_MESSAGE"
	case PullNoMatchedMessage:
		return "NO_MATCHED_MESSAGE"
	case PullOffsetIllegal:
		return "OFFSET_ILLEGAL"
	}
	return fmt.Sprintf("PullStatus(%d)", int(s))
}

// PullResult is the answer to a Pull. Its messages share the memory of
// the pull's response (see MessageExt): keeping any of them keeps the whole
// response; Detach the ones kept beyond handling.
type PullResult struct {
	Status   PullStatus
	Messages []*MessageExt
	// NextOffset is the offset to pull from next.
	NextOffset int64
	// MinOffset and MaxOffset are the queue's first and next offsets.
	MinOffset, MaxOffset int64
}

// MessageExt is a stored message as read from a broker. What costs an
// allocation to build (the offset id, the key list, a property map) is
// computed on demand by its methods.
//
// A received message aliases the response it came in: its body, topic,
// tags and properties are views of the one buffer that holds every record
// of the pull (up to a pull's byte limit, 4 MiB by default), not copies.
// Keeping one message, or one of its slices or strings, so keeps the whole
// buffer in memory. A message kept after it is handled (queued for later,
// cached) should be kept as its Detach copy. Nothing modifies the buffer,
// so the views stay valid; the bytes of a body must not be modified in
// place either (they are the response's).
type MessageExt struct {
	// Message is the decoded record, every stored field included.
	Message *message.Message
	// Queue is the queue the message was read from.
	Queue          Queue
	QueueOffset    int64
	PhysicalOffset int64
	// UniqKey is the client message id (UNIQ_KEY), or "".
	UniqKey        string
	Topic          string
	Tags           string
	BornTimestamp  time.Time
	StoreTimestamp time.Time
	ReconsumeTimes int32
	// Body is the body, decompressed when the record is flagged compressed
	// (zlib, as Java clients write it; left as stored if it does not
	// inflate).
	Body []byte

	settle *settlement // RetryAfter or DeadLetter, in a push consumer's handler (push_settle.go)
}

// MsgID returns the offset message id (store host and physical offset).
func (e *MessageExt) MsgID() string { return e.Message.OffsetMsgID() }

// Keys returns the KEYS property split on spaces.
func (e *MessageExt) Keys() []string { return e.Message.Keys() }

// Property returns the value of a stored property, or "".
func (e *MessageExt) Property(key string) string {
	v, _ := e.Message.Properties.Get(key)
	return v
}

// Properties returns every stored property except the __CRC32# checksum,
// in a new map.
func (e *MessageExt) Properties() map[string]string {
	out := make(map[string]string, len(e.Message.Properties))
	for _, p := range e.Message.Properties {
		if p.Key != message.PropCRC {
			out[p.Key] = p.Value
		}
	}
	return out
}

// newMessageExt wraps a decoded record read from q's broker, in e.
func newMessageExt(e *MessageExt, m *message.Message, q Queue) *MessageExt {
	*e = MessageExt{
		Message: m, Queue: Queue{Topic: m.Topic, BrokerName: q.BrokerName, Broker: q.Broker, ID: m.QueueID},
		QueueOffset: m.QueueOffset, PhysicalOffset: m.PhysicalOffset,
		UniqKey: m.UniqKey(), Topic: m.Topic, Tags: m.Tags(),
		BornTimestamp: time.UnixMilli(m.BornTimestamp), StoreTimestamp: time.UnixMilli(m.StoreTimestamp),
		ReconsumeTimes: m.ReconsumeTimes, Body: m.Body,
	}
	if m.SysFlag&message.FlagCompressed != 0 {
		if body, err := inflate(m.Body); err == nil {
			e.Body = body
		}
	}
	return e
}

// Detach returns a copy of e that shares no memory with the pull response
// it came in: the body, the stored record's body, the topic, the tags and
// every property are copied, so that keeping the copy does not keep the
// response and its other messages in memory. It costs at most four
// allocations and the bytes of the message; e is unchanged.
func (e *MessageExt) Detach() *MessageExt {
	d := new(detachedMsg)
	d.ext = *e
	if m := e.Message; m != nil {
		d.msg = *m
		n := len(m.Topic)
		for _, p := range m.Properties {
			n += len(p.Key) + len(p.Value)
		}
		var sb strings.Builder // one allocation for every string
		sb.Grow(n)
		sb.WriteString(m.Topic)
		for _, p := range m.Properties {
			sb.WriteString(p.Key)
			sb.WriteString(p.Value)
		}
		str := sb.String()
		next := func(l int) (v string) { v, str = str[:l], str[l:]; return v }
		d.msg.Topic = next(len(m.Topic))
		if len(m.Properties) > 0 {
			d.msg.Properties = make(message.Properties, len(m.Properties))
			for i, p := range m.Properties {
				d.msg.Properties[i] = message.Property{Key: next(len(p.Key)), Value: next(len(p.Value))}
			}
		}
		inflated := len(e.Body) > 0 && len(m.Body) > 0 && &e.Body[0] != &m.Body[0]
		d.msg.Body = bytes.Clone(m.Body)
		if !inflated { // an inflated body is e's own already
			d.ext.Body = d.msg.Body
		}
		d.ext.Message = &d.msg
	} else {
		d.ext.Body = bytes.Clone(e.Body)
	}
	own := d.ext.Message // the fields of e repeat strings of its record, copied already
	d.ext.Topic = ownOrClone(d.ext.Topic, own)
	d.ext.Queue.Topic = ownOrClone(d.ext.Queue.Topic, own)
	d.ext.Tags = ownOrClone(d.ext.Tags, own)
	d.ext.UniqKey = ownOrClone(d.ext.UniqKey, own)
	return &d.ext
}

// detachedMsg is a MessageExt and its record in one allocation.
type detachedMsg struct {
	ext MessageExt
	msg message.Message
}

// ownOrClone returns the topic or the property value of m (nil: none)
// equal to s, or else a copy of s.
func ownOrClone(s string, m *message.Message) string {
	if m != nil && s == m.Topic {
		return m.Topic
	}
	if m != nil {
		for _, p := range m.Properties {
			if p.Value == s {
				return p.Value
			}
		}
	}
	return strings.Clone(s)
}

// detached is Detach (the push consumer's name for it).
func (e *MessageExt) detached() *MessageExt { return e.Detach() }

// msgCopy is a MessageExt and its decoded record in one allocation, with
// the buffer its body is copied into.
type msgCopy struct {
	ext  MessageExt
	msg  message.Message
	body []byte
}

// fill makes c a copy of e whose body shares no memory with e's pull: the
// stored body is copied into c.body (reused); an inflated body is e's own
// already and is kept. The topic and property strings are e's: they still
// view the pull's buffer (Detach copies them too).
func (c *msgCopy) fill(e *MessageExt) *msgCopy {
	c.ext = *e
	if e.Message == nil {
		c.body = append(c.body[:0], e.Body...)
		c.ext.Body = c.body
		return c
	}
	c.msg = *e.Message
	inflated := len(e.Body) > 0 && len(e.Message.Body) > 0 && &e.Body[0] != &e.Message.Body[0]
	c.body = append(c.body[:0], e.Message.Body...)
	c.msg.Body = c.body
	c.ext.Message = &c.msg
	if !inflated {
		c.ext.Body = c.body
	}
	return c
}

// inflate decompresses a zlib body.
func inflate(b []byte) ([]byte, error) {
	r, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, 64<<20))
}

// decodeRecords decodes records stored back to back. On a damaged record it
// returns the messages before it and the error.
//
// b is the response's own buffer, which nothing modifies: the messages'
// bodies, topics and properties alias it rather than copy it
// (message.DecodeAliasing: a few allocations per pull instead of three per
// message).
func decodeRecords(b []byte, q Queue, count int) ([]*MessageExt, error) {
	count = max(count, 1)
	out := make([]*MessageExt, 0, count)
	// Slabs: one allocation each for a pull's records, not per message.
	ms, exts, j := make([]message.Message, count), make([]MessageExt, count), 0
	props := make(message.Properties, 0, 4*count)
	for off := 0; off < len(b); j++ {
		if j == len(ms) { // more records than announced
			ms, exts, j = make([]message.Message, count), make([]MessageExt, count), 0
		}
		n, err := message.DecodeAliasing(&ms[j], b[off:], &props)
		if err != nil {
			return out, fmt.Errorf("client: decode records from %s: record %d at byte %d: %w", q.Broker, len(out), off, err)
		}
		out = append(out, newMessageExt(&exts[j], &ms[j], q))
		off += n
	}
	return out, nil
}

// PullConsumer reads queues for one consumer group; the application picks
// the queues and offsets and says what it has handled: MarkOffset marks
// it, and the marks are committed by Commit, every auto-commit interval
// (WithAutoCommitInterval, 5 s by default) and by Close. CommitOffset
// commits (or resets) one offset at once. It is safe for concurrent use.
type PullConsumer struct {
	c       *core
	group   string
	opts    pullOptions
	commits *commits

	closeOnce sync.Once
}

// NewPullConsumer returns a pull consumer of group for the cluster of cfg.
// ctx is not used after it returns.
func NewPullConsumer(ctx context.Context, cfg Config, group string, opts ...PullConsumerOption) (*PullConsumer, error) {
	if group == "" {
		return nil, fmt.Errorf("client: consumer group is required: %w", ErrInvalidArgument)
	}
	o := pullOptions{holdMargin: DefaultHoldMargin, autoCommit: DefaultAutoCommitInterval}
	for _, opt := range opts {
		opt(&o)
	}
	if o.holdMargin < 0 || o.maxBytes < 0 {
		return nil, fmt.Errorf("client: hold margin %s and max bytes %d must not be negative: %w", o.holdMargin, o.maxBytes, ErrInvalidArgument)
	}
	if !o.noAutoCommit && o.autoCommit <= 0 {
		return nil, fmt.Errorf("client: auto-commit interval %s must be positive (WithoutAutoCommit turns it off): %w", o.autoCommit, ErrInvalidArgument)
	}
	c, err := newCore(ctx, cfg, "pull-consumer")
	if err != nil {
		return nil, err
	}
	pc := &PullConsumer{c: c, group: group, opts: o, commits: newCommits()}
	if !o.noAutoCommit {
		pc.startAutoCommit(o.autoCommit)
	}
	return pc, nil
}

// Group returns the consumer group.
func (pc *PullConsumer) Group() string { return pc.group }

// Queues returns the readable queues of topic from its route.
func (pc *PullConsumer) Queues(ctx context.Context, topic string) ([]Queue, error) {
	rt, err := pc.c.routes.get(ctx, topic)
	if err != nil {
		return nil, err
	}
	if len(rt.read) == 0 {
		return nil, fmt.Errorf("client: topic %q has no readable queue: %w", topic, ErrNoQueue)
	}
	return append([]Queue(nil), rt.read...), nil
}

// PullOptions are the optional parts of a Pull; the zero value reads up to
// DefaultPullMaxMessages messages of every tag without waiting.
type PullOptions struct {
	// MaxMessages is the most messages to return; default
	// DefaultPullMaxMessages (32) when <= 0.
	MaxMessages int
	// Filter keeps the messages whose tag matches: "" or "*" for every
	// message, else tags joined by "||".
	Filter string
	// Hold, when > 0, makes the broker wait up to Hold for a message when
	// there is nothing to read (long polling); the call's deadline is then
	// Hold plus the hold margin (WithHoldMargin), unless ctx ends earlier.
	Hold time.Duration
}

// Pull reads q from offset as opts say. When a record does not decode,
// Pull returns the messages before it and the error.
func (pc *PullConsumer) Pull(ctx context.Context, q Queue, offset int64, opts PullOptions) (PullResult, error) {
	return pullQueue(ctx, pc.c, pullCall{group: pc.group, q: q, offset: offset, maxMsgs: opts.MaxMessages, maxBytes: pc.opts.maxBytes,
		filter: opts.Filter, hold: opts.Hold, holdMargin: pc.opts.holdMargin})
}

// pullCall is one Pull request.
type pullCall struct {
	group      string
	q          Queue
	offset     int64
	maxMsgs    int
	maxBytes   int32
	filter     string
	hold       time.Duration
	holdMargin time.Duration
}

// pullQueue sends a Pull request and decodes its answer.
func pullQueue(ctx context.Context, c *core, pc pullCall) (PullResult, error) {
	if pc.maxMsgs <= 0 {
		pc.maxMsgs = DefaultPullMaxMessages
	}
	if pc.hold > 0 {
		dl := time.Now().Add(pc.hold + pc.holdMargin)
		if d, ok := ctx.Deadline(); !ok || d.After(dl) {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl)
			defer cancel()
		}
	}
	req := &gantryv1.PullRequest{
		Group: pc.group, Topic: pc.q.Topic, QueueId: pc.q.ID, Offset: pc.offset, MaxMessages: int32(min(pc.maxMsgs, 1<<30)),
		MaxBytes: pc.maxBytes, FilterExpression: pc.filter, HoldMs: pc.hold.Milliseconds(),
	}
	var resp *gantryv1.PullResponse
	addr, err := c.call(pc.q, "pull", func(m gantryv1.MessagingClient) (err error) {
		resp, err = m.Pull(ctx, req)
		return err
	})
	if err != nil {
		return PullResult{}, err
	}
	res := PullResult{
		Status: PullStatus(resp.GetStatus()), NextOffset: resp.GetNextOffset(),
		MinOffset: resp.GetMinOffset(), MaxOffset: resp.GetMaxOffset(),
	}
	q := pc.q
	q.Broker = addr
	res.Messages, err = decodeRecords(resp.GetRecords(), q, int(resp.GetRecordCount()))
	return res, err
}

// CommitOffset commits offset (the next message to consume) as the group's
// offset of q at once, whatever q's mark: it may move the offset back (a
// reset). q's mark becomes offset, committed: later marks move on from it.
// It waits for a Commit in progress (bounded by ctx) so that the two do
// not overtake each other.
func (pc *PullConsumer) CommitOffset(ctx context.Context, q Queue, offset int64) error {
	if err := pc.commits.acquire(ctx); err != nil {
		return err
	}
	defer pc.commits.release()
	_, err := pc.c.call(q, "commit offset", func(m gantryv1.MessagingClient) error {
		_, err := m.CommitOffset(ctx, &gantryv1.CommitOffsetRequest{Group: pc.group, Topic: q.Topic, QueueId: q.ID, Offset: offset})
		return err
	})
	if err == nil {
		pc.commits.reset(q, offset)
	}
	return err
}

// CommittedOffset returns the group's committed offset of q; found is
// false when the group has committed none.
func (pc *PullConsumer) CommittedOffset(ctx context.Context, q Queue) (offset int64, found bool, err error) {
	_, err = pc.c.call(q, "query offset", func(m gantryv1.MessagingClient) error {
		resp, err := m.QueryOffset(ctx, &gantryv1.QueryOffsetRequest{Group: pc.group, Topic: q.Topic, QueueId: q.ID})
		offset, found = resp.GetOffset(), resp.GetFound()
		return err
	})
	return offset, found, err
}

// SeekByTime returns the offset of q's first message stored at or after t.
func (pc *PullConsumer) SeekByTime(ctx context.Context, q Queue, t time.Time) (int64, error) {
	var off int64
	_, err := pc.c.call(q, "search offset", func(m gantryv1.MessagingClient) error {
		resp, err := m.SearchOffset(ctx, &gantryv1.SearchOffsetRequest{Topic: q.Topic, QueueId: q.ID, TimestampMs: t.UnixMilli()})
		off = resp.GetOffset()
		return err
	})
	return off, err
}

// QueueOffsets returns q's min (first) and max (next) offsets.
func (pc *PullConsumer) QueueOffsets(ctx context.Context, q Queue) (minOffset, maxOffset int64, err error) {
	_, err = pc.c.call(q, "queue offsets", func(m gantryv1.MessagingClient) error {
		resp, err := m.GetQueueOffsets(ctx, &gantryv1.GetQueueOffsetsRequest{Topic: q.Topic, QueueId: q.ID})
		minOffset, maxOffset = resp.GetMinOffset(), resp.GetMaxOffset()
		return err
	})
	return minOffset, maxOffset, err
}

// Close stops the auto-commit, commits the marked offsets a last time
// (Commit), then stops the route refresher and closes the connections,
// whether the commit succeeded or not; the commit's error is returned.
// ctx bounds the commit; a ctx that has already ended gets a short grace
// of its own (3 s), so that the marks are not dropped at once. Later calls
// return ErrClosed.
func (pc *PullConsumer) Close(ctx context.Context) error {
	err := ErrClosed
	pc.closeOnce.Do(func() {
		pc.stopAutoCommit()
		err = errors.Join(pc.finalCommit(ctx), pc.c.close())
	})
	return err
}
