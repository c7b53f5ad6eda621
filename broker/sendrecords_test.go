package broker_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/message"
)

func encodeRecord(t *testing.T, m *message.Message, uniq string, sealed bool) []byte {
	t.Helper()
	var rec []byte
	var err error
	if sealed {
		rec, err = message.Append(nil, m, false) // no __CRC32# tail
	} else {
		rec, err = message.AppendUnsealed(nil, m, uniq)
	}
	require.NoError(t, err)
	return rec
}

// SendRecords stores records a producer encoded, with Send's checks made on
// the records themselves.
func TestSendRecords(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxPropertiesSize = 1024
	b := openBroker(t, cfg)
	createTopic(t, b, "Orders", 2)
	good := func(qid int32, body string) []byte {
		return encodeRecord(t, &message.Message{Topic: "Orders", QueueID: qid, Body: []byte(body),
			Properties: message.Properties{{Key: message.PropTags, Value: "TagA"}}}, "U-"+body, false)
	}
	chunk := append(good(0, "a"), good(1, "b")...)
	res, err := b.SendRecords(t.Context(), "Orders", [][]byte{chunk, good(-1, "c")})
	require.NoError(t, err)
	require.Len(t, res, 3)
	assert.Equal(t, []int32{0, 1}, []int32{res[0].QueueID, res[1].QueueID})
	assert.Equal(t, "U-c", res[2].UniqKey)
	m, err := b.Store().MessageByOffsetID(res[0].MsgID)
	require.NoError(t, err)
	assert.Equal(t, "a", string(m.Body))
	assert.Equal(t, "TagA", m.Tags())
	require.NoError(t, message.Check(mustRecord(t, b, res[1].PhysicalOffset), res[1].PhysicalOffset, true), "the broker sealed the CRC")

	tests := []struct {
		name string
		rec  []byte
		want string
	}{
		{"other topic", encodeRecord(t, &message.Message{Topic: "Other", Body: []byte("x")}, "U", false), `"Other"`},
		{"no CRC tail", encodeRecord(t, &message.Message{Topic: "Orders", Body: []byte("x"), Properties: message.Properties{{Key: message.PropUniqKey, Value: "U"}}}, "", true), "__CRC32#"},
		{"no UNIQ_KEY", encodeRecord(t, &message.Message{Topic: "Orders", Body: []byte("x")}, "", false), "UNIQ_KEY"},
		{"empty body", encodeRecord(t, &message.Message{Topic: "Orders"}, "U", false), "body is empty"},
		{"queue out of range", encodeRecord(t, &message.Message{Topic: "Orders", QueueID: 5, Body: []byte("x")}, "U", false), "queue id 5"},
		{"properties too large", encodeRecord(t, &message.Message{Topic: "Orders", Body: []byte("x"),
			Properties: message.Properties{{Key: "big", Value: strings.Repeat("p", 2000)}}}, "U", false), "properties"},
		{"garbage", []byte("not a record at all, just bytes"), "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.SendRecords(t.Context(), "Orders", [][]byte{tt.rec})
			require.ErrorIs(t, err, broker.ErrInvalidMessage)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func mustRecord(t *testing.T, b *broker.Broker, phys int64) []byte {
	t.Helper()
	r, _, err := b.Store().CommitLog().ReadRecord(phys)
	require.NoError(t, err)
	defer r.Release()
	return append([]byte(nil), r.B...)
}

// A send's records together are bounded by maxMessageSize plus one
// record's overhead (message.BatchLimit), whether they come as messages
// or as records, and the error names the limit.
func TestSendBatchBoundedByMaxMessageSize(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxMessageSize = 1000
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)
	msgs := func(n int) []*message.Message {
		out := make([]*message.Message, n)
		for i := range out {
			out[i] = newMsg("T", 0, strings.Repeat("x", 1000), "")
		}
		return out
	}
	records := func(n int) [][]byte {
		var chunk []byte
		for i, m := range msgs(n) {
			chunk = append(chunk, encodeRecord(t, m, "U"+strings.Repeat("k", i+1), false)...)
		}
		return [][]byte{chunk}
	}
	limit := message.BatchLimit(1000) // 34,009: a body of 1,000 and the most overhead
	const want = "more than the 34009 one send may carry (maxMessageSize 1000 plus 33009"

	_, err := b.Send(t.Context(), "T", msgs(40)) // 40 × 1,093 bytes
	require.ErrorIs(t, err, broker.ErrInvalidMessage)
	assert.ErrorContains(t, err, want)
	_, err = b.SendRecords(t.Context(), "T", records(40))
	require.ErrorIs(t, err, broker.ErrInvalidMessage)
	assert.ErrorContains(t, err, want)
	assert.Equal(t, int64(0), b.Status().MaxLogOffset, "nothing was stored")

	require.Less(t, 20*1200, limit)
	_, err = b.Send(t.Context(), "T", msgs(20))
	require.NoError(t, err)
	_, err = b.SendRecords(t.Context(), "T", records(20))
	require.NoError(t, err)
}
