package delivery

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gantrymq/gantry/broker/brokererr"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

// ErrDeadLetterNotFound: no live dead letter (stored, not expired, not
// purged) has the offset or id asked for.
var ErrDeadLetterNotFound = errors.New("broker: dead letter not found")

// DLQ listing limits.
const (
	DefaultDLQListLimit = 100  // DLQListRequest.Limit 0
	MaxDLQListLimit     = 1000 // larger limits are lowered to it
	// dlqScanBudget bounds the dead letters one ListDLQ looks at, so a
	// filter matching few of many answers in bounded time: the page then
	// ends early with More set.
	dlqScanBudget = 100_000
	dlqScanBatch  = 256 // records per store read of a scan
)

// DLQFilter selects dead letters of a group: those matching every field
// set (a zero field matches everything).
type DLQFilter struct {
	Group string // required
	// Begin and End bound the dead-letter time (the record's store time):
	// Begin <= t < End.
	Begin, End time.Time
	// OriginTopic is the topic the message was first sent to (DLQ_ORIGIN_TOPIC).
	OriginTopic string
	// Key is one of the message's keys (KEYS).
	Key string
	// MsgID is the message's UNIQ_KEY (the client's message id), its
	// DLQ_ORIGIN_MESSAGE_ID, the dead letter's offset message id, or the
	// offset message id of any other copy of the message this broker stores
	// (the original send's, which Gantry's producer returns, or a retry's):
	// that copy's UNIQ_KEY is looked for. Case does not matter.
	MsgID string

	// idUniqKey is the UNIQ_KEY of the stored copy MsgID names as an
	// offset message id, set by scanDLQ.
	idUniqKey string
}

// selective reports whether f narrows the group's dead letters.
func (f DLQFilter) selective() bool {
	return !f.Begin.IsZero() || !f.End.IsZero() || f.OriginTopic != "" || f.Key != "" || f.MsgID != ""
}

func (f DLQFilter) matches(m *message.Message) bool {
	switch {
	case f.OriginTopic != "" && originTopic(m) != f.OriginTopic:
		return false
	case f.Key != "" && !hasKey(m, f.Key):
		return false
	case f.MsgID != "" && !strings.EqualFold(m.UniqKey(), f.MsgID) && !strings.EqualFold(originMsgID(m), f.MsgID) &&
		!strings.EqualFold(m.OffsetMsgID(), f.MsgID) && (f.idUniqKey == "" || m.UniqKey() != f.idUniqKey):
		return false
	case !f.Begin.IsZero() && m.StoreTimestamp < f.Begin.UnixMilli():
		return false
	}
	return true
}

func hasKey(m *message.Message, key string) bool {
	for _, k := range m.Keys() {
		if k == key {
			return true
		}
	}
	return false
}

func originTopic(m *message.Message) string {
	if t, ok := m.Properties.Get(message.PropDLQOriginTopic); ok {
		return t
	}
	t, _ := m.Properties.Get(message.PropRetryTopic)
	return t
}

func originMsgID(m *message.Message) string {
	if id, ok := m.Properties.Get(message.PropDLQOriginMessageID); ok {
		return id
	}
	return m.UniqKey()
}

// uniqKeyOfOffsetID returns the UNIQ_KEY of the message id names as an
// offset message id of this broker, or "" when id is no such id (a
// UNIQ_KEY, say) or names no stored message.
func (d *Service) uniqKeyOfOffsetID(id string) string {
	host, phys, err := message.DecodeOffsetMsgID(id)
	if err != nil || host != d.cfg.StoreAddr {
		return ""
	}
	m, err := d.store.MessageAt(phys)
	if err != nil {
		return ""
	}
	return m.UniqKey()
}

