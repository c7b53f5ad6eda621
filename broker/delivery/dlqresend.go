package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/gantrymq/gantry/broker/brokererr"
	"github.com/gantrymq/gantry/message"
)

// DLQSelect selects dead letters of a group to resend or purge: All of
// them, or those at Offsets, or those matching the filter (Offsets and a
// filter together: the listed ones that match). Selecting nothing by
// accident is refused: an empty filter needs All.
type DLQSelect struct {
	DLQFilter
	Offsets []int64
	All     bool
}

func (s DLQSelect) check(op string) error {
	switch {
	case s.All && (s.selective() || len(s.Offsets) > 0):
		return fmt.Errorf("%w: dlq %s: all, or offsets and filters, not both", brokererr.ErrInvalidArgument, op)
	case !s.All && !s.selective() && len(s.Offsets) == 0:
		return fmt.Errorf("%w: dlq %s: say which dead letters: an id, offsets, filters or all", brokererr.ErrInvalidArgument, op)
	}
	for _, o := range s.Offsets {
		if o < 0 {
			return fmt.Errorf("%w: dlq %s: offset %d is negative", brokererr.ErrInvalidArgument, op, o)
		}
	}
	return nil
}

// scanSelected calls fn for each live dead letter sel selects that is
// below end, in queue order, until fn returns false.
func (d *Service) scanSelected(ctx context.Context, sel DLQSelect, end int64, fn func(dlqRecord) bool) error {
	if len(sel.Offsets) == 0 {
		_, _, err := d.scanDLQ(ctx, sel.DLQFilter, 0, 0, func(r dlqRecord) bool {
			return r.off < end && fn(r)
		})
		return err
	}
	offs := slices.Compact(slices.Sorted(slices.Values(sel.Offsets)))
	for _, off := range offs {
		if off >= end {
			break
		}
		goOn := true
		// Budget 1: look at the entry at off only (or none, if it is below
		// the live ones).
		_, _, err := d.scanDLQ(ctx, sel.DLQFilter, off, 1, func(r dlqRecord) bool {
			if r.off == off {
				goOn = fn(r)
			}
			return false
		})
		if err != nil || !goOn {
			return err
		}
	}
	return nil
}

// DLQResendRequest asks to resend dead letters.
type DLQResendRequest struct {
	DLQSelect
	// ToRetry sends them to the group's retry topic %RETRY%<group>, so
	// only that group's consumers get them again, instead of back to their
	// original topic (every group subscribed to it).
	ToRetry bool
}

// DLQResent is one dead letter resent.
type DLQResent struct {
	Offset  int64  // in the DLQ queue
	UniqKey string // the message's id, kept by the new message
	Topic   string // where it went
	MsgID   string // the new message's offset message id
	// Resends is the entry's resend count now; the new message's
	// DLQ_RESENDS is that plus the dead letter's EarlierResends.
	Resends int32
}

// DLQResendFailure is a dead letter that could not be resent.
type DLQResendFailure struct {
	Offset  int64
	UniqKey string
	Err     error
}

// DLQResendResult says what ResendDLQ did.
type DLQResendResult struct {
	Resent []DLQResent
	Failed []DLQResendFailure
}

// ResendDLQ re-publishes the live dead letters req selects, oldest first,
// as new messages: same body, flag, born time and host, keys, tags, user
// properties and UNIQ_KEY, reconsume times 0, none of the retry and
// dead-letter properties but DLQ_RESENDS (the message's resends in all),
// to their original topic or, with ToRetry, to %RETRY%<group> (keeping
// RETRY_TOPIC and ORIGIN_MESSAGE_ID, so the group's consumers see the
// original topic). Each entry's resend count and time are recorded and
// saved. Dead letters stored after the call started are left alone.
//
// A dead letter whose topic no longer exists (or that the topic refuses)
// is reported in Failed and the others go on; other errors (shutting
// down, disk full) stop the call, which returns what it resent so far.
// Resends of one broker run one at a time.
//
// Errors: as ListDLQ's, ErrInvalidArgument for a selection that names
// nothing, and the store's.
func (d *Service) ResendDLQ(ctx context.Context, req DLQResendRequest) (DLQResendResult, error) {
	if err := req.check("resend"); err != nil {
		return DLQResendResult{}, err
	}
	if err := d.checkDLQFilter(req.DLQFilter); err != nil {
		return DLQResendResult{}, err
	}
	d.resendPurgeMu.Lock()
	defer d.resendPurgeMu.Unlock()
	group := req.Group
	_, end := d.store.QueueOffsets(DLQTopic(group), DLQQueue)
	var res DLQResendResult
	var stop error
	err := d.scanSelected(ctx, req.DLQSelect, end, func(r dlqRecord) bool {
		sent, err := d.resendOne(ctx, group, r, req.ToRetry)
		switch {
		case err == nil:
			res.Resent = append(res.Resent, sent)
		case errors.Is(err, brokererr.ErrTopicNotFound), errors.Is(err, brokererr.ErrInvalidMessage), errors.Is(err, brokererr.ErrReservedTopic),
			errors.Is(err, brokererr.ErrInvalidTopic):
			res.Failed = append(res.Failed, DLQResendFailure{Offset: r.off, UniqKey: r.m.UniqKey(), Err: err})
		default:
			stop = err
			return false
		}
		return true
	})
	if len(res.Resent) > 0 {
		d.saveDLQState()
		d.log.Info("dead letters resent", "group", group, "resent", len(res.Resent), "failed", len(res.Failed), "toRetry", req.ToRetry)
	}
	return res, errors.Join(err, stop)
}

