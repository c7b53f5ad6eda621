package delivery

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gantrymq/gantry/broker/brokererr"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
)

// Retry references. A message sent back for a retry through the delay
// levels is not copied into the schedule topic: the broker parks a small
// record there, a retry reference, whose body names the messages to retry
// by their commit-log offsets (many per record: one per send-back call and
// level). When the level's delay has passed, the scheduler reads each
// message where it is and stores its retry in %RETRY%<group>, built then
// exactly as SendBack would have built it. A retry is so written once, not
// twice, and a retry storm costs the log a few bytes per failure until the
// retries fall due (docs/decisions/0018-send-backs-park-retry-references.md).
//
// The message must still be in the log when its retry falls due, so a
// reference is used only while its message is younger than half of
// fileReservedTime when the retry falls due; an older message (a consumer
// far behind), a dead letter, a retry on the group's exponential policy
// and a send-back that names a message id are copied as before. Retention
// deletes a segment only once its newest record is fileReservedTime old,
// so only a deletion forced by a full disk can take a referenced message:
// its retry is then dropped with a warning, as parked messages are.

const (
	// retryRefsMagic starts a reference record's body (version 1).
	retryRefsMagic = "GRR\x01"
	// retryRefSize is one reference: offset int64, size int32, max
	// reconsume times int32, big-endian.
	retryRefSize = 16
	// maxRetryRefs bounds the references of one record, and
	// maxRetryRefBytes the size of the messages it names (one larger
	// message gets a record of its own): the retries of one record are
	// stored as one unit when they fall due.
	maxRetryRefs     = deliverBatch
	maxRetryRefBytes = deliverBatchBytes
)

// RetryRef names one message to retry.
type RetryRef struct {
	Phys     int64 // commit-log offset of the message
	Size     int32 // its record's size, checked when it is read
	MaxTimes int32 // the retries before the dead-letter queue, as resolved at send-back
}

// appendRetryRefs appends the body of a reference record naming refs.
func appendRetryRefs(dst []byte, refs []RetryRef) []byte {
	dst = append(dst, retryRefsMagic...)
	for _, r := range refs {
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Phys))
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.Size))
		dst = binary.BigEndian.AppendUint32(dst, uint32(r.MaxTimes))
	}
	return dst
}

// parseRetryRefs decodes a reference record's body.
func parseRetryRefs(body []byte) ([]RetryRef, error) {
	body, ok := bytes.CutPrefix(body, []byte(retryRefsMagic))
	if !ok {
		return nil, errors.New("retry references: bad magic or version")
	}
	if len(body)%retryRefSize != 0 || len(body) == 0 {
		return nil, fmt.Errorf("retry references: %d bytes is not a whole number of %d-byte references", len(body), retryRefSize)
	}
	refs := make([]RetryRef, len(body)/retryRefSize)
	for i := range refs {
		e := body[i*retryRefSize:]
		refs[i] = RetryRef{
			Phys:     int64(binary.BigEndian.Uint64(e)),
			Size:     int32(binary.BigEndian.Uint32(e[8:])),
			MaxTimes: int32(binary.BigEndian.Uint32(e[12:])),
		}
		if r := refs[i]; r.Phys < 0 || r.Size <= 0 || r.MaxTimes <= 0 {
			return nil, fmt.Errorf("retry references: reference %d: offset %d, size %d, max reconsume times %d", i, r.Phys, r.Size, r.MaxTimes)
		}
	}
	return refs, nil
}

// refKey groups a send-back call's references: one record per group and
// level.
type refKey struct {
	group string
	level int32
}

// retryRefFor decides whether req's retry can be a reference and returns
// it with its level and the retry's reconsume times; ok is false when the
// message is to be copied as before (or req has a problem, which the
// copying path reports).
func (d *Service) retryRefFor(req SendBackRequest, g metadata.SubscriptionGroup, now time.Time) (ref RetryRef, level, times int32, ok bool) {
	if req.MsgID != "" || req.DelayLevel < 0 {
		return RetryRef{}, 0, 0, false
	}
	maxTimes := retryMaxTimes(req.MaxReconsumeTimes, g)
	if pol := g.GroupRetryPolicy; req.DelayLevel == 0 && pol != nil && pol.Type == metadata.RetryExponential {
		return RetryRef{}, 0, 0, false
	}
	r, _, err := d.commitLog.ReadRecord(req.PhysicalOffset)
	if err != nil {
		return RetryRef{}, 0, 0, false
	}
	defer r.Release()
	if message.PhysicalOffsetOf(r.B) != req.PhysicalOffset || len(r.B) > maxRetryRefBytes {
		return RetryRef{}, 0, 0, false
	}
	times = message.ReconsumeTimesOf(r.B)
	if times >= maxTimes { // a dead letter
		return RetryRef{}, 0, 0, false
	}
	level = d.retryLevel(req.DelayLevel, times)
	// How old the message will be when its retry falls due.
	if age := now.Add(d.cfg.DelayLevels[level-1]).Sub(time.UnixMilli(message.StoreTimestampOf(r.B))); age >= d.cfg.FileReservedTime/2 {
		return RetryRef{}, 0, 0, false
	}
	return RetryRef{Phys: req.PhysicalOffset, Size: int32(len(r.B)), MaxTimes: maxTimes}, level, times + 1, true
}

