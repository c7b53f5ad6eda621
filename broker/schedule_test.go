package broker_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/message"
)

// delayConfig is testConfig on clock with a 1 ms scheduler tick.
func delayConfig(t *testing.T, clock *fakeClock) broker.Config {
	cfg := testConfig(t)
	cfg.Now = clock.Now
	return cfg.WithScheduleTick(time.Millisecond)
}

// setClock moves clock to at.
func setClock(c *fakeClock, at time.Time) { c.Advance(at.Sub(c.Now())) }

func delayedMsg(topic string, queueID int32, body string, props ...string) *message.Message {
	m := newMsg(topic, queueID, body, "")
	for i := 0; i+1 < len(props); i += 2 {
		m.Properties = append(m.Properties, message.Property{Key: props[i], Value: props[i+1]})
	}
	return m
}

// delivered returns every message of a topic, by queue then offset.
func delivered(t *testing.T, b *broker.Broker, topic string) []*message.Message {
	t.Helper()
	tc, ok := b.Topic(topic)
	require.True(t, ok, topic)
	var out []*message.Message
	for q := range tc.ReadQueueNums {
		for off := int64(0); ; {
			res, got := pull(t, b, broker.PullRequest{Topic: topic, QueueID: q, Offset: off, MaxMsgs: broker.MaxPullMsgs})
			out = append(out, got...)
			if res.NextOffset == off {
				break
			}
			off = res.NextOffset
		}
	}
	return out
}

// topicCount returns how many messages a topic's queues hold.
func topicCount(b *broker.Broker, topic string) int64 {
	tc, _ := b.Topic(topic)
	var n int64
	for q := range tc.WriteQueueNums {
		_, maxOff := b.Store().QueueOffsets(topic, q)
		n += maxOff
	}
	return n
}

// waitCount waits until a topic holds n messages.
func waitCount(t *testing.T, b *broker.Broker, topic string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return topicCount(b, topic) >= n }, 10*time.Second, 100*time.Microsecond,
		"waiting for %d messages in %s", n, topic)
	assert.Equal(t, n, topicCount(b, topic), "messages in %s", topic)
}

// stillCount checks that a topic keeps n messages for a while (many ticks).
func stillCount(t *testing.T, b *broker.Broker, topic string, n int64) {
	t.Helper()
	assert.Never(t, func() bool { return topicCount(b, topic) != n }, 30*time.Millisecond, time.Millisecond,
		"%s must keep %d messages", topic, n)
}

func parkedMessage(t *testing.T, b *broker.Broker, msgID string) *message.Message {
	t.Helper()
	m, err := b.Store().MessageByOffsetID(msgID)
	require.NoError(t, err)
	return m
}

// Every default level waits its delay, measured from the parked record's
// store time on the broker's clock, and no longer.
func TestDelayLevelsHonoured(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, delayConfig(t, clock))
	createTopic(t, b, "Delayed", 4)
	t0 := clock.Now()
	delays := broker.Config{}.WithDefaults().MessageDelayLevel
	parkedAt := map[string]int64{}
	for level := 1; level <= 18; level++ {
		body := fmt.Sprintf("L%d", level)
		res := send(t, b, delayedMsg("Delayed", int32(level%4), body, message.PropDelay, strconv.Itoa(level)))
		require.Len(t, res, 1)
		assert.Equal(t, int32(level-1), res[0].QueueID, "parked in queue L-1")
		p := parkedMessage(t, b, res[0].MsgID)
		assert.Equal(t, broker.ScheduleTopic, p.Topic)
		realTopic, _ := p.Properties.Get(message.PropRealTopic)
		realQID, _ := p.Properties.Get(message.PropRealQueueID)
		assert.Equal(t, []string{"Delayed", strconv.Itoa(level % 4)}, []string{realTopic, realQID})
		parkedAt[body] = p.StoreTimestamp
	}
	assert.Zero(t, topicCount(b, "Delayed"))
	for level, d := range delays {
		setClock(clock, t0.Add(d-time.Millisecond))
		stillCount(t, b, "Delayed", int64(level))
		setClock(clock, t0.Add(d))
		waitCount(t, b, "Delayed", int64(level+1))
	}
	got := delivered(t, b, "Delayed")
	require.Len(t, got, 18)
	for _, m := range got {
		level, err := strconv.Atoi(strings.TrimPrefix(string(m.Body), "L"))
		require.NoError(t, err)
		due := parkedAt[string(m.Body)] + delays[level-1].Milliseconds()
		assert.GreaterOrEqual(t, m.StoreTimestamp, due, "level %d early", level)
		assert.Less(t, m.StoreTimestamp, due+1000, "level %d late", level)
		assert.Equal(t, int32(level%4), m.QueueID, "REAL_QID")
	}
	// A level's pending count falls once its offset moves, just after the
	// delivery is stored.
	assert.Eventually(t, func() bool { return slices.Equal(make([]int64, 18), b.Status().DelayPending) },
		5*time.Second, time.Millisecond, "the levels move past what they delivered")
}

