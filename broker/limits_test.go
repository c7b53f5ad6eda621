package broker_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/message"
)

// limitsTopic creates topic with queues queues and the attributes attrs
// ("key", "value", ...).
func limitsTopic(t *testing.T, b *broker.Broker, topic string, queues int32, attrs ...string) {
	t.Helper()
	a := map[string]string{}
	for i := 0; i+1 < len(attrs); i += 2 {
		a[attrs[i]] = attrs[i+1]
	}
	require.NoError(t, b.CreateOrUpdateTopic(metadata.TopicConfig{TopicName: topic, ReadQueueNums: queues, WriteQueueNums: queues,
		Perm: metadata.PermRead | metadata.PermWrite, Attributes: a}))
}

// bornMsg is newMsg born at the clock's time, with properties ("key",
// "value", ...).
func bornMsg(clock *fakeClock, topic string, queueID int32, body string, props ...string) *message.Message {
	m := newMsg(topic, queueID, body, "")
	m.BornTimestamp = clock.Now().UnixMilli()
	for i := 0; i+1 < len(props); i += 2 {
		m.Properties = append(m.Properties, message.Property{Key: props[i], Value: props[i+1]})
	}
	return m
}

// sendN sends n messages to queue id of topic, one send each, named
// prefix0, prefix1...
func sendN(t *testing.T, b *broker.Broker, clock *fakeClock, topic string, id int32, n int, prefix string, props ...string) {
	t.Helper()
	for i := range n {
		send(t, b, bornMsg(clock, topic, id, prefix+strconv.Itoa(i), props...))
	}
}

// queueStatus returns one queue's status.
func queueStatus(t *testing.T, b *broker.Broker, topic string, id int32) broker.QueueStatus {
	t.Helper()
	qs, err := b.TopicStatus(topic)
	require.NoError(t, err)
	return qs[id]
}

// limitsConfig is testConfig on clock.
func limitsConfig(t *testing.T, clock *fakeClock) broker.Config {
	cfg := testConfig(t)
	cfg.Now = clock.Now
	return cfg
}

// The attributes of retention.*, queue.max.* and ttl.* are checked when
// a topic is created or updated: a bad one is refused with an error
// naming it, and nothing changes; other attributes are left alone.
func TestLimitAttributesChecked(t *testing.T) {
	b := openBroker(t, testConfig(t))
	for _, tc := range []struct {
		name  string
		attrs []string
		key   string // named in the error; "" when accepted
	}{
		{"all set", []string{"retention.hours", "2", "queue.max.backlog", "10", "queue.max.policy", "refuse", "ttl.default.ms", "60000"}, ""},
		{"retention in ms", []string{"retention.ms", "1500"}, ""},
		{"drop-oldest", []string{"queue.max.backlog", "1", "queue.max.policy", "drop-oldest"}, ""},
		{"another component's key", []string{"priority.lanes", "high,low", "message.type", "NORMAL"}, ""},
		{"hours not a number", []string{"retention.hours", "two"}, "retention.hours"},
		{"hours zero", []string{"retention.hours", "0"}, "retention.hours"},
		{"hours fractional", []string{"retention.hours", "1.5"}, "retention.hours"},
		{"ms negative", []string{"retention.ms", "-5"}, "retention.ms"},
		{"both retention keys", []string{"retention.ms", "5", "retention.hours", "1"}, "retention.ms"},
		{"backlog zero", []string{"queue.max.backlog", "0"}, "queue.max.backlog"},
		{"backlog huge", []string{"queue.max.backlog", "99999999999999999999"}, "queue.max.backlog"},
		{"unknown policy", []string{"queue.max.backlog", "5", "queue.max.policy", "block"}, "queue.max.policy"},
		{"policy without a limit", []string{"queue.max.policy", "refuse"}, "queue.max.policy"},
		{"ttl empty", []string{"ttl.default.ms", ""}, "ttl.default.ms"},
		{"ttl beyond 100 years", []string{"ttl.default.ms", "3153600000001"}, "ttl.default.ms"},
		{"unknown key", []string{"ttl.max.ms", "5"}, "ttl.max.ms"},
		{"unknown retention key", []string{"retention.bytes", "5"}, "retention.bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := map[string]string{}
			for i := 0; i+1 < len(tc.attrs); i += 2 {
				a[tc.attrs[i]] = tc.attrs[i+1]
			}
			err := b.CreateOrUpdateTopic(metadata.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1,
				Perm: metadata.PermRead | metadata.PermWrite, Attributes: a})
			if tc.key == "" {
				require.NoError(t, err)
				got, _ := b.Topic("T")
				assert.Equal(t, a, got.Attributes)
				return
			}
			require.ErrorIs(t, err, broker.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.key+"=")
			assert.Contains(t, err.Error(), `topic "T"`)
		})
	}
}