// DLQEntry describes one dead letter.
type DLQEntry struct {
	// Offset is its offset in the group's DLQ queue: its handle here.
	Offset int64
	// MsgID is the dead letter's offset message id.
	MsgID string
	// OriginTopic and OriginMsgID are the topic the message was first
	// sent to and its first id (DLQ_ORIGIN_TOPIC, DLQ_ORIGIN_MESSAGE_ID).
	OriginTopic, OriginMsgID string
	UniqKey                  string // the client's message id, kept through retries
	Keys                     []string
	Tags                     string
	// ReconsumeTimes is how often the group failed to consume it.
	ReconsumeTimes int32
	// BornTime is when the producer first sent it.
	BornTime time.Time
	// DeadLetterTime is when it was dead-lettered (its store time); it
	// expires DLQRetention later.
	DeadLetterTime time.Time
	Reason         string // DLQ_REASON: why the consumer gave up
	// Resends and LastResend say how often and when last it was resent
	// from here (ResendDLQ).
	Resends    int32
	LastResend time.Time
	// EarlierResends is its DLQ_RESENDS: the message had been resent that
	// many times from an earlier dead letter before it failed again.
	EarlierResends int32
	BodySize       int
}

// DLQEvent is one step of a dead letter's history.
type DLQEvent struct {
	Time time.Time // zero when unknown
	What string
}

// DLQMessage is a dead letter in full.
type DLQMessage struct {
	DLQEntry
	Body       []byte // as stored (compressed if SysFlag says so)
	SysFlag    int32
	Properties message.Properties // less the record's CRC tail
	// Expires is when it expires (DeadLetterTime + DLQRetention).
	Expires time.Time
	// History is what happened to it, oldest first: sent, earlier resends,
	// dead-lettered, resent from here.
	History []DLQEvent
}

// DLQListRequest asks for a page of a group's dead letters.
type DLQListRequest struct {
	DLQFilter
	// Cursor is the DLQ queue offset to start at: 0 for the first, then a
	// page's NextCursor.
	Cursor int64
	// Limit bounds the entries returned: 0 for DefaultDLQListLimit, at
	// most MaxDLQListLimit.
	Limit int
}

// DLQPage is a page of dead letters, in queue (dead-letter time) order.
type DLQPage struct {
	Entries []DLQEntry
	// NextCursor is where the next page starts. Listing from it later also
	// finds the dead letters stored since.
	NextCursor int64
	// More: dead letters past NextCursor were not looked at yet.
	More bool
}

// dlqRecord is a live dead letter as a scan reads it.
type dlqRecord struct {
	off int64
	m   *message.Message
}

// ListDLQ returns a page of the live dead letters of req.Group (stored,
// not expired, not purged) that match the filter.
//
// Errors: ErrInvalidArgument (bad group name, negative
// cursor or limit, Begin after End); ErrGroupNotFound (neither the group
// nor its dead-letter topic exists).
func (d *Service) ListDLQ(ctx context.Context, req DLQListRequest) (DLQPage, error) {
	if err := d.checkDLQFilter(req.DLQFilter); err != nil {
		return DLQPage{}, err
	}
	if req.Cursor < 0 || req.Limit < 0 {
		return DLQPage{}, fmt.Errorf("%w: dlq list: cursor %d, limit %d: neither may be negative", brokererr.ErrInvalidArgument, req.Cursor, req.Limit)
	}
	limit := req.Limit
	if limit == 0 {
		limit = DefaultDLQListLimit
	}
	limit = min(limit, MaxDLQListLimit)
	var page DLQPage
	var err error
	page.NextCursor, page.More, err = d.scanDLQ(ctx, req.DLQFilter, req.Cursor, dlqScanBudget, func(r dlqRecord) bool {
		page.Entries = append(page.Entries, d.dlqEntry(req.Group, r))
		return len(page.Entries) < limit
	})
	return page, err
}

// checkDLQFilter checks a filter and that its group exists.
func (d *Service) checkDLQFilter(f DLQFilter) error {
	if err := d.topics.CheckGroupName(f.Group); err != nil {
		return err
	}
	if !f.Begin.IsZero() && !f.End.IsZero() && !f.Begin.Before(f.End) {
		return fmt.Errorf("%w: dlq filter: begin %s is not before end %s", brokererr.ErrInvalidArgument,
			f.Begin.Format(time.RFC3339Nano), f.End.Format(time.RFC3339Nano))
	}
	_, group := d.meta.Group(f.Group)
	_, topic := d.meta.Topic(DLQTopic(f.Group))
	if !group && !topic {
		return fmt.Errorf("%w: %q has neither a subscription group nor a dead-letter topic here", brokererr.ErrGroupNotFound, f.Group)
	}
	return nil
}

