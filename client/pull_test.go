package client

import (
	"bytes"
	"compress/zlib"
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
)

// pullSetup starts a broker with topic T (queues queues), a nameserver, a
// producer that sends to queue 0 and a pull consumer of group g.
func pullSetup(t *testing.T, queues int32) (*fakeBroker, *Producer, *PullConsumer) {
	t.Helper()
	b := startBroker(t, "a", queues, "T")
	ns := startNameServer(t, b)
	p := newTestProducer(t, testConfig(t, ns), WithQueueSelector(first))
	c, err := NewPullConsumer(t.Context(), testConfig(t, ns), "g")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return b, p, c
}

func TestPullDecodesRecords(t *testing.T) {
	_, p, c := pullSetup(t, 4)
	sent := []*Message{
		{Topic: "T", Body: []byte("one"), Tags: "a", Keys: []string{"k1"}, Properties: map[string]string{"p": "1"}},
		{Topic: "T", Body: []byte("two"), Tags: "b", Keys: []string{"k2", "k3"}},
		{Topic: "T", Body: []byte("three"), Tags: "a"},
	}
	res, err := p.SendBatch(t.Context(), sent)
	require.NoError(t, err)

	queues, err := c.Queues(t.Context(), "T")
	require.NoError(t, err)
	require.Len(t, queues, 4)
	q := queues[0]
	assert.Equal(t, Queue{Topic: "T", BrokerName: "a", Broker: q.Broker, ID: 0}, q)

	before := time.Now().Add(-time.Second)
	r, err := c.Pull(t.Context(), q, 0, PullOptions{MaxMessages: 10})
	require.NoError(t, err)
	assert.Equal(t, PullFound, r.Status)
	assert.Equal(t, int64(3), r.NextOffset)
	assert.Equal(t, int64(0), r.MinOffset)
	assert.Equal(t, int64(3), r.MaxOffset)
	require.Len(t, r.Messages, 3)
	for i, m := range r.Messages {
		assert.Equal(t, sent[i].Body, m.Body)
		assert.Equal(t, sent[i].Tags, m.Tags)
		assert.Equal(t, sent[i].Keys, m.Keys())
		assert.Equal(t, res[i].MsgID, m.MsgID())
		assert.Equal(t, res[i].UniqKey, m.UniqKey)
		assert.Equal(t, int64(i), m.QueueOffset)
		assert.Equal(t, "T", m.Topic)
		assert.Equal(t, q, m.Queue)
		assert.Equal(t, sent[i].Tags, m.Properties()[message.PropTags])
		assert.NotContains(t, m.Properties(), message.PropCRC)
		assert.True(t, m.StoreTimestamp.After(before))
		assert.True(t, m.BornTimestamp.After(before))
		assert.NotNil(t, m.Message)
	}
	assert.Equal(t, "1", r.Messages[0].Property("p"))
	assert.Equal(t, "1", r.Messages[0].Properties()["p"])

	r, err = c.Pull(t.Context(), q, 0, PullOptions{MaxMessages: 10, Filter: "b"})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	assert.Equal(t, []byte("two"), r.Messages[0].Body)

	r, err = c.Pull(t.Context(), q, 0, PullOptions{MaxMessages: 1, Filter: "*"})
	require.NoError(t, err)
	assert.Len(t, r.Messages, 1)
	assert.Equal(t, int64(1), r.NextOffset)

	r, err = c.Pull(t.Context(), q, 3, PullOptions{MaxMessages: 10})
	require.NoError(t, err)
	assert.Equal(t, PullNoNewMessage, r.Status)
	assert.Empty(t, r.Messages)

	r, err = c.Pull(t.Context(), q, 2, PullOptions{MaxMessages: 10, Filter: "zzz"})
	require.NoError(t, err)
	assert.Equal(t, PullNoMatchedMessage, r.Status)
	assert.Equal(t, int64(3), r.NextOffset)

	r, err = c.Pull(t.Context(), q, 99, PullOptions{MaxMessages: 10})
	require.NoError(t, err)
	assert.Equal(t, PullOffsetIllegal, r.Status)
	assert.Equal(t, int64(3), r.NextOffset)
	assert.Equal(t, "OFFSET_ILLEGAL", r.Status.String())
}

func TestPullErrors(t *testing.T) {
	_, _, c := pullSetup(t, 1)
	_, err := c.Queues(t.Context(), "Nope")
	require.ErrorIs(t, err, ErrTopicNotFound)
	queues, err := c.Queues(t.Context(), "T")
	require.NoError(t, err)
	_, err = c.Pull(t.Context(), Queue{Topic: "Gone", BrokerName: "a", Broker: queues[0].Broker}, 0, PullOptions{MaxMessages: 1})
	require.ErrorIs(t, err, ErrTopicNotFound)
	_, err = c.Pull(t.Context(), Queue{Topic: "T"}, 0, PullOptions{MaxMessages: 1})
	require.ErrorIs(t, err, ErrInvalidArgument, "a queue without broker")
}

