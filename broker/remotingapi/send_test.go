package remotingapi_test

import (
	"bytes"
	"compress/zlib"
	"io"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/remotingapi"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

// The official producer's SEND_MESSAGE is stored, answered as a Java
// broker answers it, and a push consumer's PULL_MESSAGE returns exactly
// the stored record with the offsets the answer told.
func TestSendThenPullGolden(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 4)
	cl := e.dial(t, nil)

	resp := invoke(t, cl, golden(t, "frame_send_request", nil)) // T queue 1, TAGS TagA, KEYS "k1 k2", a UNIQ_KEY
	requireCode(t, remoting.ResSuccess, resp)
	host, phys, err := message.DecodeOffsetMsgID(resp.Ext("msgId"))
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddrPort(e.addr), host, "the offset id names the remoting address")
	assert.Equal(t, "1", resp.Ext("queueId"))
	assert.Equal(t, int64(0), extInt(t, resp, "queueOffset"))
	assert.Equal(t, "7F0000010D4B0000000005f5e1000001", resp.Ext("transactionId"))
	assert.Equal(t, "DefaultRegion", resp.Ext("MSG_REGION"))
	assert.Equal(t, "false", resp.Ext("TRACE_ON"))

	e.waitVisible(t, "T", 1, 1)
	pull := invoke(t, cl, pullReq(t, "T", 1, 0, nil))
	requireCode(t, remoting.ResSuccess, pull)
	assert.Equal(t, e.record(t, phys), pull.Body, "the body is the stored record, byte for byte")
	assert.Equal(t, int64(1), extInt(t, pull, "nextBeginOffset"))
	assert.Equal(t, int64(0), extInt(t, pull, "minOffset"))
	assert.Equal(t, int64(1), extInt(t, pull, "maxOffset"))
	assert.Equal(t, int64(0), extInt(t, pull, "suggestWhichBrokerId"))
	ms := decodeAll(t, pull.Body)
	require.Len(t, ms, 1)
	m := ms[0]
	assert.Equal(t, "hello, rocketmq", string(m.Body))
	assert.Equal(t, "TagA", m.Tags())
	assert.Equal(t, []string{"k1", "k2"}, m.Keys())
	assert.Equal(t, "7F0000010D4B0000000005f5e1000001", m.UniqKey())
	assert.Equal(t, int64(0), m.QueueOffset)
	assert.Equal(t, phys, m.PhysicalOffset)
	assert.Equal(t, int64(1795988746601), m.BornTimestamp)
	assert.Equal(t, resp.Ext("msgId"), m.OffsetMsgID())
	assert.True(t, m.BornHost.Addr().Is4(), "an IPv4 peer is stored as IPv4: %s", m.BornHost)
}

// A zlib-compressed body (sysFlag 1) is stored as sent, the flag kept, so
// the Go consumer inflates it.
func TestSendCompressedGolden(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 4)
	cl := e.dial(t, nil)
	req := golden(t, "frame_send_compressed_request", nil)
	resp := invoke(t, cl, req)
	requireCode(t, remoting.ResSuccess, resp)
	_, phys, err := message.DecodeOffsetMsgID(resp.Ext("msgId"))
	require.NoError(t, err)
	m, _, err := message.Decode(e.record(t, phys))
	require.NoError(t, err)
	assert.Equal(t, int32(message.FlagCompressed), m.SysFlag&message.FlagCompressed)
	assert.Equal(t, req.Body, m.Body)
	zr, err := zlib.NewReader(bytes.NewReader(m.Body))
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Len(t, plain, 5000)
}

// Errors get the codes the Go producer acts on: 17 (retried elsewhere)
// for an unknown topic, 13 (not retried) for a bad message, 16 for a
// system topic and for transactions, 29 for a broken header; the
// connection stays usable.
func TestSendErrors(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 2)
	cl := e.dial(t, nil)
	tests := []struct {
		name string
		req  *remoting.Command
		want remoting.ResponseCode
	}{
		{"unknown topic", golden(t, "frame_send_request", map[string]string{"topic": "Nope"}), remoting.ResTopicNotExist},
		{"empty body", request(remoting.ReqSendMessage, map[string]string{"topic": "T", "queueId": "0"}, nil), remoting.ResMessageIllegal},
		{"queue out of range", golden(t, "frame_send_request", map[string]string{"queueId": "7"}), remoting.ResMessageIllegal},
		{"system topic", golden(t, "frame_send_request", map[string]string{"topic": broker.ScheduleTopic}), remoting.ResNoPermission},
		{"transaction", golden(t, "frame_send_request", map[string]string{"sysFlag": "4"}), remoting.ResNoPermission},
		{"TRAN_MSG", golden(t, "frame_send_request", map[string]string{"properties": "TRAN_MSG\x01true\x02PGROUP\x01PG\x02"}), remoting.ResNoPermission},
		{"bad number", golden(t, "frame_send_request", map[string]string{"queueId": "one"}), remoting.ResInvalidParameter},
		{"no topic", golden(t, "frame_send_request", map[string]string{"topic": ""}), remoting.ResInvalidParameter},
		{"bad topic name", golden(t, "frame_send_request", map[string]string{"topic": "a b"}), remoting.ResInvalidParameter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := invoke(t, cl, tt.req)
			requireCode(t, tt.want, resp)
			assert.NotEmpty(t, resp.Remark)
		})
	}
	requireCode(t, remoting.ResSuccess, invoke(t, cl, golden(t, "frame_send_request", map[string]string{"queueId": "0"})))
}