// dlqCutoff is the store time (unix ms) at or before which a dead letter
// has expired: store time + DLQRetention <= now.
func (d *Service) dlqCutoff() int64 { return d.cfg.Now().Add(-d.cfg.DLQRetention).UnixMilli() }

// dlqLiveFrom returns the first offset of group's DLQ queue that may hold
// a live dead letter: past the swept or purged prefix and the expired
// ones. Entries above it may still be purged.
func (d *Service) dlqLiveFrom(group string, v DLQView) int64 {
	topic := DLQTopic(group)
	minOff, _ := d.store.QueueOffsets(topic, DLQQueue)
	from := max(minOff, v.minOffset)
	return v.purged.end(max(from, d.firstStoredAfter(topic, from, d.dlqCutoff())))
}

// firstStoredAfter returns the first offset at or above from of a DLQ
// queue whose record was stored after ts (unix ms), the queue's max
// offset if none was. Records whose log data is gone count as before.
func (d *Service) firstStoredAfter(topic string, from, ts int64) int64 {
	_, hi := d.store.QueueOffsets(topic, DLQQueue)
	lo := from
	for lo < hi {
		mid := lo + (hi-lo)/2
		gr, err := d.store.Get(topic, DLQQueue, mid, 1, 1, nil)
		if err != nil {
			return lo // unreadable: keep what may be live
		}
		switch {
		case gr.Status == store.OffsetTooSmall:
			lo = max(gr.NextOffset, mid+1)
		case len(gr.Records) == 1 && message.StoreTimestampOf(gr.Records[0].B) > ts:
			hi = mid
		default: // stored at or before ts, or its log data is gone
			lo = mid + 1
		}
		gr.Release()
	}
	return lo
}

// scanDLQ calls fn for each live dead letter of f.Group matching f, in
// queue order from offset from, until fn returns false, the queue's end,
// the end of f's time range, or budget entries looked at (0: no bound).
// It returns the offset after the last entry looked at and whether
// entries past it were not looked at.
func (d *Service) scanDLQ(ctx context.Context, f DLQFilter, from int64, budget int, fn func(dlqRecord) bool) (next int64, more bool, err error) {
	f.idUniqKey = d.uniqKeyOfOffsetID(f.MsgID)
	topic := DLQTopic(f.Group)
	view := d.dlq.view(f.Group)
	off := max(from, d.dlqLiveFrom(f.Group, view))
	if !f.Begin.IsZero() {
		off = max(off, d.firstStoredAfter(topic, off, f.Begin.UnixMilli()-1))
	}
	seen := 0
	for {
		if err := ctx.Err(); err != nil {
			return off, true, err
		}
		gr, err := d.store.Get(topic, DLQQueue, off, dlqScanBatch, 8<<20, nil)
		if err != nil {
			return off, true, fmt.Errorf("broker: read %s at %d: %w", topic, off, err)
		}
		switch gr.Status {
		case store.OffsetTooSmall:
			off = gr.NextOffset
			continue
		case store.Found, store.NoMatchedMessage, store.OffsetFoundNull:
		default: // the end
			return off, false, nil
		}
		next, stop, more, err := d.scanBatch(&gr, f, view, &seen, budget, fn)
		gr.Release()
		if stop || err != nil {
			return next, more, err
		}
		if next <= off {
			return off, false, nil // a broken invariant: a read that does not advance
		}
		off = next
	}
}

