package delivery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/gantrymq/gantry/broker/brokererr"
	"github.com/gantrymq/gantry/broker/metadata"
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
func (d *Service) SendBack(ctx context.Context, req SendBackRequest) (SendBackResult, error) {
	res, errs := d.SendBackBatch(ctx, []SendBackRequest{req})
	return res[0], errs[0]
}

// SendBackBatch is SendBack of several messages: each request gets its
// result and its error (nil when it was taken). The retries through the
// delay levels are parked as references (retryrefs.go), one record per
// group and level; the other messages are copied, in one append.
func (d *Service) SendBackBatch(ctx context.Context, reqs []SendBackRequest) ([]SendBackResult, []error) {
	res := make([]SendBackResult, len(reqs))
	errs := make([]error, len(reqs))
	now := d.cfg.Now()
	var (
		out      []*message.Message // copies
		idx      []int              // their requests
		releases []func()           // the copies' bodies point into the log until stored
		refs     map[refKey][]RetryRef
		refIdx   map[refKey][]int
		keys     []refKey // in order of first use
	)
	defer func() {
		for _, release := range releases {
			release()
		}
	}()
	for i, req := range reqs {
		g, err := d.sendBackGroup(req)
		if err != nil {
			errs[i] = err
			continue
		}
		if ref, level, times, ok := d.retryRefFor(req, g, now); ok {
			k := refKey{group: req.Group, level: level}
			if refs == nil {
				refs, refIdx = make(map[refKey][]RetryRef), make(map[refKey][]int)
			}
			if _, seen := refs[k]; !seen {
				keys = append(keys, k)
			}
			refs[k] = append(refs[k], ref)
			refIdx[k] = append(refIdx[k], i)
			res[i].ReconsumeTimes = times
			continue
		}
		m, r, release, err := d.prepareSendBack(req, g)
		if err != nil {
			errs[i] = err
			continue
		}
		releases = append(releases, release)
		res[i] = r
		out = append(out, m)
		idx = append(idx, i)
	}
	if len(out) > 0 {
		d.storeSendBacks(ctx, reqs, out, idx, res, errs)
	}
	for _, k := range keys {
		d.storeRetryRefs(ctx, k, refs[k], refIdx[k], now, res, errs)
	}
	return res, errs
}

// storeSendBacks stores the copied send-backs out (of requests idx) in one
// append and fills in their results and errors.
func (d *Service) storeSendBacks(ctx context.Context, reqs []SendBackRequest, out []*message.Message, idx []int, res []SendBackResult, errs []error) {
	topics := make([]string, len(out)) // before parking renames them
	for j, m := range out {
		topics[j] = m.Topic
	}
	put, err := d.send.PutInternal(ctx, true, out) // built here, parked in place
	for j, i := range idx {
		if j < len(put) {
			res[i].Put = put[j]
		}
		switch {
		case err != nil && errors.Is(err, brokererr.ErrInvalidMessage):
			errs[i] = fmt.Errorf("send back to %s: %w", topics[j], err)
		case err != nil:
			errs[i] = err
		case res[i].DeadLettered:
			d.deadLettered(reqs[i].Group)
			topic, _ := out[j].Properties.Get(message.PropDLQOriginTopic)
			id, _ := out[j].Properties.Get(message.PropDLQOriginMessageID)
			d.log.Info("message dead-lettered", "group", reqs[i].Group, "topic", topic, "id", id,
				"reconsume_times", res[i].ReconsumeTimes, "reason", reqs[i].Reason)
		}
	}
}

// storeRetryRefs parks the references refs (of requests idx) of one group
// and level and fills in their results and errors.
func (d *Service) storeRetryRefs(ctx context.Context, k refKey, refs []RetryRef, idx []int, now time.Time, res []SendBackResult, errs []error) {
	msgs, counts, err := d.retryRefMessages(k.group, k.level, refs, now)
	if err != nil {
		for _, i := range idx {
			errs[i] = err
		}
		return
	}
	put, err := d.send.Put(ctx, ScheduleTopic, msgs)
	for j, n := range counts { // record j holds the next n requests' references
		for _, i := range idx[:n] {
			if j < len(put) {
				res[i].Put = put[j]
			}
			errs[i] = err
		}
		idx = idx[n:]
	}
}

// sendBackGroup checks a send-back's group and reason and returns the
// group (created if auto-creation allows).
func (d *Service) sendBackGroup(req SendBackRequest) (metadata.SubscriptionGroup, error) {
	if err := d.topics.CheckGroupName(req.Group); err != nil {
		return metadata.SubscriptionGroup{}, err
	}
	if strings.ContainsAny(req.Reason, "\x01\x02") {
		return metadata.SubscriptionGroup{}, fmt.Errorf("%w: send back: the reason contains byte 0x01 or 0x02", brokererr.ErrInvalidArgument)
	}
	return d.topics.EnsureGroup(req.Group)
}

