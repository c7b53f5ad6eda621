package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

// SendBackRequest hands back a message a consumer of Group failed to
// handle (RocketMQ's CONSUMER_SEND_MSG_BACK).
type SendBackRequest struct {
	Group string
	// PhysicalOffset is the commit-log offset of the message as the
	// consumer read it (an original or a retry).
	PhysicalOffset int64
	// MsgID, when set, must be the offset message id of that record: a
	// check that the offset is the message meant.
	MsgID string
	// DelayLevel: 0 for the retry ladder (level 3 + the message's reconsume
	// times), > 0 for that level, < 0 to dead-letter it at once.
	DelayLevel int32
	// MaxReconsumeTimes: retries before the dead-letter topic; <= 0 for the
	// group's retryMaxTimes (16 by default).
	MaxReconsumeTimes int32
	// Reason says why it failed; a dead letter keeps it (DLQ_REASON).
	Reason string
}

// SendBackResult says where a sent-back message went.
type SendBackResult struct {
	// DeadLettered: it went to %DLQ%<group>, else to %RETRY%<group>
	// (through the delay level's schedule queue).
	DeadLettered bool
	// ReconsumeTimes is the count stored with it: the failures so far.
	ReconsumeTimes int32
	Put            store.PutResult
}

// defaultRetryMaxTimes is RocketMQ's retry limit when neither the group
// nor the consumer sets one.
const defaultRetryMaxTimes = 16

// retryFirstLevel is the delay level of a message's first retry: level 3
// (10 s) + its reconsume times.
const retryFirstLevel = 3

// SendBack re-publishes a message a consumer of req.Group failed to
// handle: to the group's retry topic %RETRY%<group> after the retry
// ladder's delay (level 3 + the times it was consumed before: 10 s, 30 s,
// 1 m ... 2 h), with its reconsume times plus one, or, once it has been
// retried MaxReconsumeTimes times (or DelayLevel < 0), to the group's
// dead-letter topic %DLQ%<group> (1 queue). Both keep the body, the keys,
// the tags, the properties and the UNIQ_KEY (the client's message id), and
// record the topic the message was first sent to (RETRY_TOPIC, and
// DLQ_ORIGIN_TOPIC on a dead letter) and its first id (ORIGIN_MESSAGE_ID,
// DLQ_ORIGIN_MESSAGE_ID). A dead letter also keeps the reason and is
// stamped with the time it was dead-lettered (its store timestamp).
func (b *Broker) SendBack(ctx context.Context, req SendBackRequest) (SendBackResult, error) {
	if !b.calls.enter() {
		return SendBackResult{}, ErrShuttingDown
	}
	defer b.calls.leave()
	if err := checkGroupName(req.Group); err != nil {
		return SendBackResult{}, err
	}
	if hasSeparator(req.Reason) {
		return SendBackResult{}, fmt.Errorf("%w: send back: the reason contains byte 0x01 or 0x02", ErrInvalidArgument)
	}
	g, err := b.ensureGroup(req.Group)
	if err != nil {
		return SendBackResult{}, err
	}
	m, err := b.store.MessageAt(req.PhysicalOffset)
	if err != nil {
		return SendBackResult{}, fmt.Errorf("%w: send back: no message at commit-log offset %d: %w", ErrInvalidArgument, req.PhysicalOffset, err)
	}
	if req.MsgID != "" && m.OffsetMsgID() != req.MsgID {
		return SendBackResult{}, fmt.Errorf("%w: send back: the message at offset %d is %s, not %s", ErrInvalidArgument, req.PhysicalOffset, m.OffsetMsgID(), req.MsgID)
	}
	maxTimes := req.MaxReconsumeTimes
	if maxTimes <= 0 {
		maxTimes = g.RetryMaxTimes
	}
	if maxTimes <= 0 {
		maxTimes = defaultRetryMaxTimes
	}

	origTopic, ok := m.Properties.Get(message.PropRetryTopic)
	if !ok {
		origTopic = m.Topic
	}
	origID, ok := m.Properties.Get(message.PropOriginMessageID)
	if !ok {
		if origID = m.UniqKey(); origID == "" {
			origID = m.OffsetMsgID()
		}
	}
	out := &message.Message{
		Flag: m.Flag, SysFlag: m.SysFlag, BornTimestamp: m.BornTimestamp, BornHost: m.BornHost,
		Body: m.Body, ReconsumeTimes: m.ReconsumeTimes,
		Properties: slices.DeleteFunc(slices.Clone(m.Properties), func(p message.Property) bool {
			switch p.Key {
			case message.PropCRC, message.PropDelay, message.PropRealTopic, message.PropRealQueueID,
				message.PropTimerDeliverMS, message.PropTimerDelaySec:
				return true
			}
			return false
		}),
	}
	out.Properties.Set(message.PropRetryTopic, origTopic)
	out.Properties.Set(message.PropOriginMessageID, origID)
	res := SendBackResult{ReconsumeTimes: m.ReconsumeTimes}
	if req.DelayLevel < 0 || m.ReconsumeTimes >= maxTimes {
		res.DeadLettered = true
		out.Topic = DLQTopic(req.Group)
		out.Properties.Set(message.PropDLQOriginTopic, origTopic)
		out.Properties.Set(message.PropDLQOriginMessageID, origID)
		if req.Reason != "" {
			out.Properties.Set(message.PropDLQReason, req.Reason)
		}
	} else {
		level := req.DelayLevel
		if level == 0 {
			level = retryFirstLevel + m.ReconsumeTimes
		}
		level = min(level, int32(len(b.cfg.MessageDelayLevel)))
		out.Topic = RetryTopic(req.Group)
		out.ReconsumeTimes = m.ReconsumeTimes + 1
		res.ReconsumeTimes = out.ReconsumeTimes
		out.Properties.Set(message.PropDelay, strconv.Itoa(int(level)))
		out.Properties.Set(message.PropMaxReconsumeTimes, strconv.Itoa(int(maxTimes)))
	}
	put, err := b.putInternal(ctx, []*message.Message{out})
	if len(put) > 0 {
		res.Put = put[0]
	}
	if err != nil {
		if errors.Is(err, ErrInvalidMessage) {
			return res, fmt.Errorf("send back to %s: %w", out.Topic, err)
		}
		return res, err
	}
	if res.DeadLettered {
		b.log.Info("message dead-lettered", "group", req.Group, "topic", origTopic, "id", origID,
			"reconsume_times", m.ReconsumeTimes, "reason", req.Reason)
	}
	return res, nil
}
