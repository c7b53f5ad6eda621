package broker_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/message"
)

// dedupConfig is testConfig on clock (the default 5 min window).
func dedupConfig(t *testing.T, clock *fakeClock) broker.Config {
	cfg := testConfig(t)
	cfg.Now = clock.Now
	return cfg
}

// dedupMode says where a repeat finds its original: "recent" as the broker
// runs (in memory while the store has not indexed it yet, else in the
// index), "indexed" in the store's index only (each send is followed by
// DedupSettle).
type dedupMode struct {
	name    string
	indexed bool
}

var dedupModes = []dedupMode{{"recent", false}, {"indexed", true}}

// settle waits, in the indexed mode, until the broker holds no recent key.
func (m dedupMode) settle(t *testing.T, b *broker.Broker) {
	t.Helper()
	if m.indexed {
		b.DedupSettle(t)
	}
}

// eachDedupCase runs body for every send path in every mode.
func eachDedupCase(t *testing.T, body func(t *testing.T, p sendPath, m dedupMode)) {
	for _, p := range sendPaths {
		for _, m := range dedupModes {
			t.Run(p.name+"/"+m.name, func(t *testing.T) { body(t, p, m) })
		}
	}
}

// keyed is a message of topic with UNIQ_KEY uniq and the extra property
// pairs props.
func keyed(topic string, queueID int32, body, uniq string, props ...string) *message.Message {
	m := delayedMsg(topic, queueID, body, props...)
	if uniq != "" {
		m.Properties = append(m.Properties, message.Property{Key: message.PropUniqKey, Value: uniq})
	}
	return m
}

// sendPath sends msgs through Send or, encoded as records, SendRecords.
type sendPath struct {
	name string
	send func(t *testing.T, b *broker.Broker, msgs ...*message.Message) ([]broker.SendResult, error)
}

var sendPaths = []sendPath{
	{"Send", func(t *testing.T, b *broker.Broker, msgs ...*message.Message) ([]broker.SendResult, error) {
		return b.Send(t.Context(), msgs[0].Topic, msgs)
	}},
	{"SendRecords", func(t *testing.T, b *broker.Broker, msgs ...*message.Message) ([]broker.SendResult, error) {
		return b.SendRecords(t.Context(), msgs[0].Topic, [][]byte{recordsOf(t, msgs...)})
	}},
}

// recordsOf encodes msgs as a producer does for SendRecords, back to
// back, each with its UNIQ_KEY property as the record's UNIQ_KEY.
func recordsOf(t *testing.T, msgs ...*message.Message) []byte {
	t.Helper()
	var chunk []byte
	for _, m := range msgs {
		mm := *m
		mm.Properties = nil
		for _, kv := range m.Properties {
			if kv.Key != message.PropUniqKey {
				mm.Properties = append(mm.Properties, kv)
			}
		}
		chunk = append(chunk, encodeRecord(t, &mm, m.UniqKey(), false)...)
	}
	return chunk
}

// logCount returns how many records of topic the commit log holds (Send
// returns once they are there; the queues follow).
func logCount(t *testing.T, b *broker.Broker, topic string) int64 {
	t.Helper()
	cl := b.Store().CommitLog()
	var n int64
	for off := cl.MinOffset(); off < cl.MaxOffset(); {
		r, next, err := cl.ReadRecord(off)
		require.NoError(t, err)
		v, err := message.NewView(r.B)
		require.NoError(t, err)
		if string(v.Topic()) == topic {
			n++
		}
		r.Release()
		off = next
	}
	return n
}

// same checks that a duplicate's result is the original's.
func same(t *testing.T, orig, dup broker.SendResult) {
	t.Helper()
	assert.False(t, orig.Duplicate)
	assert.True(t, dup.Duplicate)
	assert.Equal(t, orig.PutResult, dup.PutResult)
}