// A drop-oldest queue keeps its backlog at the limit: the oldest
// messages no group consumed are dropped and counted; those every group
// consumed are not counted.
func TestBacklogDropOldest(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, limitsConfig(t, clock))
	limitsTopic(t, b, "Telemetry", 2, broker.AttrMaxBacklog, "10")
	sendN(t, b, clock, "Telemetry", 0, 15, "m")
	sendN(t, b, clock, "Telemetry", 1, 4, "n")
	waitVisible(t, b, "Telemetry", 0, 15)
	waitVisible(t, b, "Telemetry", 1, 4)

	res, got := pull(t, b, broker.PullRequest{Topic: "Telemetry", QueueID: 0, Offset: 0})
	assert.Equal(t, broker.PullOffsetTooSmall, res.Status)
	assert.Equal(t, int64(5), res.NextOffset, "the 5 oldest were dropped")
	assert.Empty(t, got)
	_, got = pull(t, b, broker.PullRequest{Topic: "Telemetry", QueueID: 0, Offset: 5})
	assert.Equal(t, []string{"m5", "m6", "m7", "m8", "m9", "m10", "m11", "m12", "m13", "m14"}, bodies(got))

	qs := queueStatus(t, b, "Telemetry", 0)
	assert.Equal(t, broker.QueueStatus{QueueID: 0, MinOffset: 5, MaxOffset: 15, LastStoreTimestamp: qs.LastStoreTimestamp,
		Backlog: 10, Dropped: 5}, qs)
	assert.Equal(t, int64(4), queueStatus(t, b, "Telemetry", 1).Backlog, "the other queue is under its limit")

	// A group consumed up to 12: the backlog is what it has not.
	require.NoError(t, b.CommitOffset("G", "Telemetry", 0, 12))
	assert.Equal(t, int64(3), queueStatus(t, b, "Telemetry", 0).Backlog)
	sendN(t, b, clock, "Telemetry", 0, 9, "p") // 24 in all: 12 not consumed
	waitVisible(t, b, "Telemetry", 0, 24)
	qs = queueStatus(t, b, "Telemetry", 0)
	assert.Equal(t, int64(14), qs.MinOffset)
	assert.Equal(t, int64(10), qs.Backlog)
	assert.Equal(t, int64(5+2), qs.Dropped, "12 and 13 were dropped before G consumed them; 5..11 were consumed")

	lim, err := b.TopicLimits("Telemetry")
	require.NoError(t, err)
	assert.Equal(t, broker.TopicLimits{MaxBacklog: 10, BacklogPolicy: broker.PolicyDropOldest, Dropped: 7}, lim)
	assert.Equal(t, []broker.TopicLimitCounts{{Topic: "Telemetry", Dropped: 7}}, b.LimitCounts())
}