// A delivered message is a new message with the parked one's body, flag,
// born time and host, reconsume times and properties, less DELAY,
// REAL_TOPIC and REAL_QID.
func TestDelayedMessageRestored(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, delayConfig(t, clock))
	createTopic(t, b, "Delayed", 4)
	m := delayedMsg("Delayed", 3, "payload", message.PropTags, "TagA", message.PropKeys, "k1 k2",
		message.PropRetryTopic, "Orig", message.PropOriginMessageID, "ORIG-ID", "color", "blue", message.PropDelay, "2")
	m.Flag, m.BornTimestamp, m.ReconsumeTimes = 7, 1_600_000_000_123, 3
	m.BornHost = netip.MustParseAddrPort("10.1.2.3:4567")
	picked := delayedMsg("Delayed", broker.BrokerPicksQueue, "picked", message.PropDelay, "2")
	res := send(t, b, m, picked)
	p := parkedMessage(t, b, res[1].MsgID)
	pickedQID, _ := p.Properties.Get(message.PropRealQueueID)
	assert.NotEqual(t, "-1", pickedQID, "REAL_QID is the broker's pick")
	assert.Equal(t, "-1", strconv.Itoa(int(picked.QueueID)), "the caller's message is not modified")
	assert.Equal(t, "2", func() string { v, _ := picked.Properties.Get(message.PropDelay); return v }())

	clock.Advance(5 * time.Second)
	waitCount(t, b, "Delayed", 2)
	_, got := pull(t, b, broker.PullRequest{Topic: "Delayed", QueueID: 3, Filter: "TagA"})
	require.Len(t, got, 1, "tag filters see the delivered message")
	d := got[0]
	assert.Equal(t, "payload", string(d.Body))
	assert.Equal(t, int32(7), d.Flag)
	assert.Equal(t, int64(1_600_000_000_123), d.BornTimestamp)
	assert.Equal(t, m.BornHost, d.BornHost)
	assert.Equal(t, int32(3), d.ReconsumeTimes)
	assert.Equal(t, res[0].UniqKey, d.UniqKey(), "UNIQ_KEY kept: the message id stays")
	assert.Equal(t, []string{"k1", "k2"}, d.Keys())
	for k, want := range map[string]string{message.PropTags: "TagA", message.PropRetryTopic: "Orig",
		message.PropOriginMessageID: "ORIG-ID", "color": "blue"} {
		v, ok := d.Properties.Get(k)
		assert.True(t, ok, k)
		assert.Equal(t, want, v, k)
	}
	for _, k := range []string{message.PropDelay, message.PropRealTopic, message.PropRealQueueID} {
		_, ok := d.Properties.Get(k)
		assert.False(t, ok, "%s removed", k)
	}
	assert.NotEqual(t, res[0].PhysicalOffset, d.PhysicalOffset, "a new record")
	found, err := b.Store().MessagesByKey("Delayed", "k1", 0, 1<<62, 10)
	require.NoError(t, err)
	assert.Len(t, found, 1, "indexed under its topic")

	qid, _ := strconv.Atoi(pickedQID)
	_, got = pull(t, b, broker.PullRequest{Topic: "Delayed", QueueID: int32(qid)})
	assert.Contains(t, bodies(got), "picked", "delivered to the picked queue")
}