// retryRefMessages builds the parked reference records of group's retries
// at level, as few as maxRetryRefs and maxRetryRefBytes allow, and how
// many references each holds.
func (d *Service) retryRefMessages(group string, level int32, refs []RetryRef, now time.Time) (out []*message.Message, counts []int, err error) {
	topic := RetryTopic(group)
	tc, err := d.topics.InternalTopic(topic)
	if err != nil {
		return nil, nil, err
	}
	for len(refs) > 0 {
		n, bytes := 0, 0
		for n < len(refs) && n < maxRetryRefs && (n == 0 || bytes+int(refs[n].Size) <= maxRetryRefBytes) {
			bytes += int(refs[n].Size)
			n++
		}
		m := &message.Message{
			Topic: ScheduleTopic, QueueID: level - 1, BornTimestamp: now.UnixMilli(), BornHost: d.cfg.StoreAddr,
			Body: appendRetryRefs(make([]byte, 0, len(retryRefsMagic)+n*retryRefSize), refs[:n]),
			Properties: message.Properties{
				{Key: message.PropRealTopic, Value: topic},
				{Key: message.PropRealQueueID, Value: strconv.Itoa(int(d.topics.NextQueue(tc)))},
				{Key: message.PropDelay, Value: strconv.Itoa(int(level))},
				{Key: message.PropRetryRefs, Value: strconv.Itoa(n)},
			},
		}
		out, counts = append(out, m), append(counts, n)
		refs = refs[n:]
	}
	return out, counts, nil
}

// isRetryRefs reports whether a parked record is a retry reference.
func isRetryRefs(rec []byte) bool {
	v, err := message.NewView(rec)
	if err != nil {
		return false
	}
	_, ok := v.Property(message.PropRetryRefs)
	return ok
}

// retriesOf reads the messages a reference record names and returns
// their retries, for the record's REAL_TOPIC and REAL_QID, and the number
// of messages no longer in the log (their retries are lost). release must
// be called once the retries are stored: their bodies point into the log.
func (d *Service) retriesOf(rec []byte) (retries []*message.Message, lost int, release func(), err error) {
	m, _, err := message.Decode(rec)
	if err != nil {
		return nil, 0, nil, err
	}
	topic, _ := m.Properties.Get(message.PropRealTopic)
	group, ok := strings.CutPrefix(topic, RetryTopicPrefix)
	if !ok {
		return nil, 0, nil, fmt.Errorf("broker: retry references for %q, not a retry topic", topic)
	}
	qs, _ := m.Properties.Get(message.PropRealQueueID)
	qid, err := strconv.ParseInt(qs, 10, 32)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("broker: retry references with REAL_QID %q", qs)
	}
	ls, _ := m.Properties.Get(message.PropDelay)
	level, err := strconv.ParseInt(ls, 10, 32)
	if err != nil || level < 1 {
		return nil, 0, nil, fmt.Errorf("broker: retry references with DELAY %q", ls)
	}
	refs, err := parseRetryRefs(m.Body)
	if err != nil {
		return nil, 0, nil, err
	}
	if d.store.TopicDeletedAt(topic, message.PhysicalOffsetOf(rec)) {
		return nil, 0, nil, fmt.Errorf("%w: %q was deleted after its retry references were parked", brokererr.ErrTopicNotFound, topic)
	}
	tc, err := d.topics.InternalTopic(topic) // created again if deleted meanwhile
	if err != nil {
		return nil, 0, nil, err
	}
	if qid < 0 || qid >= int64(tc.WriteQueueNums) {
		qid = int64(d.topics.NextQueue(tc))
	}
	regions := make([]commitlog.Region, 0, len(refs))
	release = func() {
		for _, r := range regions {
			r.Release()
		}
	}
	retries = make([]*message.Message, 0, len(refs))
	for _, ref := range refs {
		r, _, err := d.commitLog.ReadRecord(ref.Phys)
		if err != nil {
			lost++
			continue
		}
		if message.PhysicalOffsetOf(r.B) != ref.Phys || len(r.B) != int(ref.Size) {
			r.Release()
			lost++
			continue
		}
		orig := new(message.Message)
		if _, err := message.DecodeInto(orig, r.B, false); err != nil {
			r.Release()
			lost++
			continue
		}
		regions = append(regions, r)
		out, _ := d.sendBackMessage(SendBackRequest{Group: group, DelayLevel: int32(level), MaxReconsumeTimes: ref.MaxTimes},
			metadata.SubscriptionGroup{}, orig)
		out.Properties.Del(message.PropDelay)
		out.Topic, out.QueueID = topic, int32(qid)
		retries = append(retries, out)
	}
	return retries, lost, release, nil
}

// ParkRetryRefs parks the reference records naming refs, as a send-back
// of group's messages at level does; refs need not name stored messages
// (their retries are then dropped when due, with a warning).
func (d *Service) ParkRetryRefs(ctx context.Context, group string, level int32, refs []RetryRef) error {
	msgs, _, err := d.retryRefMessages(group, level, refs, d.cfg.Now())
	if err != nil {
		return err
	}
	_, err = d.send.Put(ctx, ScheduleTopic, msgs)
	return err
}