// A refusing queue refuses a send that would pass its limit with a
// definite error naming the queue and the limit; consuming makes room.
// Other queues and topics are not affected.
func TestBacklogRefuse(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, limitsConfig(t, clock))
	limitsTopic(t, b, "Commands", 2, broker.AttrMaxBacklog, "3", broker.AttrBacklogPolicy, broker.PolicyRefuse)
	sendN(t, b, clock, "Commands", 0, 3, "c")

	_, err := b.Send(t.Context(), "Commands", []*message.Message{bornMsg(clock, "Commands", 0, "over")})
	require.ErrorIs(t, err, broker.ErrBacklogFull)
	assert.False(t, broker.IsIndeterminate(err))
	var full *broker.BacklogFullError
	require.ErrorAs(t, err, &full)
	assert.Equal(t, broker.BacklogFullError{Topic: "Commands", QueueID: 0, Backlog: 3, Adding: 1, Limit: 3}, *full)
	assert.Contains(t, err.Error(), "queue.max.backlog=3")

	// A batch is refused whole, also as records.
	_, err = b.Send(t.Context(), "Commands", []*message.Message{bornMsg(clock, "Commands", 1, "a"), bornMsg(clock, "Commands", 0, "b")})
	require.ErrorIs(t, err, broker.ErrBacklogFull)
	rec, err := message.AppendUnsealed(nil, bornMsg(clock, "Commands", 0, "rec"), "UNIQ1")
	require.NoError(t, err)
	_, err = b.SendRecords(t.Context(), "Commands", [][]byte{rec})
	require.ErrorIs(t, err, broker.ErrBacklogFull)
	_, maxOff := b.Store().QueueOffsets("Commands", 1)
	assert.Zero(t, maxOff, "nothing of the refused batch was stored")
	sendN(t, b, clock, "Commands", 1, 3, "other queue")

	require.NoError(t, b.CommitOffset("G", "Commands", 0, 2))
	sendN(t, b, clock, "Commands", 0, 2, "room")
	_, err = b.Send(t.Context(), "Commands", []*message.Message{bornMsg(clock, "Commands", 0, "over")})
	require.ErrorIs(t, err, broker.ErrBacklogFull)
	waitVisible(t, b, "Commands", 0, 5)
	qs := queueStatus(t, b, "Commands", 0)
	assert.Equal(t, int64(5), qs.MaxOffset)
	assert.Equal(t, int64(3), qs.Backlog)
	assert.Zero(t, qs.Dropped)
	assert.Equal(t, int64(0), qs.MinOffset, "a refusing queue drops nothing")

	lim, err := b.TopicLimits("Commands")
	require.NoError(t, err)
	assert.Equal(t, broker.PolicyRefuse, lim.BacklogPolicy)
}

// Concurrent sends to a refusing queue store exactly its limit.
func TestBacklogRefuseConcurrent(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, limitsConfig(t, clock))
	limitsTopic(t, b, "Commands", 1, broker.AttrMaxBacklog, "40", broker.AttrBacklogPolicy, broker.PolicyRefuse)
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored, refused := 0, 0
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				_, err := b.Send(t.Context(), "Commands", []*message.Message{bornMsg(clock, "Commands", 0, strconv.Itoa(g*10+i))})
				mu.Lock()
				switch {
				case err == nil:
					stored++
				case errors.Is(err, broker.ErrBacklogFull):
					refused++
				default:
					t.Errorf("send: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 40, stored)
	assert.Equal(t, 40, refused)
	waitVisible(t, b, "Commands", 0, 40)
	_, maxOff := b.Store().QueueOffsets("Commands", 0)
	assert.Equal(t, int64(40), maxOff)
}

// A topic's retention hides its messages once they are older than it:
// a pull skips them at once, the sweep moves the queue's start past them.
func TestRetentionPerTopic(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, limitsConfig(t, clock))
	limitsTopic(t, b, "Short", 1, broker.AttrRetentionMs, "60000")
	createTopic(t, b, "Plain", 1)
	sendN(t, b, clock, "Short", 0, 3, "old")
	sendN(t, b, clock, "Plain", 0, 3, "plain")
	clock.Advance(30 * time.Second)
	sendN(t, b, clock, "Short", 0, 2, "new")
	waitVisible(t, b, "Short", 0, 5)
	clock.Advance(31 * time.Second)

	_, got := pull(t, b, broker.PullRequest{Topic: "Short", QueueID: 0, Offset: 0})
	assert.Equal(t, []string{"new0", "new1"}, bodies(got))
	_, got = pull(t, b, broker.PullRequest{Topic: "Plain", QueueID: 0, Offset: 0})
	assert.Len(t, got, 3, "other topics keep the broker's retention")

	b.SweepLimits()
	res, _ := pull(t, b, broker.PullRequest{Topic: "Short", QueueID: 0, Offset: 0})
	assert.Equal(t, broker.PullOffsetTooSmall, res.Status)
	assert.Equal(t, int64(3), res.NextOffset)
	qs := queueStatus(t, b, "Short", 0)
	assert.Equal(t, int64(3), qs.MinOffset)
	assert.Zero(t, qs.Expired, "aged out is not expired")

	clock.Advance(30 * time.Second)
	b.SweepLimits()
	assert.Equal(t, int64(5), queueStatus(t, b, "Short", 0).MinOffset)
	lim, err := b.TopicLimits("Short")
	require.NoError(t, err)
	assert.Equal(t, time.Minute, lim.Retention)
}