// A repeat of a key within the window is answered with the original's
// result and stores nothing; after the window it is stored; keys count per
// topic; an IDEMPOTENCY_KEY wins over the UNIQ_KEY.
func TestDedupWindow(t *testing.T) {
	eachDedupCase(t, func(t *testing.T, p sendPath, mode dedupMode) {
		{
			clock := newFakeClock()
			b := openBroker(t, dedupConfig(t, clock))
			createTopic(t, b, "T", 2)
			createTopic(t, b, "U", 2)
			first, err := p.send(t, b, keyed("T", 0, "one", "K1"))
			require.NoError(t, err)
			require.False(t, first[0].Duplicate)
			mode.settle(t, b)

			clock.Advance(4*time.Minute + 59*time.Second)
			again, err := p.send(t, b, keyed("T", 1, "one again", "K1"))
			require.NoError(t, err)
			same(t, first[0], again[0])
			assert.Equal(t, "K1", again[0].UniqKey)
			assert.Equal(t, int64(1), logCount(t, b, "T"), "the repeat stored nothing")
			assert.Equal(t, int64(1), b.Status().Duplicates)

			other, err := p.send(t, b, keyed("U", 0, "one", "K1"))
			require.NoError(t, err)
			assert.False(t, other[0].Duplicate, "the same key in another topic is another message")

			clock.Advance(time.Second) // the window is over
			late, err := p.send(t, b, keyed("T", 0, "one late", "K1"))
			require.NoError(t, err)
			assert.False(t, late[0].Duplicate)
			assert.Equal(t, int64(1), late[0].QueueOffset)
			assert.Equal(t, int64(2), logCount(t, b, "T"))
			mode.settle(t, b)
			again, err = p.send(t, b, keyed("T", 1, "one late again", "K1"))
			require.NoError(t, err)
			same(t, late[0], again[0]) // the new original, not the expired one

			idem, err := p.send(t, b, keyed("T", 0, "pay", "U-1", message.PropIdempotencyKey, "order-7"))
			require.NoError(t, err)
			mode.settle(t, b)
			idem2, err := p.send(t, b, keyed("T", 0, "pay", "U-2", message.PropIdempotencyKey, "order-7"))
			require.NoError(t, err)
			same(t, idem[0], idem2[0])
			assert.Equal(t, "U-1", idem2[0].UniqKey, "the original's UNIQ_KEY")
			byUniq, err := p.send(t, b, keyed("T", 0, "pay", "U-1"))
			require.NoError(t, err)
			assert.False(t, byUniq[0].Duplicate, "U-1 was sent with another key")
			assert.Equal(t, int64(4), logCount(t, b, "T"))
			assert.Equal(t, int64(3), b.Status().Duplicates)
		}
	})
}

// In a batch with some duplicates (of earlier sends and within the batch)
// the others are stored in order and the duplicates get their originals'
// results.
func TestDedupPartialBatch(t *testing.T) {
	eachDedupCase(t, func(t *testing.T, p sendPath, mode dedupMode) {
		{
			b := openBroker(t, dedupConfig(t, newFakeClock()))
			createTopic(t, b, "T", 1)
			before, err := p.send(t, b, keyed("T", 0, "a", "A"), keyed("T", 0, "b", "B"))
			require.NoError(t, err)
			mode.settle(t, b)
			res, err := p.send(t, b, keyed("T", 0, "c", "C"), keyed("T", 0, "a2", "A"), keyed("T", 0, "d", "D"),
				keyed("T", 0, "b2", "B"), keyed("T", 0, "c2", "C"))
			require.NoError(t, err)
			require.Len(t, res, 5)
			assert.Equal(t, []bool{false, true, false, true, true},
				[]bool{res[0].Duplicate, res[1].Duplicate, res[2].Duplicate, res[3].Duplicate, res[4].Duplicate})
			same(t, before[0], res[1])
			same(t, before[1], res[3])
			same(t, res[0], res[4])
			assert.Equal(t, []int64{2, 3}, []int64{res[0].QueueOffset, res[2].QueueOffset})
			waitVisible(t, b, "T", 0, 4)
			assert.Equal(t, []string{"a", "b", "c", "d"}, bodies(delivered(t, b, "T")))
			mode.settle(t, b)

			all, err := p.send(t, b, keyed("T", 0, "x", "A"), keyed("T", 0, "y", "D"), keyed("T", 0, "z", "A"))
			require.NoError(t, err, "a batch of duplicates only stores nothing")
			assert.True(t, all[0].Duplicate && all[1].Duplicate && all[2].Duplicate)
			same(t, before[0], all[0])
			same(t, res[2], all[1])
			same(t, before[0], all[2])
			assert.Equal(t, int64(4), logCount(t, b, "T"))
		}
	})
}

