package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/message"
)

// The dead-letter calls of Admin: a consumer group's dead letters on
// every broker of the cluster.

// DLQFilter selects a consumer group's dead letters: those matching every
// field set (a zero field matches everything).
type DLQFilter struct {
	Group string // required
	// Begin and End bound the dead-letter time: Begin <= t < End.
	Begin, End time.Time
	// OriginTopic is the topic the message was first sent to.
	OriginTopic string
	// Key is one of the message's keys.
	Key string
	// MsgID is the message's id (UNIQ_KEY, kept through retries), its
	// original id, or the dead letter's offset message id.
	MsgID string
}

func (f DLQFilter) proto() *gantryv1.DLQFilter {
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMilli()
	}
	return &gantryv1.DLQFilter{Group: f.Group, BeginMs: ms(f.Begin), EndMs: ms(f.End), OriginTopic: f.OriginTopic, Key: f.Key, MsgId: f.MsgID}
}

// DeadLetter is a message a consumer group gave up on, held in the
// group's dead-letter queue (%DLQ%<group>) of a broker until it expires
// (dlqRetentionHours after it was dead-lettered) or is purged.
type DeadLetter struct {
	// BrokerName and Broker (its gRPC address) hold it; Offset is its
	// offset in the group's DLQ queue there.
	BrokerName, Broker string
	Offset             int64
	// MsgID is the dead letter's offset message id.
	MsgID string
	// OriginTopic and OriginMsgID are the topic the message was first
	// sent to and its first id; UniqKey is its id (kept through retries).
	OriginTopic, OriginMsgID, UniqKey string
	Keys                              []string
	Tags                              string
	// ReconsumeTimes is how often the group failed to consume it.
	ReconsumeTimes int32
	BornTime       time.Time // when the producer sent it
	DeadLetterTime time.Time
	Reason         string // why the consumer gave up
	// Resends and LastResend: how often and when last it was resent from
	// the DLQ (DLQResend).
	Resends    int32
	LastResend time.Time
	// EarlierResends: the message had been resent that many times from an
	// earlier dead letter before it failed again.
	EarlierResends int32
	BodySize       int
}

func deadLetterFrom(r brokerRef, e *gantryv1.DLQEntry) DeadLetter {
	return DeadLetter{
		BrokerName: r.name, Broker: r.addr, Offset: e.GetOffset(), MsgID: e.GetMsgId(), OriginTopic: e.GetOriginTopic(),
		OriginMsgID: e.GetOriginMsgId(), UniqKey: e.GetUniqKey(), Keys: e.GetKeys(), Tags: e.GetTags(),
		ReconsumeTimes: e.GetReconsumeTimes(), BornTime: msTime(e.GetBornTimeMs()), DeadLetterTime: msTime(e.GetDeadLetterTimeMs()),
		Reason: e.GetReason(), Resends: e.GetResends(), LastResend: msTime(e.GetLastResendMs()),
		EarlierResends: e.GetEarlierResends(), BodySize: int(e.GetBodySize()),
	}
}

// DLQPage is a page of dead letters from every broker, oldest first.
type DLQPage struct {
	Entries []DeadLetter
	// NextCursor continues the listing (DLQList's cursor); "" when every
	// dead letter there was has been looked at.
	NextCursor string
}

// DLQEvent is one step of a dead letter's history.
type DLQEvent struct {
	Time time.Time // zero when unknown
	What string
}

// DeadLetterMessage is a dead letter in full.
type DeadLetterMessage struct {
	DeadLetter
	Body       []byte // as stored: compressed when Compressed
	Compressed bool
	Properties map[string]string
	Expires    time.Time
	History    []DLQEvent // oldest first
}

// DLQRef names one dead letter of Group: by MsgID when set, else by
// Offset on Broker (a broker name or gRPC address; optional when the
// cluster has one broker).
type DLQRef struct {
	Group  string
	MsgID  string
	Offset int64
	Broker string
}