// A producer's TTL_MS expires its message: pulls never return it, and it
// is counted once however often it is skipped. Messages without one, or
// with a longer one, are delivered.
func TestProducerTTL(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, limitsConfig(t, clock))
	createTopic(t, b, "Alarms", 1)
	send(t, b,
		bornMsg(clock, "Alarms", 0, "short1", broker.PropTTL, "1000"),
		bornMsg(clock, "Alarms", 0, "forever"),
		bornMsg(clock, "Alarms", 0, "long", broker.PropTTL, "60000"),
		bornMsg(clock, "Alarms", 0, "short2", broker.PropTTL, "1500"))
	waitVisible(t, b, "Alarms", 0, 4)
	_, got := pull(t, b, broker.PullRequest{Topic: "Alarms", QueueID: 0, Offset: 0})
	assert.Len(t, got, 4, "none expired yet")

	clock.Advance(1500 * time.Millisecond) // expiry is inclusive: short2 too
	for range 2 {
		res, got := pull(t, b, broker.PullRequest{Topic: "Alarms", QueueID: 0, Offset: 0})
		assert.Equal(t, []string{"forever", "long"}, bodies(got))
		assert.Equal(t, int64(4), res.NextOffset)
	}
	res, got := pull(t, b, broker.PullRequest{Topic: "Alarms", QueueID: 0, Offset: 3})
	assert.Equal(t, broker.PullNoMatchedMessage, res.Status, "only an expired message read")
	assert.Equal(t, int64(4), res.NextOffset)
	assert.Empty(t, got)
	assert.Equal(t, int64(2), queueStatus(t, b, "Alarms", 0).Expired)
	assert.Equal(t, []broker.TopicLimitCounts{{Topic: "Alarms", Expired: 2}}, b.LimitCounts())

	clock.Advance(time.Minute)
	_, got = pull(t, b, broker.PullRequest{Topic: "Alarms", QueueID: 0, Offset: 0})
	assert.Equal(t, []string{"forever"}, bodies(got))
	assert.Equal(t, int64(3), queueStatus(t, b, "Alarms", 0).Expired)
}

// A bad TTL_MS is refused with an error naming it, as a message and as a
// record.
func TestProducerTTLChecked(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, limitsConfig(t, clock))
	createTopic(t, b, "Alarms", 1)
	for _, v := range []string{"", "0", "-1", "1s", "3153600000001", "1e3"} {
		_, err := b.Send(t.Context(), "Alarms", []*message.Message{bornMsg(clock, "Alarms", 0, "x", broker.PropTTL, v)})
		require.ErrorIs(t, err, broker.ErrInvalidMessage, "%q", v)
		assert.Contains(t, err.Error(), "TTL_MS=")
		rec, err := message.AppendUnsealed(nil, bornMsg(clock, "Alarms", 0, "x", broker.PropTTL, v), "UNIQ")
		require.NoError(t, err)
		_, err = b.SendRecords(t.Context(), "Alarms", [][]byte{rec})
		require.ErrorIs(t, err, broker.ErrInvalidMessage, "%q", v)
		assert.Contains(t, err.Error(), "TTL_MS=")
	}
}