// Of concurrent sends of one key exactly one stores it; every other gets
// its result as a duplicate.
func TestDedupConcurrentSameKey(t *testing.T) {
	for _, p := range sendPaths {
		t.Run(p.name, func(t *testing.T) {
			b := openBroker(t, dedupConfig(t, newFakeClock()))
			createTopic(t, b, "T", 4)
			const keys, senders = 40, 8
			results := make([][]broker.SendResult, keys*senders)
			var wg sync.WaitGroup
			for s := range senders {
				wg.Go(func() {
					for k := range keys {
						res, err := p.send(t, b, keyed("T", broker.BrokerPicksQueue, fmt.Sprint("m", k), fmt.Sprint("K", k)))
						if !assert.NoError(t, err) {
							return
						}
						results[k*senders+s] = res
					}
				})
			}
			wg.Wait()
			require.Equal(t, int64(keys), logCount(t, b, "T"), "each key stored once")
			for k := range keys {
				var stored []broker.SendResult
				for s := range senders {
					if r := results[k*senders+s][0]; !r.Duplicate {
						stored = append(stored, r)
					}
				}
				require.Len(t, stored, 1, "key %d", k)
				for s := range senders {
					assert.Equal(t, stored[0].PutResult, results[k*senders+s][0].PutResult, "key %d", k)
				}
			}
			assert.Equal(t, int64(keys*(senders-1)), b.Status().Duplicates)
		})
	}
}

// A delayed message (a delay level, a delivery time) is de-duplicated by
// its topic (its result is the parked record's), with or without the
// delay on the repeat, and its delivery, which keeps its key, is not taken
// for a duplicate: only user sends are.
func TestDedupDelayedAndDelivered(t *testing.T) {
	eachDedupCase(t, func(t *testing.T, p sendPath, mode dedupMode) {
		clock := newFakeClock()
		b := openBroker(t, delayConfig(t, clock))
		createTopic(t, b, "T", 1)
		parked, err := p.send(t, b, keyed("T", 0, "later", "D1", message.PropDelay, "1"))
		require.NoError(t, err)
		timed, err := p.send(t, b, keyed("T", 0, "at", "D2", message.PropTimerDelaySec, "3"))
		require.NoError(t, err)
		mode.settle(t, b)
		again, err := p.send(t, b, keyed("T", 0, "later", "D1", message.PropDelay, "1"),
			keyed("T", 0, "at", "D2", message.PropTimerDelaySec, "3"), keyed("T", 0, "now", "D1"))
		require.NoError(t, err)
		same(t, parked[0], again[0])
		same(t, timed[0], again[1])
		same(t, parked[0], again[2])
		assert.Equal(t, int64(1), logCount(t, b, broker.ScheduleTopic))
		assert.Equal(t, int64(1), logCount(t, b, broker.TimerTopic))

		clock.Advance(4 * time.Second)
		waitCount(t, b, "T", 2) // delivered, not refused as repeats of D1 and D2
		mode.settle(t, b)
		dup, err := p.send(t, b, keyed("T", 0, "later", "D1", message.PropDelay, "1"), keyed("T", 0, "at", "D2"))
		require.NoError(t, err)
		same(t, parked[0], dup[0])
		same(t, timed[0], dup[1])
		assert.Equal(t, int64(2), logCount(t, b, "T"))
	})
}

// Sends to a group's retry or dead-letter topic are not de-duplicated
// (consumers write copies of a message there on purpose).
func TestDedupSkipsGroupTopics(t *testing.T) {
	b := openBroker(t, dedupConfig(t, newFakeClock()))
	createTopic(t, b, "%RETRY%g", 1)
	for range 2 {
		res := send(t, b, keyed("%RETRY%g", 0, "x", "R1"))
		assert.False(t, res[0].Duplicate)
	}
	assert.Equal(t, int64(2), logCount(t, b, "%RETRY%g"))
}

// With the window off every repeat is stored.
func TestDedupOff(t *testing.T) {
	for _, p := range sendPaths {
		t.Run(p.name, func(t *testing.T) {
			cfg := dedupConfig(t, newFakeClock())
			cfg.DuplicationWindow = broker.DuplicationOff
			b := openBroker(t, cfg)
			createTopic(t, b, "T", 1)
			for range 3 {
				res, err := p.send(t, b, keyed("T", 0, "x", "K"))
				require.NoError(t, err)
				assert.False(t, res[0].Duplicate)
			}
			assert.Equal(t, int64(3), logCount(t, b, "T"))
			assert.Zero(t, b.Status().Duplicates)
			assert.Zero(t, b.Status().DedupRecent)
		})
	}
}