// One Send mixing normal, level-delayed, timed and already-due messages is
// stored as one unit, each where it belongs.
func TestDelayMixedBatch(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, delayConfig(t, clock))
	createTopic(t, b, "Mixed", 2)
	now := clock.Now().UnixMilli()
	res := send(t, b,
		delayedMsg("Mixed", 0, "normal-1"),
		delayedMsg("Mixed", 1, "level-3", message.PropDelay, "3"),
		delayedMsg("Mixed", 0, "zero", message.PropDelay, "0"),
		delayedMsg("Mixed", 1, "timer-7s", message.PropTimerDelaySec, "7"),
		delayedMsg("Mixed", 0, "past", message.PropTimerDeliverMS, strconv.FormatInt(now-5000, 10)),
		delayedMsg("Mixed", 1, "normal-2"),
	)
	topics := make([]string, len(res))
	for i, r := range res {
		topics[i] = parkedMessage(t, b, r.MsgID).Topic
	}
	assert.Equal(t, []string{"Mixed", broker.ScheduleTopic, "Mixed", broker.TimerTopic, "Mixed", "Mixed"}, topics)
	past := parkedMessage(t, b, res[4].MsgID)
	_, ok := past.Properties.Get(message.PropTimerDeliverMS)
	assert.False(t, ok, "a past delivery time is stored at once, without the property")
	waitCount(t, b, "Mixed", 4)
	st := b.Status()
	assert.Equal(t, int64(1), st.DelayPending[2])
	assert.Equal(t, int64(1), st.TimerPending)

	clock.Advance(7 * time.Second)
	waitCount(t, b, "Mixed", 5)
	clock.Advance(3 * time.Second)
	waitCount(t, b, "Mixed", 6)
	assert.ElementsMatch(t, []string{"normal-1", "level-3", "zero", "timer-7s", "past", "normal-2"}, bodies(delivered(t, b, "Mixed")))
	// A delivered message is readable as soon as it is dispatched; the
	// scheduler and the timer count it delivered once their put returns.
	assert.Eventually(t, func() bool {
		st := b.Status()
		return st.DelayPending[2] == 0 && st.TimerPending == 0
	}, 5*time.Second, time.Millisecond, "nothing pending once delivered: %+v", b.Status())
}