// With autoCreateTopicEnable, the first send to an unknown topic (the Go
// producer routes it by TBW102) creates it.
func TestSendAutoCreates(t *testing.T) {
	e := newEnv(t, func(bc *broker.Config, _ *remotingapi.Config) { bc.AutoCreateTopicEnable = true })
	cl := e.dial(t, nil)
	requireCode(t, remoting.ResSuccess, invoke(t, cl, golden(t, "frame_send_request", map[string]string{"topic": "Fresh"})))
	tc, ok := e.b.Topic("Fresh")
	require.True(t, ok)
	assert.Equal(t, int32(broker.DefaultTopicQueueNums), tc.WriteQueueNums)
}

// SEND_MESSAGE_V2 has the one-letter names of the batch header.
func TestSendMessageV2(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 2)
	cl := e.dial(t, nil)
	resp := invoke(t, cl, request(remoting.ReqSendMessageV2, map[string]string{
		"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000", "h": "7",
		"i": "TAGS\x01X\x02", "j": "0", "k": "false", "l": "0", "m": "false",
	}, []byte("v2")))
	requireCode(t, remoting.ResSuccess, resp)
	_, phys, err := message.DecodeOffsetMsgID(resp.Ext("msgId"))
	require.NoError(t, err)
	m, _, err := message.Decode(e.record(t, phys))
	require.NoError(t, err)
	assert.Equal(t, "v2", string(m.Body))
	assert.Equal(t, int32(1), m.QueueID)
	assert.Equal(t, int32(7), m.Flag)
	assert.Equal(t, "X", m.Tags())
	assert.NotEmpty(t, m.UniqKey(), "the broker adds a missing UNIQ_KEY")
	assert.Equal(t, m.UniqKey(), resp.Ext("transactionId"))
}

// A batch as the Go producer encodes it (no UNIQ_KEY inside) is stored as
// consecutive messages of one queue, each given a UNIQ_KEY; the answer
// lists every offset id, comma-separated. A malformed batch body is
// MESSAGE_ILLEGAL, and the connection stays usable.
func TestSendBatch(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 2)
	cl := e.dial(t, nil)
	var entries [][3]string // flag is 0; body, tag, key
	for _, s := range []string{"a", "b", "c"} {
		entries = append(entries, [3]string{"body-" + s, "Tag" + s, "key-" + s})
	}
	body := batchBody(entries)
	header := map[string]string{"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000",
		"h": "0", "i": "", "j": "0", "k": "false", "l": "0", "m": "true", "n": "broker-a"}
	resp := invoke(t, cl, request(remoting.ReqSendBatchMessage, header, body))
	requireCode(t, remoting.ResSuccess, resp)
	ids := strings.Split(resp.Ext("msgId"), ",")
	require.Len(t, ids, 3)
	assert.Len(t, strings.Split(resp.Ext("transactionId"), ","), 3)
	assert.Equal(t, "1", resp.Ext("queueId"))
	assert.Equal(t, int64(0), extInt(t, resp, "queueOffset"))
	uniq := map[string]bool{}
	for i, id := range ids {
		_, phys, err := message.DecodeOffsetMsgID(id)
		require.NoError(t, err)
		m, _, err := message.Decode(e.record(t, phys))
		require.NoError(t, err)
		assert.Equal(t, entries[i][0], string(m.Body))
		assert.Equal(t, entries[i][1], m.Tags())
		assert.Equal(t, []string{entries[i][2]}, m.Keys())
		assert.Equal(t, int64(i), m.QueueOffset)
		assert.Equal(t, int32(1), m.QueueID)
		assert.NotEmpty(t, m.UniqKey())
		uniq[m.UniqKey()] = true
	}
	assert.Len(t, uniq, 3, "every message gets its own UNIQ_KEY")

	for name, bad := range map[string][]byte{
		"truncated":        body[:len(body)-3],
		"size too large":   append([]byte{0x7f, 0, 0, 0}, body[4:]...),
		"garbage":          []byte("not a batch at all"),
		"empty":            nil,
		"lengths disagree": append(append([]byte(nil), body[:16]...), append([]byte{0, 0, 0x10, 0}, body[20:]...)...),
	} {
		t.Run(name, func(t *testing.T) {
			resp := invoke(t, cl, request(remoting.ReqSendBatchMessage, header, bad))
			requireCode(t, remoting.ResMessageIllegal, resp)
		})
	}
	requireCode(t, remoting.ResSuccess, invoke(t, cl, request(remoting.ReqSendBatchMessage, header, body)))
	header["b"] = "%RETRY%CG"
	requireCode(t, remoting.ResMessageIllegal, invoke(t, cl, request(remoting.ReqSendBatchMessage, header, body)))
}

// batchBody encodes a batch body as the Go client's MarshalMessageBatch.
func batchBody(entries [][3]string) []byte {
	var b []byte
	for _, e := range entries {
		props := message.AppendProperties(nil, message.Properties{{Key: message.PropTags, Value: e[1]}, {Key: message.PropKeys, Value: e[2]}})
		size := 20 + len(e[0]) + 2 + len(props)
		b = append(b, byte(size>>24), byte(size>>16), byte(size>>8), byte(size))
		b = append(b, make([]byte, 12)...) // magic, body CRC, flag
		b = append(b, byte(len(e[0])>>24), byte(len(e[0])>>16), byte(len(e[0])>>8), byte(len(e[0])))
		b = append(b, e[0]...)
		b = append(b, byte(len(props)>>8), byte(len(props)))
		b = append(b, props...)
	}
	return b
}