// DLQSelection selects dead letters to resend or purge: All of them, or
// those at Offsets (on Broker), or those matching Filter (Offsets and a
// filter: the listed ones that match). Filter.Group is required; an empty
// selection is ErrInvalidArgument. Broker, a broker name or gRPC address,
// limits the call to that broker (required with Offsets when the cluster
// has several).
type DLQSelection struct {
	Filter  DLQFilter
	Offsets []int64
	All     bool
	Broker  string
}

func (s DLQSelection) proto() *gantryv1.DLQSelection {
	return &gantryv1.DLQSelection{Filter: s.Filter.proto(), Offsets: s.Offsets, All: s.All}
}

// DLQResent is a dead letter resent.
type DLQResent struct {
	BrokerName string
	Offset     int64  // of the dead letter
	UniqKey    string // the message's id, kept by the new message
	Topic      string // where it went
	MsgID      string // the new message's offset message id
	Resends    int32  // the dead letter's resends now
}

// DLQResendFailure is a dead letter that could not be resent (its topic
// was deleted, say).
type DLQResendFailure struct {
	BrokerName string
	Offset     int64
	UniqKey    string
	Error      string
}

// DLQResendResult says what DLQResend did.
type DLQResendResult struct {
	Resent []DLQResent
	Failed []DLQResendFailure
}

// dlqTargets returns the brokers a DLQ call goes to: the one named (a
// broker name of the cluster, or a gRPC address), else every master.
func (a *Admin) dlqTargets(ctx context.Context, broker string) ([]brokerRef, error) {
	refs, err := a.targets(ctx, nil)
	if err != nil || broker == "" {
		return refs, err
	}
	for _, r := range refs {
		if r.name == broker || r.addr == broker {
			return []brokerRef{r}, nil
		}
	}
	if strings.Contains(broker, ":") {
		return []brokerRef{{addr: broker}}, nil
	}
	return nil, fmt.Errorf("client: broker %q is not in the cluster: %w", broker, ErrNotFound)
}

// eachKnowing calls f on every broker. A broker that does not know what
// was asked for, the group (NOT_FOUND), is skipped, unless none knows it:
// then the error wraps ErrNotFound.
func (a *Admin) eachKnowing(refs []brokerRef, op string, f func(brokerRef, gantryv1.AdminClient) error) error {
	var errs, notFound []error
	for _, r := range refs {
		ac, err := a.c.admin(r.addr)
		if err == nil {
			err = callError(op, r.addr, f(r, ac), ErrNotFound)
		}
		if errors.Is(err, ErrNotFound) {
			notFound = append(notFound, err)
			continue
		}
		errs = append(errs, err)
	}
	if len(notFound) == len(refs) {
		return errors.Join(notFound...)
	}
	return errors.Join(errs...)
}

// DLQList returns a page of f.Group's dead letters on every broker of the
// cluster, at most limit (0: 100; each broker caps it at 1000), oldest
// first. cursor is "" for the first page, then the previous page's
// NextCursor. ErrNotFound when no broker knows the group.
func (a *Admin) DLQList(ctx context.Context, f DLQFilter, cursor string, limit int) (DLQPage, error) {
	if f.Group == "" {
		return DLQPage{}, fmt.Errorf("client: dlq list: the group is required: %w", ErrInvalidArgument)
	}
	if limit <= 0 {
		limit = 100
	}
	refs, err := a.targets(ctx, nil)
	if err != nil {
		return DLQPage{}, err
	}
	from, err := parseDLQCursor(cursor)
	if err != nil {
		return DLQPage{}, err
	}
	if from != nil {
		refs = slices.DeleteFunc(refs, func(r brokerRef) bool { _, ok := from[r.name]; return !ok })
	}
	type brokerPage struct {
		next int64
		more bool
	}
	pages := map[string]brokerPage{}
	var all []DeadLetter
	err = a.eachKnowing(refs, "dlq list", func(r brokerRef, ac gantryv1.AdminClient) error {
		resp, err := ac.DLQList(ctx, &gantryv1.DLQListRequest{Filter: f.proto(), Cursor: from[r.name], Limit: int32(min(limit, 1<<30))})
		if err != nil {
			return err
		}
		for _, e := range resp.GetEntries() {
			all = append(all, deadLetterFrom(r, e))
		}
		pages[r.name] = brokerPage{resp.GetNextCursor(), resp.GetMore()}
		return nil
	})
	sort.SliceStable(all, func(i, j int) bool { return dlqLess(all[i], all[j]) })
	next := map[string]int64{}
	for name, p := range pages {
		if p.more {
			next[name] = p.next
		}
	}
	if len(all) > limit {
		for _, e := range all[limit:] { // left out: the broker goes on from its first one
			if o, ok := next[e.BrokerName]; !ok || e.Offset < o {
				next[e.BrokerName] = e.Offset
			}
		}
		all = all[:limit]
	}
	return DLQPage{Entries: all, NextCursor: formatDLQCursor(next)}, err
}

