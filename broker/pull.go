package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
)

// Pull limits.
const (
	DefaultPullMsgs  = 32      // PullRequest.MaxMsgs 0
	MaxPullMsgs      = 1024    // larger MaxMsgs are lowered to it
	DefaultPullBytes = 4 << 20 // PullRequest.MaxBytes 0
	// MaxPullBytes: larger MaxBytes are lowered to it. A pull returns at
	// most this many bytes of records, or one record when the first is
	// larger, which is never more than message.MaxRecordBytes: every
	// answer fits the clients' receive limit (message.MaxEnvelopeBytes).
	MaxPullBytes = message.MaxRecordBytes
)

// PullStatus says what a Pull found: the store's statuses, RocketMQ's.
type PullStatus = store.GetStatus

// Pull statuses.
const (
	PullFound               = store.Found               // messages returned
	PullNoMatchedMessage    = store.NoMatchedMessage    // in range, but the filter matched nothing scanned
	PullNoMessageInQueue    = store.NoMessageInQueue    // the queue is empty or unknown
	PullOffsetTooSmall      = store.OffsetTooSmall      // offset < MinOffset
	PullOffsetOverflowOne   = store.OffsetOverflowOne   // offset == MaxOffset: nothing new
	PullOffsetOverflowBadly = store.OffsetOverflowBadly // offset > MaxOffset
	PullOffsetFoundNull     = store.OffsetFoundNull     // the entry's log data is gone
)

// PullRequest asks for messages of one queue.
type PullRequest struct {
	Group   string // consumer group; optional (checked when set)
	Topic   string
	QueueID int32
	Offset  int64 // queue offset to read from
	MaxMsgs int   // 0: DefaultPullMsgs; at most MaxPullMsgs
	// MaxBytes bounds the reply (at least one message is returned if any
	// matches). 0: DefaultPullBytes; at most MaxPullBytes.
	MaxBytes int
	// Filter is the subscription expression: "", "*" or "TagA || TagB".
	Filter string
	// Hold is how long to wait for a message when there is nothing new
	// (long polling), bounded by longPollingMaxHold and by ctx's deadline
	// less a safety margin. 0: answer at once.
	Hold time.Duration
}

// PullResult is a Pull's answer. Records are the stored records, as views
// of the commit log: call Release when done with them.
type PullResult struct {
	Status     PullStatus
	Records    []commitlog.Region
	NextOffset int64 // queue offset to pull from next
	MinOffset  int64
	MaxOffset  int64
}

// Release releases the records.
func (r *PullResult) Release() {
	for _, rec := range r.Records {
		rec.Release()
	}
	r.Records = nil
}

// Pull returns messages of a queue from req.Offset that pass req.Filter.
// When there is nothing new (store.OffsetOverflowOne, or
// store.NoMessageInQueue at offset 0) and req.Hold > 0, it waits until a
// message is dispatched to the queue, the hold ends, ctx ends or the broker
// closes, and then answers with what is there (maybe still nothing).
//
// Errors: ErrShuttingDown; ErrInvalidTopic, ErrTopicNotFound; ErrNoPermission
// (topic not readable, group with consumption disabled); ErrInvalidArgument
// (queue id outside the read queues, negative offset or limits, bad filter
// or group name); ctx's error when ctx is cancelled while held.
func (b *Broker) Pull(ctx context.Context, req PullRequest) (PullResult, error) {
	if !b.calls.enter() {
		return PullResult{}, ErrShuttingDown
	}
	defer b.calls.leave()
	if err := b.readable(); err != nil {
		return PullResult{}, err
	}
	f, err := b.checkPull(req)
	if err != nil {
		return PullResult{}, err
	}
	if req.Group != "" {
		if to, move := b.resets.pull(req.Group, req.Topic, req.QueueID, req.Offset); move {
			return b.movedPull(req, to), nil // see ResetOffsetByTime
		}
	}
	req.MaxMsgs, req.MaxBytes = pullLimits(req.MaxMsgs, req.MaxBytes)
	res, err := b.get(req, f)
	if err != nil || !nothingNew(res) {
		return res, err
	}
	hold := b.holdFor(ctx, req.Hold)
	if hold <= 0 {
		return res, nil
	}
	return b.longPoll(ctx, req, f, hold)
}

