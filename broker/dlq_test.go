package broker_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

const dlqGroup = "billing"

var dlqTopic = broker.DLQTopic(dlqGroup)

// dlqBroker opens a broker on clk with topics Orders and Payments.
func dlqBroker(t *testing.T, clk *fakeClock) (*broker.Broker, broker.Config) {
	t.Helper()
	cfg := testConfig(t)
	cfg.Now = clk.Now
	b := openBroker(t, cfg)
	createTopic(t, b, "Orders", 2)
	createTopic(t, b, "Payments", 1)
	return b, cfg
}

// deadLetter sends a message to topic and dead-letters it for dlqGroup at
// once; it returns the original's put result.
func deadLetter(t *testing.T, b *broker.Broker, topic, body, tag string, keys ...string) store.PutResult {
	t.Helper()
	m := newMsg(topic, 0, body, tag)
	if len(keys) > 0 {
		m.Properties.Set(message.PropKeys, keys[0])
	}
	m.Properties.Set("app", "x")
	res := send(t, b, m)
	_, maxBefore := b.Store().QueueOffsets(dlqTopic, 0)
	sb, err := b.SendBack(t.Context(), broker.SendBackRequest{Group: dlqGroup, PhysicalOffset: res[0].PhysicalOffset,
		DelayLevel: -1, Reason: "boom " + body})
	require.NoError(t, err)
	require.True(t, sb.DeadLettered)
	waitVisible(t, b, dlqTopic, 0, maxBefore+1)
	return res[0].PutResult
}

func list(t *testing.T, b *broker.Broker, req broker.DLQListRequest) broker.DLQPage {
	t.Helper()
	if req.Group == "" {
		req.Group = dlqGroup
	}
	page, err := b.ListDLQ(t.Context(), req)
	require.NoError(t, err)
	return page
}

func offsetsOf(es []broker.DLQEntry) []int64 {
	var out []int64
	for _, e := range es {
		out = append(out, e.Offset)
	}
	return out
}

// A dead letter is pulled and listed until DLQRetention after it was
// dead-lettered, then never; the sweep then moves the queue's min offset.
func TestDLQExpiry(t *testing.T) {
	clk := newFakeClock()
	b, _ := dlqBroker(t, clk)
	orig := deadLetter(t, b, "Orders", "a", "TagA", "k1")
	clk.Advance(time.Hour)
	deadLetter(t, b, "Orders", "b", "TagA")

	clk.Advance(broker.DefaultDLQRetention - time.Hour - time.Millisecond) // a: 1 ms to live
	_, got := pull(t, b, broker.PullRequest{Topic: dlqTopic})
	assert.Equal(t, []string{"a", "b"}, bodies(got))
	page := list(t, b, broker.DLQListRequest{})
	require.Len(t, page.Entries, 2)
	assert.Equal(t, orig.UniqKey, page.Entries[0].UniqKey)

	clk.Advance(time.Millisecond) // a expires
	res, got := pull(t, b, broker.PullRequest{Topic: dlqTopic})
	assert.Equal(t, []string{"b"}, bodies(got), "an expired dead letter is never pulled")
	assert.Equal(t, int64(2), res.NextOffset)
	assert.Equal(t, []int64{1}, offsetsOf(list(t, b, broker.DLQListRequest{}).Entries))
	_, err := b.ShowDLQ(t.Context(), broker.DLQRef{Group: dlqGroup, Offset: 0})
	require.ErrorIs(t, err, broker.ErrDeadLetterNotFound)

	minOff, _ := b.Store().QueueOffsets(dlqTopic, 0)
	assert.Equal(t, int64(0), minOff)
	b.SweepDLQ()
	minOff, _ = b.Store().QueueOffsets(dlqTopic, 0)
	assert.Equal(t, int64(1), minOff, "the sweep moves the min offset past the expired prefix")

	clk.Advance(time.Hour) // b expires
	res, got = pull(t, b, broker.PullRequest{Topic: dlqTopic, Offset: 1})
	assert.Empty(t, got)
	assert.Equal(t, store.OffsetOverflowOne, res.Status, "nothing left: a pull waits at the end")
	assert.Equal(t, int64(2), res.NextOffset)
	assert.Empty(t, list(t, b, broker.DLQListRequest{}).Entries)
	b.SweepDLQ()
	minOff, maxOff := b.Store().QueueOffsets(dlqTopic, 0)
	assert.Equal(t, [2]int64{2, 2}, [2]int64{minOff, maxOff})
}