// scanBatch is scanDLQ's step over the records of one read; it returns
// where to go on and whether to stop.
func (d *Service) scanBatch(gr *store.GetResult, f DLQFilter, view DLQView, seen *int, budget int,
	fn func(dlqRecord) bool) (next int64, stop, more bool, err error) {
	cutoff := d.dlqCutoff()
	for _, r := range gr.Records {
		qo := message.QueueOffsetOf(r.B)
		if budget > 0 && *seen >= budget {
			return qo, true, true, nil
		}
		*seen++
		ts := message.StoreTimestampOf(r.B)
		if !f.End.IsZero() && ts >= f.End.UnixMilli() {
			return qo, true, false, nil
		}
		if ts <= cutoff || view.gone(qo) {
			continue
		}
		m, _, err := message.Decode(r.B)
		if err != nil {
			return qo, true, true, fmt.Errorf("broker: decode dead letter %d of %s: %w", qo, f.Group, err)
		}
		if f.matches(m) && !fn(dlqRecord{off: qo, m: m}) {
			return qo + 1, true, qo+1 < gr.MaxOffset, nil
		}
	}
	return gr.NextOffset, false, false, nil
}

// dlqEntry describes a dead letter of group.
func (d *Service) dlqEntry(group string, r dlqRecord) DLQEntry {
	m := r.m
	mark := d.dlq.mark(group, r.off)
	e := DLQEntry{
		Offset: r.off, MsgID: m.OffsetMsgID(), OriginTopic: originTopic(m), OriginMsgID: originMsgID(m),
		UniqKey: m.UniqKey(), Keys: m.Keys(), Tags: m.Tags(), ReconsumeTimes: m.ReconsumeTimes,
		BornTime: msTime(m.BornTimestamp), DeadLetterTime: msTime(m.StoreTimestamp), Resends: mark.Count,
		LastResend: msTime(mark.LastMs), BodySize: len(m.Body),
	}
	e.Reason, _ = m.Properties.Get(message.PropDLQReason)
	if v, ok := m.Properties.Get(message.PropDLQResendTimes); ok {
		n, _ := strconv.ParseInt(v, 10, 32)
		e.EarlierResends = int32(n)
	}
	return e
}

// msTime converts unix ms, 0 being the zero time.
func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// DLQRef names one dead letter of a group: by MsgID (as DLQFilter.MsgID
// matches it) when set, else by Offset.
type DLQRef struct {
	Group  string
	Offset int64
	MsgID  string
}

// ShowDLQ returns one live dead letter with its body, properties and
// history. By id, it is the newest dead letter with that id.
//
// Errors: as ListDLQ's, and ErrDeadLetterNotFound.
func (d *Service) ShowDLQ(ctx context.Context, ref DLQRef) (DLQMessage, error) {
	if ref.MsgID == "" && ref.Offset < 0 {
		return DLQMessage{}, fmt.Errorf("%w: dlq show: offset %d is negative", brokererr.ErrInvalidArgument, ref.Offset)
	}
	r, err := d.findDLQ(ctx, ref)
	if err != nil {
		return DLQMessage{}, err
	}
	out := DLQMessage{DLQEntry: d.dlqEntry(ref.Group, r), Body: r.m.Body, SysFlag: r.m.SysFlag,
		Properties: slices.DeleteFunc(r.m.Properties, func(p message.Property) bool { return p.Key == message.PropCRC })}
	out.Expires = out.DeadLetterTime.Add(d.cfg.DLQRetention)
	out.History = dlqHistory(out.DLQEntry)
	return out, nil
}

// findDLQ returns the live dead letter ref names.
func (d *Service) findDLQ(ctx context.Context, ref DLQRef) (dlqRecord, error) {
	f := DLQFilter{Group: ref.Group, MsgID: ref.MsgID}
	if err := d.checkDLQFilter(f); err != nil {
		return dlqRecord{}, err
	}
	var found dlqRecord
	from := int64(0)
	if ref.MsgID == "" {
		from = ref.Offset
	}
	_, _, err := d.scanDLQ(ctx, f, from, 0, func(r dlqRecord) bool {
		if ref.MsgID == "" && r.off != ref.Offset {
			return false // past it: it is gone
		}
		found = r
		return ref.MsgID != "" // by id, the newest match wins
	})
	if err != nil {
		return dlqRecord{}, err
	}
	if found.m == nil {
		what := "offset " + strconv.FormatInt(ref.Offset, 10)
		if ref.MsgID != "" {
			what = "id " + ref.MsgID
		}
		return dlqRecord{}, fmt.Errorf("%w: group %q, %s", ErrDeadLetterNotFound, ref.Group, what)
	}
	return found, nil
}