// checkPull validates a request and parses its filter.
func (b *Broker) checkPull(req PullRequest) (Filter, error) {
	tc, err := b.topic(req.Topic)
	if err != nil {
		return Filter{}, err
	}
	if tc.Perm&metadata.PermRead == 0 {
		return Filter{}, fmt.Errorf("%w: topic %q is not readable (perm %d)", ErrNoPermission, tc.TopicName, tc.Perm)
	}
	if req.QueueID < 0 || req.QueueID >= tc.ReadQueueNums {
		return Filter{}, fmt.Errorf("%w: queue id %d: topic %q has read queues 0..%d",
			ErrInvalidArgument, req.QueueID, tc.TopicName, tc.ReadQueueNums-1)
	}
	if req.Offset < 0 || req.MaxMsgs < 0 || req.MaxBytes < 0 || req.Hold < 0 {
		return Filter{}, fmt.Errorf("%w: offset %d, maxMsgs %d, maxBytes %d, hold %s: none may be negative",
			ErrInvalidArgument, req.Offset, req.MaxMsgs, req.MaxBytes, req.Hold)
	}
	if err := b.checkConsumeGroup(req.Group); err != nil {
		return Filter{}, err
	}
	return ParseFilter(req.Filter)
}

// checkConsumeGroup checks an optional group: a valid name, and consumption
// not disabled if the group exists.
func (b *Broker) checkConsumeGroup(group string) error {
	if group == "" {
		return nil
	}
	if err := checkGroupName(group); err != nil {
		return err
	}
	if g, ok := b.meta.Group(group); ok && !g.ConsumeEnable {
		return fmt.Errorf("%w: group %q has consumption disabled", ErrNoPermission, group)
	}
	return nil
}

func pullLimits(msgs, bytes int) (int, int) {
	if msgs == 0 {
		msgs = DefaultPullMsgs
	}
	if bytes == 0 {
		bytes = DefaultPullBytes
	}
	return min(msgs, MaxPullMsgs), min(bytes, MaxPullBytes)
}

// nothingNew reports whether a Get found the queue's end: the answer a
// long poll waits on.
func nothingNew(res PullResult) bool {
	return res.Status == store.OffsetOverflowOne || res.Status == store.NoMessageInQueue
}

// get reads once from the store and drops the records whose tags code
// matched f but whose tag does not. Of a dead-letter queue it returns
// only live dead letters: it starts past the expired and purged prefix and
// drops the expired and purged records read.
func (b *Broker) get(req PullRequest, f Filter) (PullResult, error) {
	var dlq dlqView
	isDLQ := isDLQTopic(req.Topic) && req.QueueID == dlqQueue
	if isDLQ {
		req.Offset, dlq = b.dlqPullFrom(req.Topic, req.Offset)
	}
	b.limitsBeforeRead(req.Topic, req.QueueID)
	gr, err := b.store.Get(req.Topic, req.QueueID, req.Offset, req.MaxMsgs, req.MaxBytes, f.storeFilter())
	if err != nil {
		return PullResult{}, fmt.Errorf("broker: pull %s/%d at %d: %w", req.Topic, req.QueueID, req.Offset, err)
	}
	res := PullResult{Status: gr.Status, Records: gr.Records, NextOffset: gr.NextOffset,
		MinOffset: gr.MinOffset, MaxOffset: gr.MaxOffset}
	if isDLQ {
		res.Records = b.dropGoneDeadLetters(res.Records, dlq)
	}
	b.limitsAfterRead(&res, req.Topic, req.QueueID)
	if !f.MatchesAll() {
		res.Records = keepMatching(res.Records, f)
	}
	if res.Status == store.Found && len(res.Records) == 0 {
		res.Status = store.NoMatchedMessage
	}
	b.msgsGot.Add(int64(len(res.Records)))
	return res, nil
}

// keepMatching releases the records f rejects and returns the others, in
// order, in recs' array.
func keepMatching(recs []commitlog.Region, f Filter) []commitlog.Region {
	kept := recs[:0]
	for _, r := range recs {
		if f.matchRecord(r.B) {
			kept = append(kept, r)
		} else {
			r.Release()
		}
	}
	clear(recs[len(kept):])
	return kept
}