// The broker's sweep loop moves the min offset on its own.
func TestDLQSweepLoop(t *testing.T) {
	clk := newFakeClock()
	cfg := testConfig(t).WithDLQSweepInterval(5 * time.Millisecond)
	cfg.Now = clk.Now
	b := openBroker(t, cfg)
	createTopic(t, b, "Orders", 1)
	deadLetter(t, b, "Orders", "a", "")
	clk.Advance(broker.DefaultDLQRetention)
	require.Eventually(t, func() bool {
		minOff, _ := b.Store().QueueOffsets(dlqTopic, 0)
		return minOff == 1
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, []broker.DLQGroupStats{{Group: dlqGroup, Stored: 1}}, b.DLQStats())
}

// Retention keeps the log segments holding unexpired dead letters, even
// past fileReservedTime, and deletes them once they expired.
func TestDLQRetentionPin(t *testing.T) {
	clk := newFakeClock()
	cfg := testConfig(t)
	cfg.Now, cfg.StorePathRootDir = clk.Now, "/store"
	cfg.FileReservedTime = time.Hour
	cfg.DeleteWhen = "0;1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18;19;20;21;22;23"
	mem := fsx.NewMemFS()
	cfg.StoreOverride = func(sc *store.Config) { smallStore(sc); sc.FS = mem }
	b := openBroker(t, cfg)
	createTopic(t, b, "Orders", 1)
	fill := func(n int) {
		for i := range n {
			send(t, b, newMsg("Orders", 0, fmt.Sprintf("%01000d", i), ""))
		}
	}
	fill(200) // about 3 segments of 64 KiB
	dl := deadLetter(t, b, "Orders", "dead", "")
	fill(300)
	waitVisible(t, b, "Orders", 0, 501) // dispatched: retention may delete them
	require.Equal(t, int64(0), b.Store().CommitLog().MinOffset())
	dead := list(t, b, broker.DLQListRequest{}).Entries[0]
	_, phys, err := message.DecodeOffsetMsgID(dead.MsgID)
	require.NoError(t, err)
	assert.Equal(t, phys, b.DLQKeepFrom())

	clk.Advance(2 * time.Hour) // every sealed segment expired; the dead letter not
	cr, err := b.Store().CommitLog().Clean()
	require.NoError(t, err)
	require.NotEmpty(t, cr.Deleted, "segments before the dead letter's go")
	assert.NotEmpty(t, cr.Pinned, "the dead letter's segment stays")
	logMin := b.Store().CommitLog().MinOffset()
	assert.LessOrEqual(t, logMin, phys)
	assert.Greater(t, logMin, dl.PhysicalOffset-64<<10, "only the segment holding it (and those after) stay")
	_, got := pull(t, b, broker.PullRequest{Topic: dlqTopic})
	assert.Equal(t, []string{"dead"}, bodies(got))

	clk.Advance(broker.DefaultDLQRetention) // expired
	assert.Equal(t, int64(1<<63-1), b.DLQKeepFrom(), "nothing pinned")
	cr, err = b.Store().CommitLog().Clean()
	require.NoError(t, err)
	assert.NotEmpty(t, cr.Deleted)
	assert.Empty(t, cr.Pinned)
	assert.Greater(t, b.Store().CommitLog().MinOffset(), phys, "the segment holding the expired dead letter is deleted")
}

// List filters by origin topic, key, id and dead-letter time, and pages
// with a cursor.
func TestDLQListFiltersAndPaging(t *testing.T) {
	clk := newFakeClock()
	b, _ := dlqBroker(t, clk)
	t0 := clk.Now()
	var origs []store.PutResult
	for i := range 6 {
		topic := []string{"Orders", "Payments"}[i%2]
		origs = append(origs, deadLetter(t, b, topic, fmt.Sprintf("m%d", i), "Tag"+topic, fmt.Sprintf("k%d shared", i)))
		clk.Advance(time.Minute)
	}
	all := list(t, b, broker.DLQListRequest{})
	require.Len(t, all.Entries, 6)
	assert.False(t, all.More)
	assert.Equal(t, int64(6), all.NextCursor)
	e := all.Entries[3]
	assert.Equal(t, broker.DLQEntry{
		Offset: 3, MsgID: e.MsgID, OriginTopic: "Payments", OriginMsgID: origs[3].UniqKey, UniqKey: origs[3].UniqKey,
		Keys: []string{"k3", "shared"}, Tags: "TagPayments", ReconsumeTimes: 0, BornTime: time.UnixMilli(1),
		DeadLetterTime: t0.Add(3 * time.Minute), Reason: "boom m3", BodySize: 2,
	}, e)

	tests := []struct {
		name string
		f    broker.DLQFilter
		want []int64
	}{
		{"origin topic", broker.DLQFilter{OriginTopic: "Payments"}, []int64{1, 3, 5}},
		{"key", broker.DLQFilter{Key: "k4"}, []int64{4}},
		{"shared key and topic", broker.DLQFilter{Key: "shared", OriginTopic: "Orders"}, []int64{0, 2, 4}},
		{"message id", broker.DLQFilter{MsgID: origs[2].UniqKey}, []int64{2}},
		{"offset message id, any case", broker.DLQFilter{MsgID: strings.ToLower(all.Entries[5].MsgID)}, []int64{5}},
		{"the original's offset message id", broker.DLQFilter{MsgID: origs[4].MsgID}, []int64{4}},
		{"an offset message id naming no message", broker.DLQFilter{MsgID: origs[4].MsgID[:16] + "00000000000000FF"}, nil},
		{"time range", broker.DLQFilter{Begin: t0.Add(time.Minute), End: t0.Add(3 * time.Minute)}, []int64{1, 2}},
		{"begin only", broker.DLQFilter{Begin: t0.Add(4 * time.Minute)}, []int64{4, 5}},
		{"no match", broker.DLQFilter{OriginTopic: "Nope"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f.Group = dlqGroup
			assert.Equal(t, tt.want, offsetsOf(list(t, b, broker.DLQListRequest{DLQFilter: tt.f}).Entries))
		})
	}

	var pages [][]int64
	cursor := int64(0)
	for range 5 {
		p := list(t, b, broker.DLQListRequest{DLQFilter: broker.DLQFilter{OriginTopic: "Orders"}, Cursor: cursor, Limit: 2})
		pages = append(pages, offsetsOf(p.Entries))
		cursor = p.NextCursor
		if !p.More {
			break
		}
	}
	assert.Equal(t, [][]int64{{0, 2}, {4}}, pages)
	deadLetter(t, b, "Orders", "late", "")
	assert.Equal(t, []int64{6}, offsetsOf(list(t, b, broker.DLQListRequest{Cursor: cursor}).Entries),
		"listing from the last cursor finds what came since")

	for _, bad := range []broker.DLQListRequest{
		{DLQFilter: broker.DLQFilter{Group: dlqGroup, Begin: t0, End: t0}},
		{DLQFilter: broker.DLQFilter{Group: dlqGroup}, Cursor: -1},
		{DLQFilter: broker.DLQFilter{Group: dlqGroup}, Limit: -1},
		{DLQFilter: broker.DLQFilter{Group: "bad group"}},
	} {
		_, err := b.ListDLQ(t.Context(), bad)
		assert.ErrorIs(t, err, broker.ErrInvalidArgument, "%+v", bad)
	}
	_, err := b.ListDLQ(t.Context(), broker.DLQListRequest{DLQFilter: broker.DLQFilter{Group: "nobody"}})
	assert.ErrorIs(t, err, broker.ErrGroupNotFound)
}

// Show returns the body, properties and history, by offset or id.
func TestDLQShow(t *testing.T) {
	clk := newFakeClock()
	b, _ := dlqBroker(t, clk)
	deadLetter(t, b, "Orders", "first", "TagA", "k0")
	orig := deadLetter(t, b, "Orders", "second", "TagA", "k1")
	byOffset, err := b.ShowDLQ(t.Context(), broker.DLQRef{Group: dlqGroup, Offset: 1})
	require.NoError(t, err)
	byID, err := b.ShowDLQ(t.Context(), broker.DLQRef{Group: dlqGroup, MsgID: orig.UniqKey})
	require.NoError(t, err)
	assert.Equal(t, byOffset, byID)
	assert.Equal(t, "second", string(byID.Body))
	assert.Equal(t, "Orders", getProp(byID.Properties, message.PropDLQOriginTopic))
	assert.Equal(t, "x", getProp(byID.Properties, "app"))
	assert.Equal(t, clk.Now().Add(broker.DefaultDLQRetention), byID.Expires)
	require.Len(t, byID.History, 2)
	assert.Equal(t, "sent to Orders", byID.History[0].What)
	assert.Equal(t, "dead-lettered after 0 failed deliveries: boom second", byID.History[1].What)

	_, err = b.ResendDLQ(t.Context(), broker.DLQResendRequest{DLQSelect: broker.DLQSelect{Offsets: []int64{1},
		DLQFilter: broker.DLQFilter{Group: dlqGroup}}})
	require.NoError(t, err)
	m, err := b.ShowDLQ(t.Context(), broker.DLQRef{Group: dlqGroup, Offset: 1})
	require.NoError(t, err)
	require.Len(t, m.History, 3)
	assert.Equal(t, "resent from here 1 time(s), last at this time", m.History[2].What)

	for _, ref := range []broker.DLQRef{{Group: dlqGroup, Offset: 2}, {Group: dlqGroup, MsgID: "nope"}} {
		_, err = b.ShowDLQ(t.Context(), ref)
		assert.ErrorIs(t, err, broker.ErrDeadLetterNotFound)
	}
}

func getProp(p message.Properties, k string) string {
	v, _ := p.Get(k)
	return v
}

// Resent dead letters arrive in their topic (or the group's retry topic)
// as new messages with DLQ_RESENDS, and the entries count their resends.
func TestDLQResend(t *testing.T) {
	clk := newFakeClock()
	b, _ := dlqBroker(t, clk)
	orig := deadLetter(t, b, "Orders", "o1", "TagA", "k1")
	deadLetter(t, b, "Payments", "p1", "TagP")
	deadLetter(t, b, "Orders", "o2", "TagA")
	one := broker.DLQSelect{DLQFilter: broker.DLQFilter{Group: dlqGroup, MsgID: orig.UniqKey}}

	pullOrders := func(from int64) []*message.Message {
		var out []*message.Message
		for q := range int32(2) {
			_, got := pull(t, b, broker.PullRequest{Topic: "Orders", QueueID: q, Offset: from})
			out = append(out, got...)
		}
		return out
	}
	before := pullOrders(0)
	for n := 1; n <= 2; n++ {
		res, err := b.ResendDLQ(t.Context(), broker.DLQResendRequest{DLQSelect: one})
		require.NoError(t, err)
		require.Len(t, res.Resent, 1)
		assert.Equal(t, broker.DLQResent{Offset: 0, UniqKey: orig.UniqKey, Topic: "Orders", MsgID: res.Resent[0].MsgID, Resends: int32(n)}, res.Resent[0])
		assert.Empty(t, res.Failed)
		e := list(t, b, broker.DLQListRequest{DLQFilter: one.DLQFilter}).Entries[0]
		assert.Equal(t, int32(n), e.Resends)
		assert.Equal(t, clk.Now(), e.LastResend)
		clk.Advance(time.Second)
	}
	require.Eventually(t, func() bool { return len(pullOrders(0)) == len(before)+2 }, 5*time.Second, time.Millisecond)
	var resent []*message.Message
	for _, m := range pullOrders(0) {
		if _, ok := m.Properties.Get(message.PropDLQResendTimes); ok {
			resent = append(resent, m)
		}
	}
	require.Len(t, resent, 2)
	for i, m := range resent {
		assert.Equal(t, "o1", string(m.Body))
		assert.Equal(t, orig.UniqKey, m.UniqKey(), "the id is kept")
		assert.Equal(t, []string{"k1"}, m.Keys())
		assert.Equal(t, "TagA", m.Tags())
		assert.Equal(t, "x", getProp(m.Properties, "app"), "user properties are kept")
		assert.Equal(t, int32(0), m.ReconsumeTimes)
		assert.Equal(t, fmt.Sprint(i+1), getProp(m.Properties, message.PropDLQResendTimes))
		for _, k := range []string{message.PropDLQOriginTopic, message.PropDLQOriginMessageID, message.PropDLQReason,
			message.PropRetryTopic, message.PropOriginMessageID} {
			_, ok := m.Properties.Get(k)
			assert.False(t, ok, "no %s", k)
		}
	}

	// By filter: the Orders dead letters; then all, to the retry topic.
	res, err := b.ResendDLQ(t.Context(), broker.DLQResendRequest{DLQSelect: broker.DLQSelect{DLQFilter: broker.DLQFilter{Group: dlqGroup, OriginTopic: "Orders"}}})
	require.NoError(t, err)
	assert.Len(t, res.Resent, 2)
	res, err = b.ResendDLQ(t.Context(), broker.DLQResendRequest{DLQSelect: broker.DLQSelect{DLQFilter: broker.DLQFilter{Group: dlqGroup}, All: true}, ToRetry: true})
	require.NoError(t, err)
	require.Len(t, res.Resent, 3)
	retry := broker.RetryTopic(dlqGroup)
	for _, r := range res.Resent {
		assert.Equal(t, retry, r.Topic)
	}
	waitVisible(t, b, retry, 0, 3)
	_, got := pull(t, b, broker.PullRequest{Topic: retry})
	require.Len(t, got, 3)
	assert.Equal(t, []string{"o1", "p1", "o2"}, bodies(got))
	assert.Equal(t, "Payments", getProp(got[1].Properties, message.PropRetryTopic), "the group's consumers see the original topic")
	assert.Equal(t, "4", getProp(got[0].Properties, message.PropDLQResendTimes))
	assert.Equal(t, []int32{4, 1, 2}, []int32{res.Resent[0].Resends, res.Resent[1].Resends, res.Resent[2].Resends})

	// A deleted topic fails that dead letter only.
	require.NoError(t, b.DeleteTopic("Payments"))
	res, err = b.ResendDLQ(t.Context(), broker.DLQResendRequest{DLQSelect: broker.DLQSelect{DLQFilter: broker.DLQFilter{Group: dlqGroup}, All: true}})
	require.NoError(t, err)
	assert.Len(t, res.Resent, 2)
	require.Len(t, res.Failed, 1)
	assert.Equal(t, int64(1), res.Failed[0].Offset)
	assert.ErrorIs(t, res.Failed[0].Err, broker.ErrTopicNotFound)

	for _, sel := range []broker.DLQSelect{
		{DLQFilter: broker.DLQFilter{Group: dlqGroup}},
		{DLQFilter: broker.DLQFilter{Group: dlqGroup, Key: "k1"}, All: true},
		{DLQFilter: broker.DLQFilter{Group: dlqGroup}, Offsets: []int64{-1}},
	} {
		_, err := b.ResendDLQ(t.Context(), broker.DLQResendRequest{DLQSelect: sel})
		assert.ErrorIs(t, err, broker.ErrInvalidArgument, "%+v", sel)
	}
}

// Export writes one JSON object per dead letter, which parses back.
func TestDLQExport(t *testing.T) {
	clk := newFakeClock()
	b, _ := dlqBroker(t, clk)
	orig := deadLetter(t, b, "Orders", "hello \x00 bytes", "TagA", "k1 k2")
	deadLetter(t, b, "Payments", "other", "")
	var buf bytes.Buffer
	n, err := b.ExportDLQ(t.Context(), broker.DLQFilter{Group: dlqGroup}, &buf)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	var recs []broker.DLQExportRecord
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var r broker.DLQExportRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
		recs = append(recs, r)
	}
	require.Len(t, recs, 2)
	r := recs[0]
	assert.Equal(t, "hello \x00 bytes", string(r.Body))
	assert.Equal(t, dlqGroup, r.Group)
	assert.Equal(t, orig.UniqKey, r.UniqKey)
	assert.Equal(t, "Orders", r.OriginTopic)
	assert.Equal(t, []string{"k1", "k2"}, r.Keys)
	assert.Equal(t, "TagA", r.Tags)
	assert.Equal(t, clk.Now().UTC(), r.DeadLetterTime)
	assert.Equal(t, "boom hello \x00 bytes", r.Reason)
	assert.Equal(t, "x", r.Properties["app"])

	buf.Reset()
	n, err = b.ExportDLQ(t.Context(), broker.DLQFilter{Group: dlqGroup, OriginTopic: "Payments"}, &buf)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Contains(t, buf.String(), `"body":"b3RoZXI="`, "the body is base64")
}

