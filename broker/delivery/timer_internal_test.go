package delivery

import (
	"container/heap"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// offsetSet against a map, in random order, with the saved form
// round-tripped.
func TestOffsetSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 50 {
		var s offsetSet
		want := map[int64]bool{}
		for range rng.IntN(400) {
			o := rng.Int64N(300)
			if rng.IntN(3) == 0 { // runs, as deliveries make
				for i := range 70 {
					s.add(o + int64(i))
					want[o+int64(i)] = true
				}
			}
			s.add(o)
			want[o] = true
		}
		low := int64(0)
		for want[low] {
			low++
		}
		require.Equal(t, low, s.low(), "round %d", round)
		for o := range int64(500) {
			require.Equal(t, want[o] || o < low, s.has(o), "round %d offset %d", round, o)
		}
		data, err := json.Marshal(timerProgressDoc{LowWater: s.low(), Delivered: s.ranges()})
		require.NoError(t, err)
		back, err := decodeTimerProgress(data, 1<<40)
		require.NoError(t, err)
		for o := range int64(500) {
			require.Equal(t, s.has(o), back.has(o), "round %d offset %d after a round trip", round, o)
		}
		for _, r := range s.ranges() {
			assert.Greater(t, r[0], s.low())
		}
	}
}

func TestDecodeTimerProgress(t *testing.T) {
	s, err := decodeTimerProgress([]byte(`{"lowWater": 5, "delivered": [[7, 9], [12, 20]]}`), 15)
	require.NoError(t, err)
	var got []int64
	for o := range int64(25) {
		if s.has(o) {
			got = append(got, o)
		}
	}
	assert.Equal(t, []int64{0, 1, 2, 3, 4, 7, 8, 12, 13, 14}, got, "offsets past the queue's end dropped")
	for _, bad := range []string{`{"lowWater": -1}`, `{"lowWater": 5, "delivered": [[4, 6]]}`,
		`{"lowWater": 5, "delivered": [[7, 7]]}`, `{"lowWater": 5, "delivered": [[8, 10], [9, 12]]}`,
		`{"lowWater": 5, "extra": 1}`, `{"lowWater": 5`} {
		_, err := decodeTimerProgress([]byte(bad), 100)
		assert.Error(t, err, bad)
	}
}

func TestTimerHeapOrder(t *testing.T) {
	var h timerHeap
	for _, e := range []timerEntry{{5, 1}, {3, 9}, {5, 0}, {1, 4}, {3, 2}} {
		heap.Push(&h, e)
	}
	var got []timerEntry
	for len(h) > 0 {
		got = append(got, heap.Pop(&h).(timerEntry))
	}
	assert.True(t, slices.IsSortedFunc(got, func(a, b timerEntry) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return int(a.off - b.off)
	}))
	assert.Equal(t, []timerEntry{{1, 4}, {3, 2}, {3, 9}, {5, 0}, {5, 1}}, got)
}