// dlqHistory tells a dead letter's story from its entry.
func dlqHistory(e DLQEntry) []DLQEvent {
	h := []DLQEvent{{Time: e.BornTime, What: "sent to " + e.OriginTopic}}
	if e.EarlierResends > 0 {
		h = append(h, DLQEvent{What: fmt.Sprintf("resent from an earlier dead letter %d time(s), failed again", e.EarlierResends)})
	}
	what := fmt.Sprintf("dead-lettered after %d failed deliveries", e.ReconsumeTimes)
	if e.Reason != "" {
		what += ": " + e.Reason
	}
	h = append(h, DLQEvent{Time: e.DeadLetterTime, What: what})
	if e.Resends > 0 {
		h = append(h, DLQEvent{Time: e.LastResend, What: fmt.Sprintf("resent from here %d time(s), last at this time", e.Resends)})
	}
	return h
}

// DLQExportRecord is one line of ExportDLQ's output: a JSON object per
// dead letter. Body is the stored body in standard base64 (as
// encoding/json writes []byte), still compressed when Compressed is true;
// times are RFC 3339 in UTC.
type DLQExportRecord struct {
	Group          string            `json:"group"`
	Offset         int64             `json:"offset"`
	MsgID          string            `json:"msgId"`
	OriginTopic    string            `json:"originTopic"`
	OriginMsgID    string            `json:"originMsgId"`
	UniqKey        string            `json:"uniqKey"`
	Keys           []string          `json:"keys,omitempty"`
	Tags           string            `json:"tags,omitempty"`
	ReconsumeTimes int32             `json:"reconsumeTimes"`
	BornTime       time.Time         `json:"bornTime,omitzero"`
	DeadLetterTime time.Time         `json:"deadLetterTime"`
	Reason         string            `json:"reason,omitempty"`
	Resends        int32             `json:"resends"`
	LastResendTime time.Time         `json:"lastResendTime,omitzero"`
	EarlierResends int32             `json:"earlierResends,omitempty"`
	Properties     map[string]string `json:"properties"`
	Compressed     bool              `json:"compressed,omitempty"`
	Body           []byte            `json:"body"`
}

// ExportDLQ writes the live dead letters of f.Group matching f to w as
// JSON lines (DLQExportRecord), in queue order, and returns how many it
// wrote. Errors: as ListDLQ's, and w's.
func (d *Service) ExportDLQ(ctx context.Context, f DLQFilter, w io.Writer) (int, error) {
	if err := d.checkDLQFilter(f); err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	n := 0
	var werr error
	_, _, err := d.scanDLQ(ctx, f, 0, 0, func(r dlqRecord) bool {
		if werr = enc.Encode(exportRecord(f.Group, d.dlqEntry(f.Group, r), r.m)); werr != nil {
			return false
		}
		n++
		return true
	})
	if werr == nil {
		werr = bw.Flush()
	}
	if werr != nil {
		return n, fmt.Errorf("broker: dlq export: write: %w", werr)
	}
	return n, err
}

func exportRecord(group string, e DLQEntry, m *message.Message) DLQExportRecord {
	props := make(map[string]string, len(m.Properties))
	for _, p := range m.Properties {
		if p.Key != message.PropCRC {
			props[p.Key] = p.Value
		}
	}
	utc := func(t time.Time) time.Time {
		if t.IsZero() {
			return t
		}
		return t.UTC()
	}
	return DLQExportRecord{
		Group: group, Offset: e.Offset, MsgID: e.MsgID, OriginTopic: e.OriginTopic, OriginMsgID: e.OriginMsgID,
		UniqKey: e.UniqKey, Keys: e.Keys, Tags: e.Tags, ReconsumeTimes: e.ReconsumeTimes, BornTime: utc(e.BornTime),
		DeadLetterTime: utc(e.DeadLetterTime), Reason: e.Reason, Resends: e.Resends, LastResendTime: utc(e.LastResend),
		EarlierResends: e.EarlierResends, Properties: props, Compressed: m.SysFlag&message.FlagCompressed != 0, Body: m.Body,
	}
}
