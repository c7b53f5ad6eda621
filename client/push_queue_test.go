package client

import (
	"bytes"
	"compress/zlib"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
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
	pq := newProcessQueue(100, false)
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
	assert.Equal(t, int64(20), b, "and their bytes: the handled ones behind 100 are let go")
	assert.Equal(t, int64(4), span, "the span still runs from the first held")
	pq.done(ms[1:2])
	n, _, _ = pq.load()
	assert.Equal(t, 2, n, "marking a message done twice counts once")
	_, b, _ = pq.load()
	assert.Equal(t, int64(20), b, "and its bytes once")
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
	pq := newProcessQueue(0, true)
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

// A concurrent queue holds offsets and sizes, never a message (nor the
// pull it came in); an ordered one holds a message until it is handled.
func TestProcessQueueLetsGoOfHandledMessages(t *testing.T) {
	pq := newProcessQueue(0, false)
	ms := msgsAt(0, 1, 2, 3)
	pq.put(ms, 4)
	for _, e := range pq.entries {
		assert.Nil(t, e.msg, "offset %d", e.off)
	}
	pq.done(ms[1:3])
	c := ms[0].detached() // a copy is done by its offset
	pq.done([]*MessageExt{c})
	assert.Equal(t, int64(3), pq.commitOffset())
	n, b, _ := pq.load()
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(len(ms[3].Body)), b)

	ordered := newProcessQueue(0, true)
	ordered.put(ms, 4)
	ordered.done(ms[1:3])
	assert.Same(t, ms[0], ordered.entries[0].msg)
	for _, e := range ordered.entries[1:3] {
		assert.Nil(t, e.msg, "offset %d was handled", e.off)
	}
}

// A detached message shares no memory with the pull it came in, and reads
// the same.
func TestMessageExtDetached(t *testing.T) {
	buf, err := message.Append(nil, &message.Message{Topic: "T", Body: []byte("hello"), Properties: message.Properties{{Key: message.PropTags, Value: "a"}}}, false)
	require.NoError(t, err)
	var m message.Message
	_, err = message.DecodeInto(&m, buf, false)
	require.NoError(t, err)
	e := newMessageExt(new(MessageExt), &m, Queue{Topic: "T"})
	c := e.detached()
	assert.Equal(t, e.Body, c.Body)
	assert.Equal(t, "a", c.Tags)
	assert.Equal(t, e.Message.Properties, c.Message.Properties)
	clear(buf) // the pull's buffer reused
	assert.Equal(t, []byte("hello"), c.Body)
	assert.Equal(t, []byte("hello"), c.Message.Body)

	// A compressed record: the inflated body is the message's own; the
	// stored one is copied.
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	_, _ = w.Write([]byte("hello"))
	require.NoError(t, w.Close())
	buf, err = message.Append(nil, &message.Message{Topic: "T", SysFlag: message.FlagCompressed, Body: z.Bytes()}, false)
	require.NoError(t, err)
	_, err = message.DecodeInto(&m, buf, false)
	require.NoError(t, err)
	e = newMessageExt(new(MessageExt), &m, Queue{Topic: "T"})
	require.Equal(t, []byte("hello"), e.Body)
	c = e.detached()
	clear(buf)
	assert.Equal(t, []byte("hello"), c.Body)
	assert.Equal(t, z.Bytes(), c.Message.Body)
}