func TestPullHoldDeadline(t *testing.T) {
	b, _, c := pullSetup(t, 1)
	queues, err := c.Queues(t.Context(), "T")
	require.NoError(t, err)
	q := queues[0]
	lastDeadline := func() (time.Time, bool) {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.pullDL, b.pullHasDL
	}

	start := time.Now()
	r, err := c.Pull(t.Context(), q, 0, PullOptions{MaxMessages: 1, Hold: time.Second})
	require.NoError(t, err)
	assert.Equal(t, PullNoNewMessage, r.Status)
	dl, ok := lastDeadline()
	require.True(t, ok, "a held pull has a deadline")
	assert.WithinRange(t, dl, start.Add(6*time.Second-time.Second), start.Add(6*time.Second+time.Second), "hold + 5 s")

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start = time.Now()
	_, err = c.Pull(ctx, q, 0, PullOptions{MaxMessages: 1, Hold: 10 * time.Second})
	require.NoError(t, err)
	dl, ok = lastDeadline()
	require.True(t, ok)
	assert.WithinRange(t, dl, start.Add(time.Second), start.Add(2*time.Second+100*time.Millisecond), "the earlier context deadline stays")

	_, err = c.Pull(t.Context(), q, 0, PullOptions{MaxMessages: 1})
	require.NoError(t, err)
	_, ok = lastDeadline()
	assert.False(t, ok, "no hold, no deadline added")
}

func TestCommitAndQueryOffset(t *testing.T) {
	_, p, c := pullSetup(t, 2)
	for range 3 {
		_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
		require.NoError(t, err)
	}
	queues, err := c.Queues(t.Context(), "T")
	require.NoError(t, err)
	q := queues[0]

	_, found, err := c.CommittedOffset(t.Context(), q)
	require.NoError(t, err)
	assert.False(t, found)
	require.NoError(t, c.CommitOffset(t.Context(), q, 2))
	off, found, err := c.CommittedOffset(t.Context(), q)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(2), off)
	_, found, err = c.CommittedOffset(t.Context(), queues[1])
	require.NoError(t, err)
	assert.False(t, found)

	minOff, maxOff, err := c.QueueOffsets(t.Context(), q)
	require.NoError(t, err)
	assert.Equal(t, int64(0), minOff)
	assert.Equal(t, int64(3), maxOff)
	assert.Equal(t, "g", c.Group())
}

func TestSeekByTime(t *testing.T) {
	b, p, c := pullSetup(t, 1)
	ts := int64(1_000_000)
	b.configure(func(b *fakeBroker) { b.now = func() int64 { ts += 1000; return ts } }) // 1001000, 1002000, ...
	for range 4 {
		_, err := p.Send(t.Context(), &Message{Topic: "T", Body: []byte("x")})
		require.NoError(t, err)
	}
	queues, err := c.Queues(t.Context(), "T")
	require.NoError(t, err)
	for _, tt := range []struct {
		ms   int64
		want int64
	}{{0, 0}, {1_001_000, 0}, {1_001_001, 1}, {1_002_500, 2}, {1_004_000, 3}, {9_999_999, 4}} {
		off, err := c.SeekByTime(t.Context(), queues[0], time.UnixMilli(tt.ms))
		require.NoError(t, err)
		assert.Equal(t, tt.want, off, "at %d", tt.ms)
	}
}

func TestMessageExtInflatesCompressedBody(t *testing.T) {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	_, err := w.Write([]byte("large body"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	m := &message.Message{
		Topic: "T", Body: z.Bytes(), SysFlag: message.FlagCompressed,
		StoreHost: netip.MustParseAddrPort("10.1.2.3:10911"), PhysicalOffset: 77,
	}
	rec, err := message.Append(nil, m, true)
	require.NoError(t, err)
	msgs, err := decodeRecords(append(rec, 1, 2, 3), Queue{BrokerName: "a"}, 1)
	require.Error(t, err, "trailing garbage is reported")
	require.Len(t, msgs, 1, "the records before it are kept")
	assert.Equal(t, []byte("large body"), msgs[0].Body)
	assert.Equal(t, z.Bytes(), msgs[0].Message.Body)
	assert.Equal(t, message.EncodeOffsetMsgID(m.StoreHost, 77), msgs[0].MsgID())
}

// More records than the response announced still decode, each its own.
func TestDecodeRecordsBeyondCount(t *testing.T) {
	var b []byte
	for i := range 5 {
		var err error
		b, err = message.Append(b, &message.Message{Topic: "T", QueueOffset: int64(i), Body: []byte{byte('a' + i)}}, true)
		require.NoError(t, err)
	}
	for _, count := range []int{0, 1, 2, 5, 9} {
		msgs, err := decodeRecords(b, Queue{BrokerName: "a"}, count)
		require.NoError(t, err)
		require.Len(t, msgs, 5)
		for i, m := range msgs {
			assert.Equal(t, []byte{byte('a' + i)}, m.Body, "count %d", count)
			assert.Equal(t, int64(i), m.QueueOffset)
		}
	}
}
