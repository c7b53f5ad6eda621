package broker_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

func timerFile(cfg broker.Config) string {
	return filepath.Join(cfg.StorePathRootDir, "config", broker.TimerProgressFile)
}

func TestTimerDelivery(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, delayConfig(t, clock))
	createTopic(t, b, "Timed", 2)
	t0 := clock.Now()
	at := t0.Add(1500 * time.Millisecond).UnixMilli()
	res := send(t, b,
		delayedMsg("Timed", 1, "at", message.PropTimerDeliverMS, strconv.FormatInt(at, 10), message.PropTags, "T"),
		delayedMsg("Timed", 0, "in-5s", message.PropTimerDelaySec, "5"))
	for i, want := range []int64{at, t0.Add(5 * time.Second).UnixMilli()} {
		p := parkedMessage(t, b, res[i].MsgID)
		assert.Equal(t, broker.TimerTopic, p.Topic)
		assert.Equal(t, int32(0), res[i].QueueID)
		v, _ := p.Properties.Get(message.PropTimerDeliverMS)
		assert.Equal(t, strconv.FormatInt(want, 10), v, "the parked copy holds the absolute time")
		_, ok := p.Properties.Get(message.PropTimerDelaySec)
		assert.False(t, ok)
		realTopic, _ := p.Properties.Get(message.PropRealTopic)
		assert.Equal(t, "Timed", realTopic)
	}
	clock.Advance(1499 * time.Millisecond)
	stillCount(t, b, "Timed", 0)
	clock.Advance(time.Millisecond)
	waitCount(t, b, "Timed", 1)
	clock.Advance(3500*time.Millisecond - time.Millisecond)
	stillCount(t, b, "Timed", 1)
	clock.Advance(time.Millisecond)
	waitCount(t, b, "Timed", 2)
	got := delivered(t, b, "Timed")
	require.Len(t, got, 2)
	assert.Equal(t, []string{"in-5s", "at"}, bodies(got))
	assert.Equal(t, []int64{t0.Add(5 * time.Second).UnixMilli(), at}, []int64{got[0].StoreTimestamp, got[1].StoreTimestamp})
	assert.Equal(t, "T", got[1].Tags())
	for _, m := range got {
		for _, k := range []string{message.PropTimerDeliverMS, message.PropTimerDelaySec, message.PropRealTopic, message.PropRealQueueID} {
			_, ok := m.Properties.Get(k)
			assert.False(t, ok, "%s removed", k)
		}
	}
	assert.Eventually(t, func() bool { return b.Status().TimerPending == 0 }, 5*time.Second, time.Millisecond,
		"nothing pending once delivered (the timer counts a message delivered once its put returns)")
}

// A delivery time at or before now is stored at once, in its topic.
func TestTimerPastDelivery(t *testing.T) {
	clock := newFakeClock()
	b := openBroker(t, delayConfig(t, clock))
	createTopic(t, b, "T", 1)
	now := clock.Now().UnixMilli()
	res := send(t, b,
		delayedMsg("T", 0, "now", message.PropTimerDeliverMS, strconv.FormatInt(now, 10)),
		delayedMsg("T", 0, "past", message.PropTimerDeliverMS, "1"),
		delayedMsg("T", 0, "zero", message.PropTimerDelaySec, "0"),
		delayedMsg("T", 0, "negative", message.PropTimerDelaySec, "-30"))
	for _, r := range res {
		m := parkedMessage(t, b, r.MsgID)
		assert.Equal(t, "T", m.Topic)
		assert.Empty(t, slices.DeleteFunc(slices.Clone(m.Properties), func(p message.Property) bool {
			return p.Key != message.PropTimerDeliverMS && p.Key != message.PropTimerDelaySec
		}), "timer properties removed")
	}
	waitCount(t, b, "T", 4)
	_, maxOff := b.Store().QueueOffsets(broker.TimerTopic, 0)
	assert.Zero(t, maxOff, "nothing parked")
}

// With the default 100 ms tick a due message is delivered about that soon
// (in real time) after its time comes.
func TestTimerDefaultTick(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig(t)
	cfg.Now = clock.Now
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)
	send(t, b, delayedMsg("T", 0, "x", message.PropTimerDelaySec, "60"), delayedMsg("T", 0, "y", message.PropDelay, "1"))
	clock.Advance(time.Minute)
	start := time.Now()
	waitCount(t, b, "T", 2)
	assert.Less(t, time.Since(start), time.Second, "delivered within a few ticks")
}

