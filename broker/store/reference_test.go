package store_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// refMsg is what the reference model knows of a stored message.
type refMsg struct {
	topic   string
	queueID int32
	qoff    int64
	phys    int64
	ts      int64
	tags    string
	keys    []string
	uniq    string
}

// refWorkload stores n random messages with a clock that moves 0-1500 ms
// between puts, and returns the model. "Aa" and "BB" have the same Java
// hash code, so the tag filter must let both through.
func refWorkload(t *testing.T, seed uint64, n int) (*store.Store, []refMsg) {
	rng := rand.New(rand.NewPCG(seed, 11))
	now := atomic.Int64{}
	now.Store(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixMilli())
	cfg := testConfig(t, "/store", fsx.NewMemFS())
	cfg.IndexEntries = 2000
	cfg.Now = func() time.Time { return time.UnixMilli(now.Load()) }
	s := openStore(t, cfg)
	tags := []string{"Aa", "BB", "x", "y", ""}
	var model []refMsg
	for len(model) < n {
		batch := make([]*message.Message, 1+rng.IntN(4))
		for i := range batch {
			m := &message.Message{Topic: []string{"A", "B"}[rng.IntN(2)], QueueID: int32(rng.IntN(3)), Body: []byte("x")}
			if tag := tags[rng.IntN(len(tags))]; tag != "" {
				m.Properties = append(m.Properties, message.Property{Key: message.PropTags, Value: tag})
			}
			if k := rng.IntN(3); k > 0 {
				keys := ""
				for range k {
					keys += fmt.Sprintf("key-%d ", rng.IntN(40))
				}
				m.Properties = append(m.Properties, message.Property{Key: message.PropKeys, Value: keys})
			}
			batch[i] = m
		}
		now.Add(int64(rng.IntN(1500)))
		res, err := putMsgs(t.Context(), s, batch)
		require.NoError(t, err)
		for i, r := range res {
			m := batch[i]
			model = append(model, refMsg{topic: m.Topic, queueID: m.QueueID, qoff: r.QueueOffset, phys: r.PhysicalOffset,
				ts: r.StoreTimestamp, tags: m.Tags(), keys: m.Keys(), uniq: r.UniqKey})
		}
	}
	waitDispatched(t, s)
	return s, model
}

func queueOf(model []refMsg, topic string, qid int32) []refMsg {
	var out []refMsg
	for _, m := range model {
		if m.topic == topic && m.queueID == qid {
			out = append(out, m)
		}
	}
	return out
}

// Tag filtering, offset-by-time and key lookups agree with a reference
// model on random workloads.
func TestAgainstReference(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s, model := refWorkload(t, seed, 1500)
			defer s.Close()
			rng := rand.New(rand.NewPCG(seed, 12))
			t.Run("tag filter", func(t *testing.T) { checkTagFilter(t, s, model, rng) })
			t.Run("offset by time", func(t *testing.T) { checkOffsetAtTime(t, s, model, rng) })
			t.Run("key lookup", func(t *testing.T) { checkKeyLookups(t, s, model, rng) })
		})
	}
}

func checkTagFilter(t *testing.T, s *store.Store, model []refMsg, rng *rand.Rand) {
	sawCollision := false
	for _, want := range [][]string{{"Aa"}, {"BB"}, {"x", "y"}, {"Aa", "x"}} {
		codes := map[int64]bool{}
		for _, tag := range want {
			codes[message.TagsCode(tag)] = true
		}
		filter := func(c int64) bool { return codes[c] }
		for _, topic := range []string{"A", "B"} {
			for qid := range int32(3) {
				q := queueOf(model, topic, qid)
				start := int64(rng.IntN(len(q) / 2))
				var exp, got []int64
				for _, m := range q[start:] {
					if slices.Contains(want, m.tags) {
						exp = append(exp, m.qoff)
					}
				}
				for off := start; off < int64(len(q)); {
					g, err := s.Get(topic, qid, off, 1+rng.IntN(40), 1<<20, filter)
					require.NoError(t, err)
					require.Contains(t, []store.GetStatus{store.Found, store.NoMatchedMessage}, g.Status)
					require.Greater(t, g.NextOffset, off)
					for _, r := range g.Records {
						m, _, err := message.Decode(r.B)
						require.NoError(t, err)
						if slices.Contains(want, m.Tags()) { // the consumer's exact check after the hash
							got = append(got, m.QueueOffset)
						} else {
							sawCollision = true
						}
					}
					g.Release()
					off = g.NextOffset
				}
				assert.Equal(t, exp, got, "%s/%d from %d tags %v", topic, qid, start, want)
			}
		}
	}
	assert.True(t, sawCollision, `"Aa" and "BB" share a hash code: the code filter passes both`)
}

func checkOffsetAtTime(t *testing.T, s *store.Store, model []refMsg, rng *rand.Rand) {
	first, last := model[0].ts, model[len(model)-1].ts
	for range 300 {
		ts := first - 1000 + rng.Int64N(last-first+2000)
		if rng.IntN(4) == 0 { // exactly a message's time
			ts = model[rng.IntN(len(model))].ts
		}
		topic, qid := []string{"A", "B"}[rng.IntN(2)], int32(rng.IntN(3))
		q := queueOf(model, topic, qid)
		want := int64(len(q))
		for _, m := range q {
			if m.ts >= ts {
				want = m.qoff
				break
			}
		}
		got, err := s.OffsetAtTime(topic, qid, ts)
		require.NoError(t, err)
		assert.Equal(t, want, got, "%s/%d at %d", topic, qid, ts)
	}
}

func checkKeyLookups(t *testing.T, s *store.Store, model []refMsg, rng *rand.Rand) {
	first, last := model[0].ts, model[len(model)-1].ts
	for range 400 {
		topic := []string{"A", "B"}[rng.IntN(2)]
		var key string
		if rng.IntN(3) == 0 {
			key = model[rng.IntN(len(model))].uniq
		} else {
			key = fmt.Sprintf("key-%d", rng.IntN(45)) // some never used
		}
		begin, end := first-1000, last+1000
		if rng.IntN(2) == 0 {
			begin = first + rng.Int64N(last-first+1)
			end = begin + rng.Int64N(last-begin+1)
		}
		var want []int64
		for _, m := range slices.Backward(model) {
			if m.topic == topic && m.ts >= begin && m.ts <= end && (m.uniq == key || slices.Contains(m.keys, key)) {
				want = append(want, m.phys)
			}
		}
		ms, err := s.MessagesByKey(topic, key, begin, end, 1000)
		require.NoError(t, err)
		got := []int64{}
		for _, m := range ms {
			got = append(got, m.PhysicalOffset)
		}
		if want == nil {
			want = []int64{}
		}
		assert.Equal(t, want, got, "%s#%s in [%d, %d]", topic, key, begin, end)
	}
}