// SendRecords takes the message path only when a record is delayed.
func TestSendRecordsDelayed(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, delayConfig(t, clock))
	createTopic(t, b, "Recs", 2)
	rec := func(qid int32, body string, props ...string) []byte {
		return encodeRecord(t, delayedMsg("Recs", qid, body, props...), "U-"+body, false)
	}
	plain := append(rec(0, "a"), rec(-1, "b", message.PropDelay, "0")...)
	res, err := b.SendRecords(t.Context(), "Recs", [][]byte{plain})
	require.NoError(t, err)
	assert.Equal(t, "Recs", parkedMessage(t, b, res[1].MsgID).Topic, "DELAY 0 is not delayed")

	chunk := append(rec(1, "c", message.PropDelay, "1"), rec(-1, "d")...)
	res, err = b.SendRecords(t.Context(), "Recs", [][]byte{chunk, rec(0, "e", message.PropTimerDelaySec, "2")})
	require.NoError(t, err)
	require.Len(t, res, 3)
	c, d, e := parkedMessage(t, b, res[0].MsgID), parkedMessage(t, b, res[1].MsgID), parkedMessage(t, b, res[2].MsgID)
	assert.Equal(t, []string{broker.ScheduleTopic, "Recs", broker.TimerTopic}, []string{c.Topic, d.Topic, e.Topic})
	assert.Equal(t, []string{"U-c", "U-d", "U-e"}, []string{res[0].UniqKey, res[1].UniqKey, res[2].UniqKey})
	require.NoError(t, message.Check(mustRecord(t, b, res[0].PhysicalOffset), res[0].PhysicalOffset, true))
	waitCount(t, b, "Recs", 3)
	clock.Advance(2 * time.Second)
	waitCount(t, b, "Recs", 5)
	got := delivered(t, b, "Recs")
	assert.ElementsMatch(t, []string{"a", "b", "c", "d", "e"}, bodies(got))
	for _, m := range got {
		assert.Equal(t, "U-"+string(m.Body), m.UniqKey())
		if string(m.Body) == "c" {
			assert.Equal(t, int32(1), m.QueueID)
		}
	}

	_, err = b.SendRecords(t.Context(), "Recs", [][]byte{rec(0, "ok"), rec(0, "bad", message.PropDelay, "soon")})
	require.ErrorIs(t, err, broker.ErrInvalidMessage)
	assert.ErrorContains(t, err, `record 1: broker: invalid message: DELAY "soon"`)
	assert.Equal(t, int64(5), topicCount(b, "Recs"), "nothing of a refused batch is stored")
}

func TestDelayInvalid(t *testing.T) {
	clock := newFakeClock()
	cfg := delayConfig(t, clock)
	cfg.TimerMaxDelay = time.Hour
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)
	far := strconv.FormatInt(clock.Now().Add(time.Hour+time.Second).UnixMilli(), 10)
	tests := []struct {
		name  string
		props []string
		want  string
	}{
		{"level not a number", []string{message.PropDelay, "abc"}, `DELAY "abc": want a delay level 0..18`},
		{"negative level", []string{message.PropDelay, "-1"}, `DELAY "-1"`},
		{"deliver time not a number", []string{message.PropTimerDeliverMS, "tomorrow"}, `TIMER_DELIVER_MS "tomorrow": want a unix time in milliseconds`},
		{"delay seconds not whole", []string{message.PropTimerDelaySec, "1.5"}, `TIMER_DELAY_SEC "1.5": want whole seconds`},
		{"deliver time beyond max", []string{message.PropTimerDeliverMS, far}, "beyond timerMaxDelay (1h0m0s)"},
		{"delay seconds beyond max", []string{message.PropTimerDelaySec, "3601"}, "TIMER_DELAY_SEC 3601: beyond timerMaxDelay (1h0m0s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.Send(t.Context(), "T", []*message.Message{delayedMsg("T", 0, "x"), delayedMsg("T", 0, "y", tt.props...)})
			require.ErrorIs(t, err, broker.ErrInvalidMessage)
			assert.ErrorContains(t, err, "message 1: ")
			assert.ErrorContains(t, err, tt.want)
		})
	}
	assert.Zero(t, topicCount(b, "T"))
	_, maxOff := b.Store().QueueOffsets(broker.TimerTopic, 0)
	assert.Zero(t, maxOff)

	// Within the limits: the edge of timerMaxDelay, a level above the last.
	res := send(t, b, delayedMsg("T", 0, "edge", message.PropTimerDelaySec, "3600"),
		delayedMsg("T", 0, "high", message.PropDelay, "99"))
	assert.Equal(t, broker.TimerTopic, parkedMessage(t, b, res[0].MsgID).Topic)
	high := parkedMessage(t, b, res[1].MsgID)
	assert.Equal(t, int32(17), high.QueueID, "DELAY 99 clamps to level 18")
	level, _ := high.Properties.Get(message.PropDelay)
	assert.Equal(t, "18", level)
	// DELAY wins over the timer properties, which the parked copy drops.
	res = send(t, b, delayedMsg("T", 0, "both", message.PropDelay, "1", message.PropTimerDelaySec, "600"))
	both := parkedMessage(t, b, res[0].MsgID)
	assert.Equal(t, broker.ScheduleTopic, both.Topic)
	_, ok := both.Properties.Get(message.PropTimerDelaySec)
	assert.False(t, ok)
	clock.Advance(time.Second)
	waitCount(t, b, "T", 1)
}