// The timer saves its progress (a low-water mark and the delivered offsets
// above it) and a re-opened broker delivers the rest, nothing twice.
func TestTimerProgressPersisted(t *testing.T) {
	clock := newFakeClock()
	cfg := delayConfig(t, clock)
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)
	send(t, b, delayedMsg("T", 0, "late", message.PropTimerDelaySec, "100")) // offset 0
	for i := 1; i <= 10; i++ {
		send(t, b, delayedMsg("T", 0, fmt.Sprint("m", i), message.PropTimerDelaySec, strconv.Itoa(i))) // offsets 1..10
	}
	clock.Advance(5 * time.Second)
	waitCount(t, b, "T", 5)
	closeBroker(t, b)
	data, err := os.ReadFile(timerFile(cfg))
	require.NoError(t, err)
	assert.JSONEq(t, `{"lowWater": 0, "delivered": [[1, 6]]}`, string(data))

	b = openBroker(t, cfg)
	stillCount(t, b, "T", 5)
	assert.Equal(t, int64(6), b.Status().TimerPending)
	clock.Advance(5 * time.Second)
	waitCount(t, b, "T", 10)
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(timerFile(cfg))
		return err == nil && string(data) == "{\n  \"lowWater\": 0,\n  \"delivered\": [\n    [\n      1,\n      11\n    ]\n  ]\n}\n"
	}, 5*time.Second, time.Millisecond, "saved within about a second of a change, while running")
	clock.Advance(90 * time.Second)
	waitCount(t, b, "T", 11)
	closeBroker(t, b)
	data, err = os.ReadFile(timerFile(cfg))
	require.NoError(t, err)
	assert.JSONEq(t, `{"lowWater": 11, "delivered": null}`, string(data))

	b = openBroker(t, cfg)
	stillCount(t, b, "T", 11)
	got := bodies(delivered(t, b, "T"))
	assert.Len(t, slices.Compact(slices.Sorted(slices.Values(got))), 11, "each once")
}

// Losing the progress file (a crash before its first save looks the same)
// delivers messages again but loses none: at-least-once.
func TestTimerProgressLostRedelivers(t *testing.T) {
	clock := newFakeClock()
	cfg := delayConfig(t, clock)
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)
	for i := 1; i <= 4; i++ {
		send(t, b, delayedMsg("T", 0, fmt.Sprint("m", i), message.PropTimerDelaySec, strconv.Itoa(i)))
	}
	clock.Advance(2 * time.Second)
	waitCount(t, b, "T", 2)
	closeBroker(t, b)
	require.NoError(t, os.Remove(timerFile(cfg)))
	_ = os.Remove(metadata.BackupPath(timerFile(cfg)))

	b = openBroker(t, cfg)
	waitCount(t, b, "T", 4) // m1, m2 again
	clock.Advance(2 * time.Second)
	waitCount(t, b, "T", 6)
	assert.ElementsMatch(t, []string{"m1", "m2", "m1", "m2", "m3", "m4"}, bodies(delivered(t, b, "T")))
}

func TestTimerProgressDamaged(t *testing.T) {
	cfg := delayConfig(t, newFakeClock())
	b := openBroker(t, cfg)
	closeBroker(t, b)
	for _, p := range []string{timerFile(cfg), metadata.BackupPath(timerFile(cfg))} {
		require.NoError(t, os.WriteFile(p, []byte(`{"lowWater": -3}`), 0o644))
	}
	_, err := broker.Open(t.Context(), cfg)
	require.ErrorIs(t, err, metadata.ErrDamaged)
	assert.ErrorContains(t, err, "lowWater -3")
}

// bulkMsg is one message of TestDelayedTenThousand.
type bulkMsg struct {
	body string
	due  int64 // unix ms
}

