package broker_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/message"
)

// parkedNth waits for the n-th record parked at a delay level and
// returns it.
func parkedNth(t *testing.T, b *broker.Broker, level int32, n int64) *message.Message {
	t.Helper()
	waitVisible(t, b, broker.ScheduleTopic, level-1, n)
	m, err := b.Store().MessageByQueueOffset(broker.ScheduleTopic, level-1, n-1)
	require.NoError(t, err)
	return m
}

// propMap returns m's properties as a map, less the record's CRC.
func propMap(m *message.Message) map[string]string {
	out := map[string]string{}
	for _, p := range m.Properties {
		if p.Key != message.PropCRC {
			out[p.Key] = p.Value
		}
	}
	return out
}

// A send-back call parks its retries through the delay levels as one small
// reference record per group and level; when the level's delay has passed
// the retries appear in %RETRY%<group> exactly as a copied send-back
// (SendBack with the message id, which copies) makes them.
func TestSendBackParksReferences(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, delayConfig(t, clock))
	createTopic(t, b, "Orders", 2)
	var reqs []broker.SendBackRequest
	var ids []string
	for i := range 4 {
		m := newMsg("Orders", int32(i%2), "body-"+strconv.Itoa(i), "TagA")
		m.Properties.Set(message.PropKeys, "key-"+strconv.Itoa(i))
		m.Properties.Set("app", "x")
		res := send(t, b, m)
		reqs = append(reqs, broker.SendBackRequest{Group: "G", PhysicalOffset: res[0].PhysicalOffset})
		ids = append(ids, res[0].UniqKey)
	}
	reqs[3].DelayLevel = 5
	res, errs := b.SendBackBatch(t.Context(), reqs)
	for i := range reqs {
		require.NoError(t, errs[i])
		assert.False(t, res[i].DeadLettered)
		assert.Equal(t, int32(1), res[i].ReconsumeTimes)
	}
	ref := parkedNth(t, b, 3, 1)
	assert.Equal(t, "3", propMap(ref)[message.PropRetryRefs])
	assert.Equal(t, "%RETRY%G", propMap(ref)[message.PropRealTopic])
	assert.Less(t, len(ref.Body), 100, "a reference names the messages, it does not carry them")
	assert.Equal(t, "1", propMap(parkedNth(t, b, 5, 1))[message.PropRetryRefs])
	assert.Zero(t, topicCount(b, "%RETRY%G"), "nothing before the delay")

	// The same message sent back with its id is copied into the schedule.
	m0, err := b.Store().MessageAt(reqs[0].PhysicalOffset)
	require.NoError(t, err)
	_, err = b.SendBack(t.Context(), broker.SendBackRequest{Group: "Copy", PhysicalOffset: reqs[0].PhysicalOffset, MsgID: m0.OffsetMsgID()})
	require.NoError(t, err)
	copied := parkedNth(t, b, 3, 2)
	assert.Equal(t, "body-0", string(copied.Body))
	assert.NotContains(t, propMap(copied), message.PropRetryRefs)

	stillCount(t, b, broker.ScheduleTopic, 3) // one reference record at level 3 for three retries, a copy, a reference at level 5
	clock.Advance(10 * time.Second)
	waitCount(t, b, "%RETRY%G", 3)
	waitCount(t, b, "%RETRY%Copy", 1)
	got := delivered(t, b, "%RETRY%G")
	require.Len(t, got, 3)
	for i, m := range got {
		assert.Equal(t, "body-"+strconv.Itoa(i), string(m.Body))
		assert.Equal(t, int32(1), m.ReconsumeTimes)
		p := propMap(m)
		assert.Equal(t, "Orders", p[message.PropRetryTopic])
		assert.Equal(t, ids[i], p[message.PropOriginMessageID])
		assert.Equal(t, ids[i], p[message.PropUniqKey], "the retry keeps the client's message id")
		assert.Equal(t, "key-"+strconv.Itoa(i), p[message.PropKeys])
		assert.Equal(t, "TagA", p[message.PropTags])
		assert.Equal(t, "x", p["app"])
		assert.Equal(t, "16", p[message.PropMaxReconsumeTimes])
		for _, k := range []string{message.PropDelay, message.PropRealTopic, message.PropRealQueueID, message.PropRetryRefs} {
			assert.NotContains(t, p, k)
		}
	}
	viaCopy := delivered(t, b, "%RETRY%Copy")[0]
	assert.Equal(t, propMap(viaCopy), propMap(got[0]), "a reference delivers what a copy does")
	assert.Equal(t, viaCopy.BornTimestamp, got[0].BornTimestamp)
	assert.Equal(t, viaCopy.Flag, got[0].Flag)

	clock.Advance(time.Minute) // level 5 is 1 m
	waitCount(t, b, "%RETRY%G", 4)
	require.Eventually(t, func() bool { return slices.Equal(make([]int64, 18), b.Status().DelayPending) },
		5*time.Second, time.Millisecond, "the levels move past what they delivered")
}

// Parked references survive a restart and are delivered after it.
func TestRetryReferencesSurviveRestart(t *testing.T) {
	clock := newFakeClock()
	cfg := delayConfig(t, clock)
	b := openBroker(t, cfg)
	createTopic(t, b, "Orders", 1)
	var reqs []broker.SendBackRequest
	for i := range 3 {
		res := send(t, b, newMsg("Orders", 0, "b"+strconv.Itoa(i), ""))
		reqs = append(reqs, broker.SendBackRequest{Group: "G", PhysicalOffset: res[0].PhysicalOffset})
	}
	_, errs := b.SendBackBatch(t.Context(), reqs)
	require.Equal(t, make([]error, 3), errs)
	require.NoError(t, b.Close(t.Context()))

	b = openBroker(t, cfg)
	clock.Advance(10 * time.Second)
	waitCount(t, b, "%RETRY%G", 3)
	got := delivered(t, b, "%RETRY%G")
	assert.Equal(t, []string{"b0", "b1", "b2"}, bodies(got))
	stillCount(t, b, "%RETRY%G", 3)
}