// A topic's ttl.default.ms expires its messages without TTL_MS (one with
// TTL_MS keeps its own); the sweep moves the queue's start past the
// expired ones at its front and counts those no pull counted.
func TestTopicDefaultTTL(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, limitsConfig(t, clock))
	limitsTopic(t, b, "Telemetry", 1, broker.AttrDefaultTTL, "5000")
	sendN(t, b, clock, "Telemetry", 0, 3, "a")
	send(t, b, bornMsg(clock, "Telemetry", 0, "own", broker.PropTTL, "20000"))
	sendN(t, b, clock, "Telemetry", 0, 2, "b")
	waitVisible(t, b, "Telemetry", 0, 6)
	clock.Advance(5 * time.Second)

	_, got := pull(t, b, broker.PullRequest{Topic: "Telemetry", QueueID: 0, Offset: 0, MaxMsgs: 1})
	assert.Empty(t, got)
	assert.Equal(t, int64(1), queueStatus(t, b, "Telemetry", 0).Expired, "counted by the pull")
	b.SweepLimits()
	qs := queueStatus(t, b, "Telemetry", 0)
	assert.Equal(t, int64(3), qs.MinOffset, "the start stops at the unexpired message")
	assert.Equal(t, int64(3), qs.Expired, "the sweep counted the two no pull read")
	_, got = pull(t, b, broker.PullRequest{Topic: "Telemetry", QueueID: 0, Offset: 3})
	assert.Equal(t, []string{"own"}, bodies(got))
	assert.Equal(t, int64(5), queueStatus(t, b, "Telemetry", 0).Expired)

	clock.Advance(15 * time.Second)
	b.SweepLimits()
	qs = queueStatus(t, b, "Telemetry", 0)
	assert.Equal(t, int64(6), qs.MinOffset)
	assert.Equal(t, int64(6), qs.Expired)
	lim, err := b.TopicLimits("Telemetry")
	require.NoError(t, err)
	assert.Equal(t, broker.TopicLimits{DefaultTTL: 5 * time.Second, Expired: 6}, lim)
}

// The sweep does not count as expired the messages every group consumed.
func TestExpiredConsumedNotCounted(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, limitsConfig(t, clock))
	limitsTopic(t, b, "Telemetry", 1, broker.AttrDefaultTTL, "1000")
	sendN(t, b, clock, "Telemetry", 0, 4, "a")
	waitVisible(t, b, "Telemetry", 0, 4)
	require.NoError(t, b.CommitOffset("G", "Telemetry", 0, 3))
	clock.Advance(time.Second)
	b.SweepLimits()
	qs := queueStatus(t, b, "Telemetry", 0)
	assert.Equal(t, int64(4), qs.MinOffset)
	assert.Equal(t, int64(1), qs.Expired)
}

// An expired message is not retried: a retry keeps its TTL (its own, or
// its original topic's default) counted from the first send, so once it
// has passed the retry is never delivered.
func TestExpiredNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs []string
		props []string
	}{
		{"producer TTL", nil, []string{broker.PropTTL, "20000"}},
		{"topic default TTL", []string{broker.AttrDefaultTTL, "20000"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			b := openBroker(t, delayConfig(t, clock))
			limitsTopic(t, b, "Orders", 1, tc.attrs...)
			res := send(t, b, bornMsg(clock, "Orders", 0, "order", tc.props...))
			retry := broker.RetryTopic("G")

			sendBack := func(phys int64) {
				t.Helper()
				_, err := b.SendBack(t.Context(), broker.SendBackRequest{Group: "G", PhysicalOffset: phys, DelayLevel: 3}) // 10 s
				require.NoError(t, err)
			}
			sendBack(res[0].PhysicalOffset)
			clock.Advance(10 * time.Second)
			waitCount(t, b, retry, 1)
			r, got := pull(t, b, broker.PullRequest{Group: "G", Topic: retry, QueueID: 0, Offset: 0})
			require.Equal(t, []string{"order"}, bodies(got), "retried within its TTL")
			assert.Equal(t, int64(1), r.NextOffset)

			sendBack(got[0].PhysicalOffset)
			clock.Advance(10 * time.Second) // 20 s after the send: expired
			waitCount(t, b, retry, 2)
			_, got = pull(t, b, broker.PullRequest{Group: "G", Topic: retry, QueueID: 0, Offset: 1})
			assert.Empty(t, got, "an expired message is not retried")
			assert.Equal(t, int64(1), queueStatus(t, b, retry, 0).Expired)
		})
	}
}

