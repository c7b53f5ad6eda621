package client

import (
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
)

// commitSetup starts fake brokers named names, each with topic T of queues
// queues, a nameserver and a pull consumer of group g (auto-commit off
// unless opts turn it on) that the test closes at its end.
func commitSetup(t *testing.T, queues int32, names []string, opts ...PullConsumerOption) ([]*fakeBroker, *PullConsumer, []Queue) {
	t.Helper()
	var bs []*fakeBroker
	for _, name := range names {
		bs = append(bs, startBroker(t, name, queues, "T"))
	}
	ns := startNameServer(t, bs...)
	c, err := NewPullConsumer(t.Context(), testConfig(t, ns), "g", append([]PullConsumerOption{WithoutAutoCommit()}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	qs, err := c.Queues(t.Context(), "T")
	require.NoError(t, err)
	require.Len(t, qs, int(queues)*len(names))
	return bs, c, qs
}

func committed(t *testing.T, c *PullConsumer, q Queue) int64 {
	t.Helper()
	off, found, err := c.CommittedOffset(t.Context(), q)
	require.NoError(t, err)
	require.True(t, found, "%s has a committed offset", q)
	return off
}

// Marks move forward only, and Commit sends only what was marked since the
// last successful commit.
func TestMarkOffsetMovesForwardOnly(t *testing.T) {
	bs, c, qs := commitSetup(t, 2, []string{"a"})
	b, q := bs[0], qs[0]
	c.MarkOffset(q, 5)
	c.MarkOffset(q, 3)  // lower: ignored
	c.MarkOffset(q, -1) // negative: ignored
	require.NoError(t, c.Commit(t.Context()))
	assert.Equal(t, int64(5), committed(t, c, q))
	assert.Equal(t, int64(1), b.batchCommitCalls.Load())

	require.NoError(t, c.Commit(t.Context()))
	c.MarkOffset(q, 5) // the same: nothing new
	require.NoError(t, c.Commit(t.Context()))
	assert.Equal(t, int64(1), b.batchCommitCalls.Load(), "nothing marked since the last commit: nothing sent")

	c.MarkOffset(q, 9)
	c.MarkOffset(qs[1], 1)
	require.NoError(t, c.Commit(t.Context()))
	assert.Equal(t, int64(9), committed(t, c, q))
	assert.Equal(t, int64(1), committed(t, c, qs[1]))
	assert.Equal(t, int64(2), b.batchCommitCalls.Load())
	assert.Zero(t, b.commitCalls.Load())
}

// CommitOffset moves an offset back at once, and the mark with it: later
// marks go on from the reset offset instead of being ignored below the
// old mark, and the old mark is not committed again.
func TestCommitOffsetResetsTheMark(t *testing.T) {
	_, c, qs := commitSetup(t, 1, []string{"a"})
	q := qs[0]
	c.MarkOffset(q, 10)
	require.NoError(t, c.CommitOffset(t.Context(), q, 2))
	require.NoError(t, c.Commit(t.Context()))
	assert.Equal(t, int64(2), committed(t, c, q), "the reset wins over the mark it replaced")
	c.MarkOffset(q, 4)
	require.NoError(t, c.Commit(t.Context()))
	assert.Equal(t, int64(4), committed(t, c, q))
}

// A commit of the queues of two brokers is one request per broker.
func TestCommitIsOneRequestPerBroker(t *testing.T) {
	bs, c, qs := commitSetup(t, 32, []string{"a", "b"})
	for i, q := range qs {
		c.MarkOffset(q, int64(i+1))
	}
	require.NoError(t, c.Commit(t.Context()))
	for _, b := range bs {
		assert.Equal(t, int64(1), b.batchCommitCalls.Load(), "broker %s", b.name)
		assert.Zero(t, b.commitCalls.Load(), "broker %s", b.name)
	}
	for i, q := range qs {
		assert.Equal(t, int64(i+1), committed(t, c, q), "%s", q)
	}
}

// More queues of one broker than a request may carry go in as few
// requests as fit.
func TestCommitSplitsAtTheEntryLimit(t *testing.T) {
	bs, c, qs := commitSetup(t, 1500, []string{"a"})
	for _, q := range qs {
		c.MarkOffset(q, 7)
	}
	require.NoError(t, c.Commit(t.Context()))
	assert.Equal(t, int64(2), bs[0].batchCommitCalls.Load(), "1500 queues, at most 1024 a request")
	assert.Equal(t, int64(7), committed(t, c, qs[1499]))
}

// A broker without CommitOffsets gets one CommitOffset per queue, and is
// not asked for CommitOffsets again.
func TestCommitFallsBackToCommitOffset(t *testing.T) {
	bs, c, qs := commitSetup(t, 3, []string{"a"})
	b := bs[0]
	b.noBatchCommit.Store(true)
	for round := range 2 {
		for _, q := range qs {
			c.MarkOffset(q, int64(10*(round+1)))
		}
		require.NoError(t, c.Commit(t.Context()))
		for _, q := range qs {
			assert.Equal(t, int64(10*(round+1)), committed(t, c, q))
		}
	}
	assert.Equal(t, int64(6), b.commitCalls.Load(), "two rounds of three queues")
	assert.Equal(t, int64(1), b.batchCommitCalls.Load(), "asked once")
}

// A queue the broker refuses is named in Commit's error and stays marked;
// the other queues of its request are committed. A broker that cannot be
// reached fails its request as a whole, named by its address.
func TestCommitErrorsNameTheQueueAndBroker(t *testing.T) {
	bs, c, qs := commitSetup(t, 2, []string{"a"})
	gone := Queue{Topic: "Gone", BrokerName: "a", Broker: qs[0].Broker, ID: 0}
	c.MarkOffset(gone, 3)
	c.MarkOffset(qs[1], 4)
	err := c.Commit(t.Context())
	require.ErrorIs(t, err, ErrTopicNotFound)
	assert.Contains(t, err.Error(), "Gone@a#0 at 3")
	assert.Equal(t, int64(4), committed(t, c, qs[1]))
	err = c.Commit(t.Context())
	require.ErrorIs(t, err, ErrTopicNotFound, "the refused queue stays marked")
	assert.Equal(t, int64(2), bs[0].batchCommitCalls.Load())
	assert.NotContains(t, err.Error(), "T@a#1", "the committed queue is not sent again")

	c.MarkOffset(qs[0], 8)
	bs[0].srv.Stop()
	err = c.Commit(t.Context())
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, err.Error(), "on "+qs[0].Broker)
	assert.Contains(t, err.Error(), "2 queues")
}

// Auto-commit commits the marks by itself.
func TestAutoCommit(t *testing.T) {
	_, c, qs := commitSetup(t, 1, []string{"a"}, WithAutoCommitInterval(20*time.Millisecond))
	c.MarkOffset(qs[0], 6)
	require.Eventually(t, func() bool {
		off, found, err := c.CommittedOffset(t.Context(), qs[0])
		return err == nil && found && off == 6
	}, 10*time.Second, 10*time.Millisecond)
}

// Close commits the marks, even with a context that has already ended
// (its own grace), and stops the auto-commit goroutine (goleak checks).
func TestCloseCommitsTheMarks(t *testing.T) {
	for _, tt := range []struct {
		name string
		ctx  func() context.Context
	}{
		{"live context", context.Background},
		{"ended context", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := startBroker(t, "a", 2, "T")
			ns := startNameServer(t, b)
			c, err := NewPullConsumer(t.Context(), testConfig(t, ns), "g", WithAutoCommitInterval(time.Hour))
			require.NoError(t, err)
			qs, err := c.Queues(t.Context(), "T")
			require.NoError(t, err)
			c.MarkOffset(qs[0], 3)
			c.MarkOffset(qs[1], 4)
			require.NoError(t, c.Close(tt.ctx()))
			require.ErrorIs(t, c.Close(tt.ctx()), ErrClosed)
			assert.Equal(t, int64(1), b.batchCommitCalls.Load())

			other, err := NewPullConsumer(t.Context(), testConfig(t, ns), "g")
			require.NoError(t, err)
			defer other.Close(context.Background())
			assert.Equal(t, int64(3), committed(t, other, qs[0]))
			assert.Equal(t, int64(4), committed(t, other, qs[1]))
		})
	}
}