// A restart keeps the window: the keys stored within it (parked and
// idempotency-keyed ones included) are found in the store's index, which
// Open recovered, with their results; older ones are not. Nothing is held
// in memory for them.
func TestDedupSurvivesRestart(t *testing.T) {
	clock := newFakeClock()
	cfg := dedupConfig(t, clock)
	b, err := broker.Open(t.Context(), cfg)
	require.NoError(t, err)
	createTopic(t, b, "T", 2)
	const old = 500
	for i := range old {
		send(t, b, keyed("T", int32(i%2), "old", fmt.Sprint("O", i)))
	}
	clock.Advance(6 * time.Minute)
	var recent []broker.SendResult
	recent = append(recent, send(t, b, keyed("T", 0, "r0", "R0"))...)
	recent = append(recent, send(t, b, keyed("T", 1, "r1", "R1", message.PropIdempotencyKey, "pay-1"))...)
	recent = append(recent, send(t, b, keyed("T", 0, "r2", "R2", message.PropDelay, "18"))...)
	recent = append(recent, send(t, b, keyed("T", 1, "r3", "R3"), keyed("T", 0, "r4", "R4"))...)
	require.NoError(t, b.Close(t.Context()))

	clock.Advance(time.Minute)
	b = openBroker(t, cfg)
	assert.Zero(t, b.Status().DedupRecent)

	res := send(t, b, keyed("T", 1, "r0", "R0"), keyed("T", 0, "r1", "R1-retry", message.PropIdempotencyKey, "pay-1"),
		keyed("T", 0, "r2", "R2", message.PropDelay, "18"), keyed("T", 0, "r3", "R3"), keyed("T", 1, "r4", "R4"),
		keyed("T", 0, "old again", "O7"))
	for i := range recent {
		same(t, recent[i], res[i])
	}
	assert.False(t, res[5].Duplicate, "a key stored before the window is not restored")
	assert.Equal(t, int64(old+5), logCount(t, b, "T")) // r2 is parked
}

// The window is rebuilt at Open even when a repeat comes while the
// original is still in the last moments of its window.
func TestDedupRestartWindowEdge(t *testing.T) {
	clock := newFakeClock()
	cfg := dedupConfig(t, clock)
	cfg.DuplicationWindow = 10 * time.Second
	b, err := broker.Open(t.Context(), cfg)
	require.NoError(t, err)
	createTopic(t, b, "T", 1)
	orig := send(t, b, keyed("T", 0, "x", "K"))
	require.NoError(t, b.Close(t.Context()))

	clock.Advance(9*time.Second + 999*time.Millisecond)
	b, err = broker.Open(t.Context(), cfg)
	require.NoError(t, err)
	same(t, orig[0], send(t, b, keyed("T", 0, "x", "K"))[0])
	require.NoError(t, b.Close(t.Context()))

	clock.Advance(time.Millisecond)
	b = openBroker(t, cfg)
	assert.False(t, send(t, b, keyed("T", 0, "x", "K"))[0].Duplicate)
}

func TestParseDuplicationWindow(t *testing.T) {
	tests := []struct {
		conf string
		want time.Duration
		err  string
	}{
		{"duplicationWindow=0", broker.DuplicationOff, ""},
		{"duplicationWindow=90s", 90 * time.Second, ""},
		{"duplicationWindow=120000", 2 * time.Minute, ""},
		{"duplicationWindow=-1s", 0, "want 0 (off) or a positive duration"},
		{"duplicationWindow=soon", 0, `duplicationWindow: bad value "soon"`},
	}
	for _, tt := range tests {
		t.Run(tt.conf, func(t *testing.T) {
			var c broker.Config
			err := broker.ParseConfig(strings.NewReader(tt.conf), &c)
			if tt.err != "" {
				require.ErrorIs(t, err, broker.ErrInvalidConfig)
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.DuplicationWindow)
			assert.Equal(t, tt.want, c.WithDefaults().DuplicationWindow, "a set value is kept")
			assert.NoError(t, c.Validate())
		})
	}
	assert.Equal(t, 5*time.Minute, broker.Config{}.WithDefaults().DuplicationWindow, "on by default")
	assert.ErrorContains(t, broker.Config{DuplicationWindow: time.Microsecond}.Validate(), "duplicationWindow 1µs: want at least 1ms")
}