// limitsScenario drives a broker through every limit: a drop-oldest
// queue over its limit, a refusing queue at its limit, producer TTLs
// expired and counted, a topic whose retention passed.
func limitsScenario(t *testing.T, b *broker.Broker, clock *fakeClock) {
	t.Helper()
	limitsTopic(t, b, "Drop", 1, broker.AttrMaxBacklog, "10")
	limitsTopic(t, b, "Refuse", 1, broker.AttrMaxBacklog, "3", broker.AttrBacklogPolicy, broker.PolicyRefuse)
	limitsTopic(t, b, "Short", 1, broker.AttrRetentionMs, "60000", broker.AttrDefaultTTL, "30000")
	createTopic(t, b, "Alarms", 1)
	sendN(t, b, clock, "Drop", 0, 15, "d")
	sendN(t, b, clock, "Refuse", 0, 3, "r")
	sendN(t, b, clock, "Alarms", 0, 2, "a", broker.PropTTL, "1000")
	sendN(t, b, clock, "Alarms", 0, 1, "keep")
	sendN(t, b, clock, "Short", 0, 2, "s")
	for topic, n := range map[string]int64{"Drop": 15, "Refuse": 3, "Alarms": 3, "Short": 2} {
		waitVisible(t, b, topic, 0, n)
	}
	clock.Advance(2 * time.Second)
	_, got := pull(t, b, broker.PullRequest{Topic: "Alarms", QueueID: 0, Offset: 0})
	require.Equal(t, []string{"keep0"}, bodies(got))
	clock.Advance(time.Minute)
	assert.Equal(t, int64(5), queueStatus(t, b, "Drop", 0).Dropped)
}

// checkLimitsScenario checks what limitsScenario left, after a restart.
func checkLimitsScenario(t *testing.T, b *broker.Broker, clock *fakeClock) {
	t.Helper()
	qs := queueStatus(t, b, "Drop", 0)
	assert.Equal(t, []int64{5, 15, 10, 5}, []int64{qs.MinOffset, qs.MaxOffset, qs.Backlog, qs.Dropped}, "Drop: min, max, backlog, dropped")
	res, _ := pull(t, b, broker.PullRequest{Topic: "Drop", QueueID: 0, Offset: 0})
	assert.Equal(t, broker.PullOffsetTooSmall, res.Status)

	_, err := b.Send(t.Context(), "Refuse", []*message.Message{bornMsg(clock, "Refuse", 0, "over")})
	require.ErrorIs(t, err, broker.ErrBacklogFull, "a full refusing queue stays full")

	_, got := pull(t, b, broker.PullRequest{Topic: "Alarms", QueueID: 0, Offset: 0})
	assert.Equal(t, []string{"keep0"}, bodies(got), "expired messages stay expired")
	assert.Equal(t, int64(2), queueStatus(t, b, "Alarms", 0).Expired, "and are not counted again")

	_, got = pull(t, b, broker.PullRequest{Topic: "Short", QueueID: 0, Offset: 0})
	assert.Empty(t, got, "aged out")
	b.SweepLimits()
	assert.Equal(t, int64(2), queueStatus(t, b, "Short", 0).MinOffset)
	assert.Equal(t, []broker.TopicLimitCounts{{Topic: "Alarms", Expired: 2}, {Topic: "Drop", Dropped: 5}}, b.LimitCounts(),
		"Short's messages aged out (retention) before a sweep found them expired: not counted")
}

