package client

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func msgsAt(offs ...int64) []*MessageExt {
	out := make([]*MessageExt, len(offs))
	for i, o := range offs {
		out[i] = &MessageExt{QueueOffset: o, Body: make([]byte, 10)}
	}
	return out
}

// The commit offset is the lowest offset still held, never past a message
// that was not handled, and the next offset to pull once nothing is held.
func TestProcessQueueCommitOffset(t *testing.T) {
	pq := newProcessQueue(100)
	assert.Equal(t, int64(100), pq.commitOffset())
	ms := msgsAt(100, 101, 103, 104) // 102 was filtered out by the broker
	pq.put(ms, 105)
	n, b, span := pq.load()
	assert.Equal(t, 4, n)
	assert.Equal(t, int64(40), b)
	assert.Equal(t, int64(4), span)
	assert.Equal(t, int64(100), pq.commitOffset())

	pq.done(ms[1:3]) // 101 and 103 handled, 100 still running
	assert.Equal(t, int64(100), pq.commitOffset())
	n, b, span = pq.load()
	assert.Equal(t, 2, n, "flow control counts the messages not handled")
	assert.Equal(t, int64(40), b, "and the bytes of all held: handled ones behind 100 are still in memory")
	assert.Equal(t, int64(4), span, "the span still runs from the first held")
	pq.done(ms[1:2])
	n, _, _ = pq.load()
	assert.Equal(t, 2, n, "marking a message done twice counts once")
	pq.done(ms[:1])
	assert.Equal(t, int64(104), pq.commitOffset())
	pq.done(ms[3:])
	assert.Equal(t, int64(105), pq.commitOffset(), "empty: the next offset to pull")
	n, b, _ = pq.load()
	assert.Zero(t, n)
	assert.Zero(t, b)
	assert.Equal(t, 4, pq.peakCount())
	select {
	case <-pq.space:
	default:
		t.Fatal("handling messages signals space")
	}
}

// Ordered consumption hands messages out in order; a retried batch is
// handed out again before anything after it.
func TestProcessQueueTakeInOrder(t *testing.T) {
	pq := newProcessQueue(0)
	pq.put(msgsAt(0, 1, 2, 3, 4), 5)
	first := pq.take(2)
	assert.Equal(t, []int64{0, 1}, offsets(first))
	pq.untake(len(first))
	again := pq.take(2)
	assert.Equal(t, []int64{0, 1}, offsets(again))
	pq.done(again)
	assert.Equal(t, []int64{2, 3, 4}, offsets(pq.take(10)))
	assert.False(t, pq.pending())
	assert.Equal(t, int64(2), pq.commitOffset())
}

func offsets(ms []*MessageExt) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.QueueOffset
	}
	return out
}