func TestAutoCommitIntervalChecked(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := NewPullConsumer(t.Context(), Config{NameServers: []string{"127.0.0.1:1"}}, "g", WithAutoCommitInterval(d))
		require.ErrorIs(t, err, ErrInvalidArgument, "%s", d)
		assert.Contains(t, err.Error(), "auto-commit interval")
	}
}

// aliasing names the fields of e whose bytes lie in buf.
func aliasing(buf []byte, e *MessageExt) []string {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	hi := lo + uintptr(len(buf))
	in := func(p unsafe.Pointer, n int) bool {
		return n > 0 && uintptr(p) >= lo && uintptr(p) < hi
	}
	var out []string
	check := func(name string, p unsafe.Pointer, n int) {
		if in(p, n) {
			out = append(out, name)
		}
	}
	str := func(name, s string) { check(name, unsafe.Pointer(unsafe.StringData(s)), len(s)) }
	check("Body", unsafe.Pointer(unsafe.SliceData(e.Body)), len(e.Body))
	str("Topic", e.Topic)
	str("Tags", e.Tags)
	str("UniqKey", e.UniqKey)
	str("Queue.Topic", e.Queue.Topic)
	if m := e.Message; m != nil {
		check("Message.Body", unsafe.Pointer(unsafe.SliceData(m.Body)), len(m.Body))
		str("Message.Topic", m.Topic)
		for i, p := range m.Properties {
			str(fmt.Sprintf("Message.Properties[%d].Key", i), p.Key)
			str(fmt.Sprintf("Message.Properties[%d].Value", i), p.Value)
		}
	}
	return out
}