// Limits, TTLs and counts hold through a clean restart.
func TestLimitsThroughRestart(t *testing.T) {
	clock := newFakeClock()
	cfg := limitsConfig(t, clock)
	b := openBroker(t, cfg)
	limitsScenario(t, b, clock)
	closeBroker(t, b)
	checkLimitsScenario(t, openBroker(t, cfg), clock)
}

// limitsKillEnv makes TestLimitsThroughKill's child run limitsScenario
// in the directory it names and kill itself; "saved" in
// limitsKillSavedEnv makes it sweep (save the state) first.
const (
	limitsKillEnv      = "GANTRY_LIMITS_KILL_DIR"
	limitsKillSavedEnv = "GANTRY_LIMITS_KILL_SAVED"
)

// Limits, TTLs and counts hold through a kill -9: the state saved last,
// and what the lost changes did, counted again once.
func TestLimitsThroughKill(t *testing.T) {
	if dir := os.Getenv(limitsKillEnv); dir != "" {
		clock := newFakeClock()
		cfg := limitsConfig(t, clock)
		cfg.StorePathRootDir = dir
		b, err := broker.Open(t.Context(), cfg)
		require.NoError(t, err)
		limitsScenario(t, b, clock)
		if os.Getenv(limitsKillSavedEnv) != "" {
			b.SweepLimits()
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	for _, saved := range []string{"", "saved"} {
		t.Run("saved="+strconv.FormatBool(saved != ""), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			cmd := exec.Command(os.Args[0], "-test.run=^TestLimitsThroughKill$", "-test.count=1")
			cmd.Env = append(os.Environ(), limitsKillEnv+"="+dir, limitsKillSavedEnv+"="+saved)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "the child was not killed: %v\n%s", err, out)
			ws := ee.Sys().(syscall.WaitStatus)
			require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "status %v\n%s", ws, out)

			clock := newFakeClock()
			clock.Advance(time.Minute + 2*time.Second) // the child's clock when it died
			cfg := limitsConfig(t, clock)
			cfg.StorePathRootDir = dir
			checkLimitsScenario(t, openBroker(t, cfg), clock)
		})
	}
}

// A topic kept longer than fileReservedTime pins the commit log from its
// oldest readable message until its own retention has passed.
func TestLongRetentionPinsLog(t *testing.T) {
	clock := newFakeClock()
	cfg := limitsConfig(t, clock)
	cfg.FileReservedTime = time.Hour
	cfg.DeleteWhen = "0;1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18;19;20;21;22;23"
	b := openBroker(t, cfg)
	limitsTopic(t, b, "Long", 1, broker.AttrRetentionHours, "2")
	createTopic(t, b, "Plain", 1)
	send(t, b, bornMsg(clock, "Long", 0, "keep me"))
	body := strings.Repeat("x", 1000)
	for i := range 300 { // about five 64 KiB segments
		send(t, b, bornMsg(clock, "Plain", 0, body+strconv.Itoa(i)))
	}
	waitVisible(t, b, "Plain", 0, 300)

	clock.Advance(90 * time.Minute)
	b.SweepLimits()
	cr, err := b.Store().CommitLog().Clean()
	require.NoError(t, err)
	assert.Empty(t, cr.Deleted)
	assert.NotEmpty(t, cr.Pinned, "the expired segments hold Long's message")
	_, got := pull(t, b, broker.PullRequest{Topic: "Long", QueueID: 0, Offset: 0})
	assert.Equal(t, []string{"keep me"}, bodies(got))

	clock.Advance(31 * time.Minute)
	b.SweepLimits()
	cr, err = b.Store().CommitLog().Clean()
	require.NoError(t, err)
	assert.NotEmpty(t, cr.Deleted, "Long's retention passed: the log goes by fileReservedTime again")
	assert.Empty(t, cr.Pinned)
}