// Users cannot send to the parking topics; they are not listed, but can be
// read.
func TestParkingTopicsReserved(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, delayConfig(t, clock))
	for _, name := range []string{broker.ScheduleTopic, broker.TimerTopic} {
		assert.True(t, broker.IsReservedTopic(name))
		_, err := b.Send(t.Context(), name, []*message.Message{delayedMsg(name, 0, "x")})
		require.ErrorIs(t, err, broker.ErrReservedTopic, name)
		_, err = b.SendRecords(t.Context(), name, [][]byte{encodeRecord(t, delayedMsg(name, 0, "x"), "U", false)})
		require.ErrorIs(t, err, broker.ErrReservedTopic, name)
		require.ErrorIs(t, b.CreateOrUpdateTopic(metadata.TopicConfig{TopicName: name, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}), broker.ErrReservedTopic)
		require.ErrorIs(t, b.DeleteTopic(name), broker.ErrReservedTopic)
		tc, ok := b.Topic(name)
		require.True(t, ok, "%s exists from Open", name)
		assert.Equal(t, int32(metadata.PermRead), tc.Perm, "read-only")
		_, err = b.PutInternal(t.Context(), []*message.Message{delayedMsg(name, 0, "x")})
		require.ErrorIs(t, err, broker.ErrReservedTopic, "putInternal refuses the parking topics")
	}
	sc, _ := b.Topic(broker.ScheduleTopic)
	assert.Equal(t, int32(18), sc.WriteQueueNums)
	assert.Empty(t, b.Topics(), "parking topics are not listed (nor registered)")
	assert.Zero(t, b.Status().Topics)

	createTopic(t, b, "T", 1)
	send(t, b, delayedMsg("T", 0, "parked", message.PropDelay, "5"))
	waitVisible(t, b, broker.ScheduleTopic, 4, 1)
	_, got := pull(t, b, broker.PullRequest{Topic: broker.ScheduleTopic, QueueID: 4})
	assert.Equal(t, []string{"parked"}, bodies(got), "readable, for inspection")
}

// putInternal stores the broker's own messages: a group's retry and DLQ
// topics are created on first use, DELAY parks.
func TestPutInternal(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, delayConfig(t, clock))
	createTopic(t, b, "Orders", 2)
	retry, dlq := broker.RetryTopic("G"), broker.DLQTopic("G")
	res, err := b.PutInternal(t.Context(), []*message.Message{
		delayedMsg(retry, broker.BrokerPicksQueue, "retry", message.PropDelay, "3", message.PropRetryTopic, "Orders"),
		delayedMsg(dlq, 0, "dead"),
		delayedMsg("Orders", 1, "plain"),
	})
	require.NoError(t, err)
	require.Len(t, res, 3)
	for _, name := range []string{retry, dlq} {
		tc, ok := b.Topic(name)
		require.True(t, ok, name)
		assert.Equal(t, []int32{1, 1, metadata.PermRead | metadata.PermWrite}, []int32{tc.ReadQueueNums, tc.WriteQueueNums, tc.Perm}, name)
	}
	assert.Equal(t, broker.ScheduleTopic, parkedMessage(t, b, res[0].MsgID).Topic)
	waitCount(t, b, dlq, 1)
	waitCount(t, b, "Orders", 1)
	clock.Advance(10 * time.Second)
	waitCount(t, b, retry, 1)
	got := delivered(t, b, retry)
	assert.Equal(t, "Orders", func() string { v, _ := got[0].Properties.Get(message.PropRetryTopic); return v }())

	tests := []struct {
		name    string
		msg     *message.Message
		wantErr error
	}{
		{"missing topic", delayedMsg("Nope", 0, "x"), broker.ErrTopicNotFound},
		{"bad name", delayedMsg("a.b", 0, "x"), broker.ErrInvalidTopic},
		{"empty body", delayedMsg(retry, 0, ""), broker.ErrInvalidMessage},
		{"queue out of range", delayedMsg(dlq, 1, "x"), broker.ErrInvalidMessage},
		{"bad delay", delayedMsg(retry, 0, "x", message.PropDelay, "x"), broker.ErrInvalidMessage},
		{"nil", nil, broker.ErrInvalidMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.PutInternal(t.Context(), []*message.Message{tt.msg})
			require.ErrorIs(t, err, tt.wantErr)
		})
	}
	_, err = b.PutInternal(t.Context(), nil)
	require.ErrorIs(t, err, broker.ErrInvalidMessage)
}