// A message whose retry would fall due after half of fileReservedTime has
// passed since it was stored is copied: retention may not keep it that
// long.
func TestSendBackCopiesOldMessages(t *testing.T) {
	clock := newFakeClock()
	cfg := delayConfig(t, clock)
	cfg.FileReservedTime = time.Hour
	b := openBroker(t, cfg)
	createTopic(t, b, "Orders", 1)
	old := send(t, b, newMsg("Orders", 0, "old", ""))
	clock.Advance(30*time.Minute - 10*time.Second) // old's retry (level 3: 10 s) would fall due 30 m after it was stored
	recent := send(t, b, newMsg("Orders", 0, "recent", ""))
	_, err := b.SendBack(t.Context(), broker.SendBackRequest{Group: "G", PhysicalOffset: old[0].PhysicalOffset})
	require.NoError(t, err)
	assert.Equal(t, "old", string(parkedNth(t, b, 3, 1).Body), "copied")
	_, err = b.SendBack(t.Context(), broker.SendBackRequest{Group: "G", PhysicalOffset: recent[0].PhysicalOffset})
	require.NoError(t, err)
	assert.Equal(t, "1", propMap(parkedNth(t, b, 3, 2))[message.PropRetryRefs], "referenced")
	clock.Advance(10 * time.Second)
	waitCount(t, b, "%RETRY%G", 2)
	assert.Equal(t, []string{"old", "recent"}, bodies(delivered(t, b, "%RETRY%G")))
}

// A message that merely carries GANTRY_RETRY_REFS is not taken for a
// reference: parking drops the property, and the message is delivered as
// it was sent.
func TestRetryRefsPropertyReserved(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, delayConfig(t, clock))
	createTopic(t, b, "Orders", 1)
	m := delayedMsg("Orders", 0, "GRR\x01 forged", message.PropDelay, "3", message.PropRetryRefs, "1")
	res := send(t, b, m)
	assert.NotContains(t, propMap(parkedMessage(t, b, res[0].MsgID)), message.PropRetryRefs)
	clock.Advance(10 * time.Second)
	waitCount(t, b, "Orders", 1)
	assert.Equal(t, []string{"GRR\x01 forged"}, bodies(delivered(t, b, "Orders")))
}

// A reference to a message no longer in the log (here: a wrong size, or
// no record at the offset) loses that retry with a warning; the others of
// the record are delivered and the level moves on.
func TestRetryReferenceToMissingMessage(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, delayConfig(t, clock))
	createTopic(t, b, "Orders", 1)
	res := send(t, b, newMsg("Orders", 0, "here", ""))
	r, _, err := b.Store().CommitLog().ReadRecord(res[0].PhysicalOffset)
	require.NoError(t, err)
	size := int32(len(r.B))
	r.Release()
	require.NoError(t, b.ParkRetryRefs(t.Context(), "G", 3,
		broker.RetryRef{Phys: res[0].PhysicalOffset, Size: size + 1, MaxTimes: 16},
		broker.RetryRef{Phys: res[0].PhysicalOffset + 1, Size: size, MaxTimes: 16},
		broker.RetryRef{Phys: res[0].PhysicalOffset, Size: size, MaxTimes: 16}))
	waitVisible(t, b, broker.ScheduleTopic, 2, 1)
	clock.Advance(10 * time.Second)
	waitCount(t, b, "%RETRY%G", 1)
	assert.Equal(t, []string{"here"}, bodies(delivered(t, b, "%RETRY%G")))
	require.Eventually(t, func() bool { return b.Status().DelayPending[2] == 0 }, 5*time.Second, time.Millisecond)
}

// A call of more messages than one reference record holds parks several;
// each send-back's result names the record that holds it.
func TestSendBackSplitsReferenceRecords(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, delayConfig(t, clock))
	createTopic(t, b, "Orders", 1)
	const n = 300 // a record holds 256
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = newMsg("Orders", 0, "m"+strconv.Itoa(i), "")
	}
	sent, err := b.Send(t.Context(), "Orders", msgs)
	require.NoError(t, err)
	reqs := make([]broker.SendBackRequest, n)
	for i, r := range sent {
		reqs[i] = broker.SendBackRequest{Group: "G", PhysicalOffset: r.PhysicalOffset}
	}
	res, errs := b.SendBackBatch(t.Context(), reqs)
	require.Equal(t, make([]error, n), errs)
	first, second := parkedNth(t, b, 3, 1), parkedNth(t, b, 3, 2)
	assert.Equal(t, "256", propMap(first)[message.PropRetryRefs])
	assert.Equal(t, "44", propMap(second)[message.PropRetryRefs])
	for i, r := range res {
		want := first.PhysicalOffset
		if i >= 256 {
			want = second.PhysicalOffset
		}
		require.Equal(t, want, r.Put.PhysicalOffset, "send-back %d", i)
	}
	clock.Advance(10 * time.Second)
	waitCount(t, b, "%RETRY%G", n)
	got := bodies(delivered(t, b, "%RETRY%G"))
	require.Len(t, got, n)
	assert.Equal(t, "m0", got[0])
	assert.Equal(t, "m299", got[n-1])
}