func dlqLess(a, b DeadLetter) bool {
	if !a.DeadLetterTime.Equal(b.DeadLetterTime) {
		return a.DeadLetterTime.Before(b.DeadLetterTime)
	}
	if a.BrokerName != b.BrokerName {
		return a.BrokerName < b.BrokerName
	}
	return a.Offset < b.Offset
}

// A DLQ cursor is "broker=offset" pairs, comma-separated, sorted: where
// each broker still to look at goes on.
func formatDLQCursor(next map[string]int64) string {
	var parts []string
	for name, off := range next {
		parts = append(parts, name+"="+strconv.FormatInt(off, 10))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// parseDLQCursor parses a cursor; nil for "" (every broker from the start).
func parseDLQCursor(c string) (map[string]int64, error) {
	if c == "" {
		return nil, nil
	}
	out := map[string]int64{}
	for part := range strings.SplitSeq(c, ",") {
		name, v, ok := strings.Cut(part, "=")
		off, err := strconv.ParseInt(v, 10, 64)
		if !ok || name == "" || err != nil || off < 0 {
			return nil, fmt.Errorf("client: dlq cursor %q: want broker=offset pairs separated by commas: %w", c, ErrInvalidArgument)
		}
		out[name] = off
	}
	return out, nil
}

// DLQShow returns one dead letter with its body, properties and history:
// by id, the newest with that id on the first broker (by name) that has
// one. ErrNotFound when there is none.
func (a *Admin) DLQShow(ctx context.Context, ref DLQRef) (*DeadLetterMessage, error) {
	if ref.Group == "" {
		return nil, fmt.Errorf("client: dlq show: the group is required: %w", ErrInvalidArgument)
	}
	refs, err := a.dlqTargets(ctx, ref.Broker)
	if err != nil {
		return nil, err
	}
	if ref.MsgID == "" && len(refs) > 1 {
		return nil, fmt.Errorf("client: dlq show: an offset names a dead letter of one broker: give the broker (%d in the cluster): %w", len(refs), ErrInvalidArgument)
	}
	var out *DeadLetterMessage
	err = a.eachKnowing(refs, "dlq show", func(r brokerRef, ac gantryv1.AdminClient) error {
		if out != nil {
			return nil
		}
		resp, err := ac.DLQShow(ctx, &gantryv1.DLQShowRequest{Group: ref.Group, MsgId: ref.MsgID, Offset: ref.Offset})
		if err != nil {
			return err
		}
		out = &DeadLetterMessage{DeadLetter: deadLetterFrom(r, resp.GetEntry()), Body: resp.GetBody(),
			Compressed: resp.GetSysFlag()&message.FlagCompressed != 0, Properties: map[string]string{}, Expires: msTime(resp.GetExpiresMs())}
		for _, p := range resp.GetProperties() {
			out.Properties[p.GetKey()] = p.GetValue()
		}
		for _, h := range resp.GetHistory() {
			out.History = append(out.History, DLQEvent{Time: msTime(h.GetTimeMs()), What: h.GetWhat()})
		}
		return nil
	})
	if out != nil {
		return out, nil
	}
	if err == nil {
		err = fmt.Errorf("client: dlq show: no dead letter: %w", ErrNotFound)
	}
	return nil, err
}

// DLQResend re-publishes the selected dead letters as new messages (same
// body, keys, tags, properties and id; DLQ_RESENDS stamped) to their
// original topic, or with toRetry to the group's retry topic (only that
// group gets them again), on every broker (or sel.Broker), and says what
// it resent.
func (a *Admin) DLQResend(ctx context.Context, sel DLQSelection, toRetry bool) (DLQResendResult, error) {
	refs, err := a.dlqSelectionTargets(ctx, "resend", sel)
	if err != nil {
		return DLQResendResult{}, err
	}
	var out DLQResendResult
	err = a.eachKnowing(refs, "dlq resend", func(r brokerRef, ac gantryv1.AdminClient) error {
		resp, err := ac.DLQResend(ctx, &gantryv1.DLQResendRequest{Selection: sel.proto(), ToRetry: toRetry})
		for _, x := range resp.GetResent() {
			out.Resent = append(out.Resent, DLQResent{BrokerName: r.name, Offset: x.GetOffset(), UniqKey: x.GetUniqKey(),
				Topic: x.GetTopic(), MsgID: x.GetMsgId(), Resends: x.GetResends()})
		}
		for _, x := range resp.GetFailed() {
			out.Failed = append(out.Failed, DLQResendFailure{BrokerName: r.name, Offset: x.GetOffset(), UniqKey: x.GetUniqKey(), Error: x.GetError()})
		}
		return err
	})
	return out, err
}

func (a *Admin) dlqSelectionTargets(ctx context.Context, op string, sel DLQSelection) ([]brokerRef, error) {
	if sel.Filter.Group == "" {
		return nil, fmt.Errorf("client: dlq %s: the group is required: %w", op, ErrInvalidArgument)
	}
	refs, err := a.dlqTargets(ctx, sel.Broker)
	if err == nil && len(sel.Offsets) > 0 && len(refs) > 1 {
		err = fmt.Errorf("client: dlq %s: offsets name dead letters of one broker: give the broker (%d in the cluster): %w", op, len(refs), ErrInvalidArgument)
	}
	return refs, err
}

// DLQExport writes f.Group's dead letters on every broker to w as JSON
// lines, one object per dead letter (the broker's DLQExportRecord: ids,
// topic, keys, tags, times, reason, resends, properties, and the body in
// base64), broker after broker, and returns how many it wrote.
func (a *Admin) DLQExport(ctx context.Context, f DLQFilter, w io.Writer) (int, error) {
	if f.Group == "" {
		return 0, fmt.Errorf("client: dlq export: the group is required: %w", ErrInvalidArgument)
	}
	refs, err := a.targets(ctx, nil)
	if err != nil {
		return 0, err
	}
	lines := 0
	var werr error
	err = a.eachKnowing(refs, "dlq export", func(_ brokerRef, ac gantryv1.AdminClient) error {
		if werr != nil {
			return nil
		}
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := ac.DLQExport(sctx, &gantryv1.DLQExportRequest{Filter: f.proto()})
		if err != nil {
			return err
		}
		for {
			chunk, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			lines += bytes.Count(chunk.GetData(), []byte("\n"))
			if _, werr = w.Write(chunk.GetData()); werr != nil {
				return nil // cancel the stream
			}
		}
	})
	if werr != nil {
		return lines, fmt.Errorf("client: dlq export: write: %w", werr)
	}
	return lines, err
}

// DLQPurge hides the selected dead letters for good, on every broker (or
// sel.Broker), and returns how many it purged.
func (a *Admin) DLQPurge(ctx context.Context, sel DLQSelection) (int64, error) {
	refs, err := a.dlqSelectionTargets(ctx, "purge", sel)
	if err != nil {
		return 0, err
	}
	var n int64
	err = a.eachKnowing(refs, "dlq purge", func(_ brokerRef, ac gantryv1.AdminClient) error {
		resp, err := ac.DLQPurge(ctx, &gantryv1.DLQPurgeRequest{Selection: sel.proto()})
		n += resp.GetPurged()
		return err
	})
	return n, err
}