// 10,000 messages, half with a delay level sent over the first half hour,
// half with a delivery time up to an hour away, the broker closed and
// re-opened half way: each is delivered exactly once, within a second of
// its time.
func TestDelayedTenThousand(t *testing.T) {
	const n, step = 10_000, 900 * time.Millisecond
	clock := newFakeClock()
	cfg := delayConfig(t, clock)
	cfg.StoreOverride = func(sc *store.Config) {
		sc.QueueEntriesPerFile, sc.IndexSlots, sc.IndexEntries = 4096, 1009, 50_000
		sc.Log.SegmentBytes, sc.Log.CleanInterval = 4<<20, -1
	}
	b := openBroker(t, cfg)
	createTopic(t, b, "Bulk", 4)
	rng := rand.New(rand.NewPCG(1, 2))
	delays := cfg.WithDefaults().MessageDelayLevel
	t0 := clock.Now()
	var msgs []bulkMsg
	var dues []int64 // sorted

	// Timer messages, sent at t0.
	var batch []*message.Message
	for i := range n / 2 {
		m := bulkMsg{body: fmt.Sprint("timer-", i)}
		var props []string
		if i%2 == 0 {
			m.due = t0.UnixMilli() + 1 + rng.Int64N(time.Hour.Milliseconds())
			props = []string{message.PropTimerDeliverMS, strconv.FormatInt(m.due, 10)}
		} else {
			sec := 1 + rng.Int64N(3600)
			m.due, props = t0.UnixMilli()+sec*1000, []string{message.PropTimerDelaySec, strconv.FormatInt(sec, 10)}
		}
		msgs, dues = append(msgs, m), append(dues, m.due)
		batch = append(batch, delayedMsg("Bulk", broker.BrokerPicksQueue, m.body, props...))
		if len(batch) == 100 {
			send(t, b, batch...)
			batch = nil
		}
	}
	slices.Sort(dues)

	// Level messages: 50 sends of 50, at random times in the first 30 min.
	sendAt := make([]int64, 50)
	for i := range sendAt {
		sendAt[i] = t0.UnixMilli() + rng.Int64N(30*time.Minute.Milliseconds())
	}
	slices.Sort(sendAt)
	sendLevels := func(now int64, k int) {
		var batch []*message.Message
		var recs []byte
		for j := range n / 2 / len(sendAt) {
			level := 1 + rng.IntN(16) // up to 30 min
			m := bulkMsg{body: fmt.Sprintf("level-%d-%d", k, j), due: now + delays[level-1].Milliseconds()}
			msgs = append(msgs, m)
			i, _ := slices.BinarySearch(dues, m.due)
			dues = slices.Insert(dues, i, m.due)
			dm := delayedMsg("Bulk", broker.BrokerPicksQueue, m.body, message.PropDelay, strconv.Itoa(level))
			if k%3 == 0 {
				recs = append(recs, encodeRecord(t, dm, "U-"+m.body, false)...)
			} else {
				batch = append(batch, dm)
			}
		}
		if recs != nil {
			_, err := b.SendRecords(t.Context(), "Bulk", [][]byte{recs})
			require.NoError(t, err)
		} else {
			send(t, b, batch...)
		}
	}

	reopened := false
	now, sent := t0.UnixMilli(), 0
	for done := 0; done < n; {
		next := now + step.Milliseconds()
		if sent == len(sendAt) {
			next = max(next, dues[done]) // jump over idle stretches
		}
		if sent < len(sendAt) {
			next = min(next, max(sendAt[sent], now+1))
		}
		if !reopened && next >= t0.Add(30*time.Minute).UnixMilli() {
			closeBroker(t, b)
			b, reopened = openBroker(t, cfg), true
		}
		setClock(clock, time.UnixMilli(next))
		now = next
		for sent < len(sendAt) && sendAt[sent] <= now {
			sendLevels(now, sent)
			sent++
		}
		done, _ = slices.BinarySearch(dues, now+1)
		waitCount(t, b, "Bulk", int64(done))
	}
	require.True(t, reopened)
	assert.Equal(t, n, len(msgs))

	got := delivered(t, b, "Bulk")
	require.Len(t, got, n)
	byBody := map[string]int64{}
	for _, m := range got {
		_, dup := byBody[string(m.Body)]
		require.False(t, dup, "%s delivered twice", m.Body)
		byBody[string(m.Body)] = m.StoreTimestamp
	}
	late := 0
	for _, m := range msgs {
		ts, ok := byBody[m.body]
		require.True(t, ok, "%s not delivered", m.body)
		require.GreaterOrEqual(t, ts, m.due, "%s early", m.body)
		if ts-m.due >= 1000 {
			late++
		}
	}
	assert.Zero(t, late, "messages delivered a second or more late")
	assert.Eventually(t, func() bool { // counted delivered once each put returns
		st := b.Status()
		return st.TimerPending == 0 && slices.Equal(make([]int64, 18), st.DelayPending)
	}, 5*time.Second, time.Millisecond, "nothing pending once delivered: %+v", b.Status())
}