// prepareSendBack builds the copy of a send-back to store for group g. Its
// body points into the log: release must be called once it is stored (or
// given up); it is nil with an error.
func (d *Service) prepareSendBack(req SendBackRequest, g metadata.SubscriptionGroup) (*message.Message, SendBackResult, func(), error) {
	m, release, err := d.store.BorrowMessageAt(req.PhysicalOffset)
	if err != nil {
		return nil, SendBackResult{}, nil, fmt.Errorf("%w: send back: no message at commit-log offset %d: %w", brokererr.ErrInvalidArgument, req.PhysicalOffset, err)
	}
	if req.MsgID != "" {
		if id := m.OffsetMsgID(); id != req.MsgID {
			release() // recycles m
			return nil, SendBackResult{}, nil, fmt.Errorf("%w: send back: the message at offset %d is %s, not %s", brokererr.ErrInvalidArgument, req.PhysicalOffset, id, req.MsgID)
		}
	}
	out, res := d.sendBackMessage(req, g, m)
	return out, res, release, nil
}

// sendBackMessage builds the message that takes m back for a consumer of
// group g: to the group's retry topic, or its dead-letter topic.
func (d *Service) sendBackMessage(req SendBackRequest, g metadata.SubscriptionGroup, m *message.Message) (*message.Message, SendBackResult) {
	maxTimes := retryMaxTimes(req.MaxReconsumeTimes, g)

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
	props := make(message.Properties, 0, len(m.Properties)+7) // room for what is set below, and parking's
	for _, p := range m.Properties {
		switch p.Key {
		case message.PropCRC, message.PropDelay, message.PropRealTopic, message.PropRealQueueID,
			message.PropTimerDeliverMS, message.PropTimerDelaySec, message.PropRetryRefs:
			continue
		}
		props = append(props, p)
	}
	out := &message.Message{
		Flag: m.Flag, SysFlag: m.SysFlag, BornTimestamp: m.BornTimestamp, BornHost: m.BornHost,
		Body: m.Body, ReconsumeTimes: m.ReconsumeTimes, Properties: props,
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
		return out, res
	}
	out.Topic = RetryTopic(req.Group)
	out.ReconsumeTimes = m.ReconsumeTimes + 1
	res.ReconsumeTimes = out.ReconsumeTimes
	out.Properties.Set(message.PropMaxReconsumeTimes, strconv.Itoa(int(maxTimes)))
	if pol := g.GroupRetryPolicy; req.DelayLevel == 0 && pol != nil && pol.Type == metadata.RetryExponential {
		wait := min(exponentialDelay(pol.Exponential, m.ReconsumeTimes, rand.Float64()), d.cfg.TimerMaxDelay)
		out.Properties.Set(message.PropTimerDeliverMS, strconv.FormatInt(d.cfg.Now().Add(wait).UnixMilli(), 10))
		return out, res
	}
	out.Properties.Set(message.PropDelay, strconv.Itoa(int(d.retryLevel(req.DelayLevel, m.ReconsumeTimes))))
	return out, res
}

// retryMaxTimes is the retries a message gets before the dead-letter
// queue: asked (> 0), else the group's retryMaxTimes, else 16.
func retryMaxTimes(asked int32, g metadata.SubscriptionGroup) int32 {
	switch {
	case asked > 0:
		return asked
	case g.RetryMaxTimes > 0:
		return g.RetryMaxTimes
	}
	return defaultRetryMaxTimes
}

// retryLevel is the delay level of the retry of a message consumed times
// times before: asked (> 0), else the ladder's 3 + times, at most the last
// level.
func (d *Service) retryLevel(asked, times int32) int32 {
	level := asked
	if level == 0 {
		level = retryFirstLevel + times
	}
	return min(level, int32(len(d.cfg.DelayLevels)))
}

// exponentialDelay is the wait before retry n+1 of a message that failed
// n+1 times (times = n): Initial * Multiplier^n, capped at Max, spread by
// Jitter using r (uniform in [0, 1)).
func exponentialDelay(e *metadata.ExponentialRetryPolicy, times int32, r float64) time.Duration {
	d := e.Initial
	for range times {
		if d >= e.Max/max(e.Multiplier, 1) {
			d = e.Max
			break
		}
		d *= e.Multiplier
	}
	d = min(d, e.Max)
	f := float64(d) * (1 + e.Jitter*(2*r-1))
	return time.Duration(f * float64(time.Millisecond))
}