// resendOne re-publishes one dead letter and records it.
func (d *Service) resendOne(ctx context.Context, group string, r dlqRecord, toRetry bool) (DLQResent, error) {
	count := d.dlq.mark(group, r.off).Count + 1
	out := resentMessage(r.m, group, count, toRetry)
	put, err := d.send.PutInternal(ctx, false, []*message.Message{out})
	if err != nil {
		return DLQResent{}, fmt.Errorf("resend dead letter %d to %s: %w", r.off, out.Topic, err)
	}
	count = d.dlq.recordResend(group, r.off, d.cfg.Now().UnixMilli())
	return DLQResent{Offset: r.off, UniqKey: put[0].UniqKey, Topic: out.Topic, MsgID: put[0].MsgID, Resends: count}, nil
}

// resentMessage is the new message for a dead letter resent for the
// count-th time from its entry.
func resentMessage(dl *message.Message, group string, count int32, toRetry bool) *message.Message {
	topic, origID := originTopic(dl), originMsgID(dl)
	earlier, _ := strconv.ParseInt(getProp(dl, message.PropDLQResendTimes), 10, 32)
	out := &message.Message{
		Topic: topic, QueueID: pickQueue, Flag: dl.Flag, SysFlag: dl.SysFlag,
		BornTimestamp: dl.BornTimestamp, BornHost: dl.BornHost, Body: dl.Body,
		Properties: slices.DeleteFunc(slices.Clone(dl.Properties), func(p message.Property) bool {
			return isDLQProperty(p.Key) || isParkingProperty(p.Key)
		}),
	}
	if toRetry {
		out.Topic = RetryTopic(group)
		out.Properties.Set(message.PropRetryTopic, topic)
		out.Properties.Set(message.PropOriginMessageID, origID)
	}
	out.Properties.Set(message.PropDLQResendTimes, strconv.FormatInt(earlier+int64(count), 10))
	return out
}

func getProp(m *message.Message, key string) string {
	v, _ := m.Properties.Get(key)
	return v
}

// isDLQProperty reports whether key is set by the broker on a retry or
// dead letter, and so left out of a resent message.
func isDLQProperty(key string) bool {
	switch key {
	case message.PropDLQOriginTopic, message.PropDLQOriginMessageID, message.PropDLQReason, message.PropDLQResendTimes,
		message.PropRetryTopic, message.PropOriginMessageID, message.PropMaxReconsumeTimes, message.PropReconsumeTime,
		message.PropConsumeStartTime, message.PropMinOffset, message.PropMaxOffset, message.PropCRC:
		return true
	}
	return false
}

// PurgeDLQ hides the live dead letters sel selects for good: they are
// never listed, pulled or resent again (their records stay in the log
// until retention deletes them). A purged prefix of the queue also moves
// its min offset. It returns how many it purged. Errors: as ResendDLQ's.
func (d *Service) PurgeDLQ(ctx context.Context, sel DLQSelect) (int, error) {
	if err := sel.check("purge"); err != nil {
		return 0, err
	}
	if err := d.checkDLQFilter(sel.DLQFilter); err != nil {
		return 0, err
	}
	d.resendPurgeMu.Lock()
	defer d.resendPurgeMu.Unlock()
	topic := DLQTopic(sel.Group)
	_, end := d.store.QueueOffsets(topic, DLQQueue)
	var offs []int64
	err := d.scanSelected(ctx, sel, end, func(r dlqRecord) bool {
		offs = append(offs, r.off)
		return true
	})
	if err != nil {
		return 0, err
	}
	if sel.All {
		d.dlq.advance(sel.Group, end) // also those expired meanwhile
	}
	if len(offs) > 0 {
		d.dlq.purge(sel.Group, offs)
	}
	d.store.RaiseQueueMin(topic, DLQQueue, d.dlq.view(sel.Group).minOffset)
	d.saveDLQState()
	d.log.Info("dead letters purged", "group", sel.Group, "purged", len(offs), "all", sel.All)
	return len(offs), nil
}

// saveDLQState saves the DLQ state, logging a failure: the marks are kept
// in memory and the next sweep or Close saves them again.
func (d *Service) saveDLQState() {
	if err := d.dlq.save(); err != nil {
		d.log.Warn("saving the dead-letter state failed; will retry", "err", err)
	}
}