// Purged dead letters are never listed or pulled again; a purged prefix
// moves the queue's min offset.
func TestDLQPurge(t *testing.T) {
	clk := newFakeClock()
	b, _ := dlqBroker(t, clk)
	var origs []store.PutResult
	for i := range 5 {
		origs = append(origs, deadLetter(t, b, "Orders", fmt.Sprint(i), ""))
	}
	n, err := b.PurgeDLQ(t.Context(), broker.DLQSelect{DLQFilter: broker.DLQFilter{Group: dlqGroup, MsgID: origs[2].UniqKey}})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []int64{0, 1, 3, 4}, offsetsOf(list(t, b, broker.DLQListRequest{}).Entries))
	_, got := pull(t, b, broker.PullRequest{Topic: dlqTopic})
	assert.Equal(t, []string{"0", "1", "3", "4"}, bodies(got), "a purged dead letter is not pulled")
	n, err = b.PurgeDLQ(t.Context(), broker.DLQSelect{DLQFilter: broker.DLQFilter{Group: dlqGroup, MsgID: origs[2].UniqKey}})
	require.NoError(t, err)
	assert.Zero(t, n, "purged already")

	n, err = b.PurgeDLQ(t.Context(), broker.DLQSelect{DLQFilter: broker.DLQFilter{Group: dlqGroup}, Offsets: []int64{0, 1, 9}})
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	minOff, _ := b.Store().QueueOffsets(dlqTopic, 0)
	assert.Equal(t, int64(3), minOff, "0..2 purged: the min offset moves")
	res, got := pull(t, b, broker.PullRequest{Topic: dlqTopic})
	assert.Equal(t, []string{"3", "4"}, bodies(got))
	assert.Equal(t, int64(5), res.NextOffset)

	n, err = b.PurgeDLQ(t.Context(), broker.DLQSelect{DLQFilter: broker.DLQFilter{Group: dlqGroup}, All: true})
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Empty(t, list(t, b, broker.DLQListRequest{}).Entries)
	minOff, _ = b.Store().QueueOffsets(dlqTopic, 0)
	assert.Equal(t, int64(5), minOff)
	deadLetter(t, b, "Orders", "after", "")
	assert.Equal(t, []int64{5}, offsetsOf(list(t, b, broker.DLQListRequest{}).Entries), "new dead letters come after a purge")
	st := b.DLQStats()
	require.Len(t, st, 1)
	assert.Equal(t, broker.DLQGroupStats{Group: dlqGroup, Stored: 6, Held: 1}, st[0])
}