// Trap 3: a received message is a view of its pull's buffer (so keeping
// it keeps the buffer); its Detach copy holds no byte of the buffer, nor
// the pull's shared slabs, and reads the same.
func TestDetachSharesNoMemoryWithThePull(t *testing.T) {
	var buf []byte
	for i := range 3 {
		var err error
		buf, err = message.Append(buf, &message.Message{
			Topic: "Orders", QueueOffset: int64(i), Body: fmt.Appendf(nil, "body-%d", i),
			Properties: message.Properties{
				{Key: message.PropTags, Value: "created"}, {Key: message.PropKeys, Value: "k1 k2"},
				{Key: message.PropUniqKey, Value: fmt.Sprintf("UNIQ-%d", i)}, {Key: "p", Value: "v"},
			},
		}, true)
		require.NoError(t, err)
	}
	msgs, err := decodeRecords(buf, Queue{Topic: "Orders", BrokerName: "a", Broker: "127.0.0.1:1"}, 3)
	require.NoError(t, err)
	e := msgs[1]
	require.NotEmpty(t, aliasing(buf, e), "a received message views the pull's buffer")

	d := e.Detach()
	assert.Empty(t, aliasing(buf, d), "the detached copy must not view the pull's buffer")
	require.NotNil(t, d.Message)
	assert.NotSame(t, e.Message, d.Message)
	slab := msgs[0].Message.Properties[:cap(msgs[0].Message.Properties)]
	for _, m := range msgs { // the properties of one pull share a slab
		assert.NotSame(t, &m.Message.Properties[0], &d.Message.Properties[0])
	}
	assert.NotSame(t, &slab[0], &d.Message.Properties[0])

	want := *e
	want.Message = nil
	got := *d
	got.Message = nil
	assert.Equal(t, want, got)
	assert.Equal(t, *e.Message, *d.Message)
	assert.Equal(t, []string{"k1", "k2"}, d.Keys())
	assert.Equal(t, "UNIQ-1", d.UniqKey)
	assert.Equal(t, e.MsgID(), d.MsgID())
	assert.Equal(t, e.Properties(), d.Properties())

	clear(buf) // the buffer reused: the copy reads the same
	assert.Equal(t, []byte("body-1"), d.Body)
	assert.Equal(t, "Orders", d.Topic)
	assert.Equal(t, "created", d.Tags)
	assert.Equal(t, "v", d.Property("p"))
}

// A field set apart from the record (the push consumer shows a retry's
// original topic) is copied too; an inflated body, the message's own
// already, is kept.
func TestDetachCopiesEveryField(t *testing.T) {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	_, err := w.Write([]byte("large body"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	buf, err := message.Append(nil, &message.Message{
		Topic: "%RETRY%g", Body: z.Bytes(), SysFlag: message.FlagCompressed,
		Properties: message.Properties{{Key: message.PropRetryTopic, Value: "Orders"}},
	}, true)
	require.NoError(t, err)
	msgs, err := decodeRecords(buf, Queue{Topic: "%RETRY%g", BrokerName: "a"}, 1)
	require.NoError(t, err)
	e := msgs[0]
	e.Topic = e.Property(message.PropRetryTopic)
	d := e.Detach()
	assert.Empty(t, aliasing(buf, d))
	assert.Equal(t, "Orders", d.Topic)
	assert.Equal(t, "%RETRY%g", d.Message.Topic)
	assert.Equal(t, []byte("large body"), d.Body)
	assert.Same(t, unsafe.SliceData(e.Body), unsafe.SliceData(d.Body), "the inflated body is not the buffer's: kept")
	assert.Equal(t, z.Bytes(), d.Message.Body)

	bare := &MessageExt{Topic: "T", Body: []byte("x")} // built by hand, no record
	bd := bare.Detach()
	assert.Equal(t, bare.Body, bd.Body)
	assert.NotSame(t, unsafe.SliceData(bare.Body), unsafe.SliceData(bd.Body))
}

// A Detach costs four allocations whatever the message's properties: the
// copy, its strings, its properties and its body.
func TestDetachAllocations(t *testing.T) {
	props := message.Properties{{Key: message.PropTags, Value: "a"}, {Key: message.PropUniqKey, Value: "u"}, {Key: "p", Value: "v"}}
	buf, err := message.Append(nil, &message.Message{Topic: "Orders", Body: []byte("hello"), Properties: props}, true)
	require.NoError(t, err)
	msgs, err := decodeRecords(buf, Queue{Topic: "Orders"}, 1)
	require.NoError(t, err)
	assert.Equal(t, 4.0, testing.AllocsPerRun(100, func() { _ = msgs[0].Detach() }))
}