// Delivered offsets are saved (delayOffset.json at Close): a re-opened
// broker goes on where it stopped, without delivering anything twice.
func TestDelayProgressPersisted(t *testing.T) {
	clock := newFakeClock()
	cfg := delayConfig(t, clock)
	b := openBroker(t, cfg)
	createTopic(t, b, "P", 1)
	for i := range 10 {
		if i > 0 {
			clock.Advance(time.Second)
		}
		send(t, b, delayedMsg("P", 0, fmt.Sprint("level-", i), message.PropDelay, "2")) // 5 s
	}
	// Parked at t0..t0+9s; at t0+9s those parked up to t0+4s are due.
	waitCount(t, b, "P", 5)
	closeBroker(t, b)
	data, err := os.ReadFile(filepath.Join(cfg.StorePathRootDir, "config", metadata.DelayOffsetsFile))
	require.NoError(t, err)
	assert.Contains(t, strings.Join(strings.Fields(string(data)), ""), `"2":5`)

	b = openBroker(t, cfg)
	stillCount(t, b, "P", 5)
	assert.Equal(t, int64(5), b.Status().DelayPending[1])
	clock.Advance(10 * time.Second)
	waitCount(t, b, "P", 10)
	stillCount(t, b, "P", 10)
	var got []string
	for _, m := range delivered(t, b, "P") {
		got = append(got, string(m.Body))
	}
	assert.Len(t, slices.Compact(slices.Sorted(slices.Values(got))), 10, "each once")
}

// A configured level list: a DELAY above the last level means the last;
// a shorter list later keeps the extra queues delivering, with the last
// level's delay.
func TestMessageDelayLevelConfig(t *testing.T) {
	clock := newFakeClock()
	cfg := delayConfig(t, clock)
	cfg.MessageDelayLevel = []time.Duration{2 * time.Second, time.Second, 3 * time.Second}
	b := openBroker(t, cfg)
	createTopic(t, b, "C", 1)
	sc, _ := b.Topic(broker.ScheduleTopic)
	assert.Equal(t, int32(3), sc.WriteQueueNums)
	res := send(t, b, delayedMsg("C", 0, "three", message.PropDelay, "18"), delayedMsg("C", 0, "two", message.PropDelay, "2"))
	assert.Equal(t, []int32{2, 1}, []int32{res[0].QueueID, res[1].QueueID})
	closeBroker(t, b)

	cfg.MessageDelayLevel = []time.Duration{5 * time.Second}
	b = openBroker(t, cfg)
	sc, _ = b.Topic(broker.ScheduleTopic)
	assert.Equal(t, int32(3), sc.WriteQueueNums, "queues of an earlier, longer list stay")
	assert.Len(t, b.Status().DelayPending, 3)
	clock.Advance(4 * time.Second)
	stillCount(t, b, "C", 0)
	clock.Advance(time.Second)
	waitCount(t, b, "C", 2)
}
