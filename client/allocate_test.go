package client

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func queuesN(n int) []Queue {
	qs := make([]Queue, n)
	for i := range qs {
		qs[i] = Queue{Topic: "T", BrokerName: "b", ID: int32(i)}
	}
	return qs
}

func ids(qs []Queue) []int32 {
	out := []int32{}
	for _, q := range qs {
		out = append(out, q.ID)
	}
	return out
}

// The shares match RocketMQ's AllocateMessageQueueAveragely and
// AllocateMessageQueueAveragelyByCircle.
func TestAllocate(t *testing.T) {
	clients := []string{"a", "b", "c"}
	tests := []struct {
		strategy AllocateStrategy
		queues   int
		want     map[string][]int32
	}{
		{AllocateAveragely, 8, map[string][]int32{"a": {0, 1, 2}, "b": {3, 4, 5}, "c": {6, 7}}},
		{AllocateAveragely, 9, map[string][]int32{"a": {0, 1, 2}, "b": {3, 4, 5}, "c": {6, 7, 8}}},
		{AllocateAveragely, 2, map[string][]int32{"a": {0}, "b": {1}, "c": {}}},
		{AllocateAveragely, 0, map[string][]int32{"a": {}, "b": {}, "c": {}}},
		{AllocateAveragelyByCircle, 8, map[string][]int32{"a": {0, 3, 6}, "b": {1, 4, 7}, "c": {2, 5}}},
		{AllocateAveragelyByCircle, 2, map[string][]int32{"a": {0}, "b": {1}, "c": {}}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.strategy.Name(), tt.queues), func(t *testing.T) {
			qs := queuesN(tt.queues)
			var all []int32
			for _, c := range clients {
				got := ids(tt.strategy.Allocate(c, clients, qs))
				assert.Equal(t, tt.want[c], got, c)
				all = append(all, got...)
			}
			slices.Sort(all)
			assert.Equal(t, ids(qs), append([]int32{}, all...), "every queue exactly once")
			assert.Empty(t, tt.strategy.Allocate("stranger", clients, qs), "a client not in the list gets nothing")
		})
	}
}

// Every member's share is disjoint and covers the queues, for any count.
func TestAllocateCoversAll(t *testing.T) {
	for _, s := range []AllocateStrategy{AllocateAveragely, AllocateAveragelyByCircle} {
		for n := 1; n <= 7; n++ {
			for q := 0; q <= 20; q++ {
				clients := make([]string, n)
				for i := range clients {
					clients[i] = fmt.Sprintf("c%02d", i)
				}
				seen := map[int32]int{}
				for _, c := range clients {
					for _, x := range s.Allocate(c, clients, queuesN(q)) {
						seen[x.ID]++
					}
				}
				require.Len(t, seen, q, "%s n=%d q=%d", s.Name(), n, q)
				for id, k := range seen {
					require.Equal(t, 1, k, "%s n=%d q=%d queue %d", s.Name(), n, q, id)
				}
			}
		}
	}
}