// Resend marks, purges and the swept min offset survive a restart.
func TestDLQStatePersists(t *testing.T) {
	clk := newFakeClock()
	b, cfg := dlqBroker(t, clk)
	for i := range 4 {
		deadLetter(t, b, "Orders", fmt.Sprint(i), "")
	}
	_, err := b.PurgeDLQ(t.Context(), broker.DLQSelect{DLQFilter: broker.DLQFilter{Group: dlqGroup}, Offsets: []int64{0, 2}})
	require.NoError(t, err)
	for range 2 {
		_, err = b.ResendDLQ(t.Context(), broker.DLQResendRequest{DLQSelect: broker.DLQSelect{DLQFilter: broker.DLQFilter{Group: dlqGroup}, Offsets: []int64{3}}})
		require.NoError(t, err)
	}
	want := list(t, b, broker.DLQListRequest{})
	require.Equal(t, []int64{1, 3}, offsetsOf(want.Entries))
	require.Equal(t, int32(2), want.Entries[1].Resends)
	closeBroker(t, b)

	b = openBroker(t, cfg)
	assert.Equal(t, want, list(t, b, broker.DLQListRequest{}))
	minOff, _ := b.Store().QueueOffsets(dlqTopic, 0)
	assert.Equal(t, int64(1), minOff, "the purged prefix's min offset is re-applied")
	_, got := pull(t, b, broker.PullRequest{Topic: dlqTopic})
	assert.Equal(t, []string{"1", "3"}, bodies(got))
}

// A send-back naming the wrong message id is refused, and the error names
// the id of the message that is at that offset.
func TestSendBackWrongMsgID(t *testing.T) {
	b, _ := dlqBroker(t, newFakeClock())
	res := send(t, b, newMsg("Orders", 0, "hello", "TagA"))
	_, err := b.SendBack(t.Context(), broker.SendBackRequest{Group: dlqGroup, PhysicalOffset: res[0].PhysicalOffset, MsgID: "0A0000010000000000000000"})
	require.ErrorIs(t, err, broker.ErrInvalidArgument)
	assert.ErrorContains(t, err, "is "+res[0].MsgID+", not 0A0000010000000000000000")
}
