package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
)

func TestSendPullRoundTrip(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "Orders", 4)
	var msgs []*message.Message
	for i := range 5 {
		m := newMsg("Orders", 2, fmt.Sprintf("body-%d", i), []string{"TagA", "TagB"}[i%2])
		m.Properties = append(m.Properties,
			message.Property{Key: message.PropKeys, Value: fmt.Sprintf("k%d order", i)},
			message.Property{Key: "color", Value: "blue"})
		msgs = append(msgs, m)
	}
	res, err := b.Send(t.Context(), "Orders", msgs)
	require.NoError(t, err)
	require.Len(t, res, 5)
	for i, r := range res {
		assert.Equal(t, int32(2), r.QueueID)
		assert.Equal(t, int64(i), r.QueueOffset)
		assert.NotEmpty(t, r.MsgID)
		assert.NotEmpty(t, r.UniqKey)
	}
	waitVisible(t, b, "Orders", 2, 5)

	pr, got := pull(t, b, broker.PullRequest{Group: "G", Topic: "Orders", QueueID: 2, MaxMsgs: 10})
	assert.Equal(t, store.Found, pr.Status)
	assert.Equal(t, int64(5), pr.NextOffset)
	assert.Equal(t, int64(0), pr.MinOffset)
	assert.Equal(t, int64(5), pr.MaxOffset)
	require.Len(t, got, 5)
	for i, m := range got {
		assert.Equal(t, fmt.Sprintf("body-%d", i), string(m.Body))
		assert.Equal(t, msgs[i].Tags(), m.Tags())
		assert.Equal(t, []string{fmt.Sprintf("k%d", i), "order"}, m.Keys())
		color, _ := m.Properties.Get("color")
		assert.Equal(t, "blue", color)
		assert.Equal(t, res[i].UniqKey, m.UniqKey())
		assert.Equal(t, res[i].PhysicalOffset, m.PhysicalOffset)
	}

	// From the middle, bounded by MaxMsgs.
	pr, got = pull(t, b, broker.PullRequest{Topic: "Orders", QueueID: 2, Offset: 3, MaxMsgs: 1})
	assert.Equal(t, []string{"body-3"}, bodies(got))
	assert.Equal(t, int64(4), pr.NextOffset)
	// At the end: nothing new.
	pr, _ = pull(t, b, broker.PullRequest{Topic: "Orders", QueueID: 2, Offset: 5})
	assert.Equal(t, store.OffsetOverflowOne, pr.Status)
	// Keys are indexed.
	found, err := b.Store().MessagesByKey("Orders", "k3", 0, 1<<62, 10)
	require.NoError(t, err)
	require.Len(t, found, 1)
	assert.Equal(t, "body-3", string(found[0].Body))
	assert.Equal(t, int64(5), b.Status().MessagesPut)
	assert.Equal(t, int64(6), b.Status().MessagesGot)
}

func TestSendBrokerPicksQueueRoundRobin(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "RR", 3)
	var queues []int32
	for i := range 6 {
		m := newMsg("RR", broker.BrokerPicksQueue, fmt.Sprint(i), "")
		res := send(t, b, m)
		assert.Equal(t, int32(broker.BrokerPicksQueue), m.QueueID, "the caller's message is not modified")
		queues = append(queues, res[0].QueueID)
	}
	assert.Equal(t, []int32{0, 1, 2, 0, 1, 2}, queues)

	res := send(t, b, newMsg("RR", -1, "a", ""), newMsg("RR", -1, "b", ""), newMsg("RR", 2, "c", ""))
	assert.Equal(t, []int32{0, 1, 2}, []int32{res[0].QueueID, res[1].QueueID, res[2].QueueID})
}

func TestSendValidation(t *testing.T) {
	cfg := testConfig(t)
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 2)
	require.NoError(t, b.CreateOrUpdateTopic(metadata.TopicConfig{TopicName: "ReadOnly", ReadQueueNums: 1, WriteQueueNums: 1, Perm: metadata.PermRead}))
	withProps := func(n int) *message.Message {
		m := newMsg("T", 0, "x", "")
		m.Properties = message.Properties{{Key: "p", Value: strings.Repeat("v", n)}}
		return m
	}
	tests := []struct {
		name    string
		topic   string
		msgs    []*message.Message
		wantErr error
		wantMsg string
	}{
		{"bad topic name", "a b", []*message.Message{newMsg("a b", 0, "x", "")}, broker.ErrInvalidTopic, `topic name "a b"`},
		{"topic too long", strings.Repeat("t", 128), []*message.Message{newMsg("T", 0, "x", "")}, broker.ErrInvalidTopic, "1 to 127"},
		{"unknown topic", "Nope", []*message.Message{newMsg("Nope", 0, "x", "")}, broker.ErrTopicNotFound, `"Nope" (autoCreateTopicEnable is off)`},
		{"reserved topic", "TBW102", []*message.Message{newMsg("TBW102", 0, "x", "")}, broker.ErrReservedTopic, `"TBW102"`},
		{"system topic", "rmq_sys_trace", []*message.Message{newMsg("rmq_sys_trace", 0, "x", "")}, broker.ErrReservedTopic, "rmq_sys_trace"},
		{"not writable", "ReadOnly", []*message.Message{newMsg("ReadOnly", 0, "x", "")}, broker.ErrNoPermission, `"ReadOnly" is not writable`},
		{"no messages", "T", nil, broker.ErrInvalidMessage, "no messages"},
		{"nil message", "T", []*message.Message{nil}, broker.ErrInvalidMessage, "nil message"},
		{"other topic", "T", []*message.Message{newMsg("U", 0, "x", "")}, broker.ErrInvalidMessage, `message is for topic "U"`},
		{"empty body", "T", []*message.Message{newMsg("T", 0, "", "")}, broker.ErrInvalidMessage, "body is empty"},
		{"body too big", "T", []*message.Message{newMsg("T", 0, strings.Repeat("x", 4<<20+1), "")}, broker.ErrInvalidMessage, "body is 4194305 bytes, at most 4194304"},
		{"queue too big", "T", []*message.Message{newMsg("T", 2, "x", "")}, broker.ErrInvalidMessage, "queue id 2: topic \"T\" has write queues 0..1"},
		{"queue negative", "T", []*message.Message{newMsg("T", -2, "x", "")}, broker.ErrInvalidMessage, "queue id -2"},
		{"properties over limit", "T", []*message.Message{withProps(32 << 10)}, broker.ErrInvalidMessage, "properties are 32771 bytes encoded, at most 32768"},
		{"properties over record", "T", []*message.Message{withProps(32710)}, broker.ErrInvalidMessage, "the record format leaves room for"},
		{"separator in property", "T", []*message.Message{withProps(0), {Topic: "T", Body: []byte("x"), Properties: message.Properties{{Key: "a\x01", Value: "v"}}}}, broker.ErrInvalidMessage, "message 1: "},
		{"second message bad", "T", []*message.Message{newMsg("T", 0, "x", ""), newMsg("T", 0, "", "")}, broker.ErrInvalidMessage, "message 1: broker: invalid message: body is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := b.Send(t.Context(), tt.topic, tt.msgs)
			require.ErrorIs(t, err, tt.wantErr)
			assert.ErrorContains(t, err, tt.wantMsg)
			assert.False(t, broker.IsIndeterminate(err))
			assert.Nil(t, res)
		})
	}
	assert.Equal(t, int64(0), b.Status().MaxLogOffset, "nothing was stored")
}

func TestSendAutoCreate(t *testing.T) {
	cfg := testConfig(t)
	cfg.AutoCreateTopicEnable, cfg.DefaultTopicQueueNums = true, 3
	var changes int
	cfg.OnTopicsChanged = func() { changes++ }
	b := openBroker(t, cfg)
	res := send(t, b, newMsg("Fresh", -1, "x", ""))
	tc, ok := b.Topic("Fresh")
	require.True(t, ok)
	assert.Equal(t, int32(3), tc.ReadQueueNums)
	assert.Equal(t, int32(3), tc.WriteQueueNums)
	assert.Equal(t, int32(metadata.PermRead|metadata.PermWrite), tc.Perm)
	assert.Equal(t, int32(0), res[0].QueueID)
	assert.Equal(t, 1, changes)

	send(t, b, newMsg(broker.RetryTopic("G"), 0, "x", ""))
	tc, ok = b.Topic("%RETRY%G")
	require.True(t, ok)
	assert.Equal(t, int32(1), tc.WriteQueueNums, "a group topic gets one queue")

	_, err := b.Send(t.Context(), "TBW102", []*message.Message{newMsg("TBW102", 0, "x", "")})
	require.ErrorIs(t, err, broker.ErrReservedTopic, "reserved topics are not auto-created")

	cfg = testConfig(t)
	off := openBroker(t, cfg)
	_, err = off.Send(t.Context(), "Fresh", []*message.Message{newMsg("Fresh", -1, "x", "")})
	require.ErrorIs(t, err, broker.ErrTopicNotFound)
	_, ok = off.Topic("Fresh")
	assert.False(t, ok)
}

func TestSendSyncFlush(t *testing.T) {
	cfg := testConfig(t)
	cfg.FlushDiskType = commitlog.SyncFlush
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)
	res := send(t, b, newMsg("T", 0, "durable", ""))
	assert.GreaterOrEqual(t, b.Status().FlushedOffset, res[0].PhysicalOffset+1)
}

func TestIsIndeterminate(t *testing.T) {
	stored := []store.PutResult{{QueueOffset: 1}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"flush timeout", fmt.Errorf("x: %w", commitlog.ErrFlushTimeout), true},
		{"put: flush timeout", broker.PutError("T", stored, commitlog.ErrFlushTimeout), true},
		{"put: ctx ended after append", broker.PutError("T", stored, context.DeadlineExceeded), true},
		{"put: disk full", broker.PutError("T", nil, commitlog.ErrDiskFull), false},
		{"put: flush failed before append", broker.PutError("T", nil, commitlog.ErrFlushFailed), false},
		{"put: record too large", broker.PutError("T", nil, commitlog.ErrRecordTooLarge), false},
		{"put: closed", broker.PutError("T", nil, commitlog.ErrClosed), false},
		{"invalid message", broker.ErrInvalidMessage, false},
		{"no permission", broker.ErrNoPermission, false},
		{"topic missing", broker.ErrTopicNotFound, false},
		{"shutting down", broker.ErrShuttingDown, false},
		{"other", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, broker.IsIndeterminate(tt.err))
		})
	}
	assert.ErrorIs(t, broker.PutError("T", stored, commitlog.ErrFlushTimeout), commitlog.ErrFlushTimeout, "the cause stays visible")
	assert.ErrorIs(t, broker.PutError("T", nil, commitlog.ErrDiskFull), commitlog.ErrDiskFull)
	assert.ErrorIs(t, broker.PutError("T", nil, commitlog.ErrRecordTooLarge), broker.ErrInvalidMessage)
	assert.ErrorIs(t, broker.PutError("T", nil, commitlog.ErrClosed), broker.ErrShuttingDown)
}

func TestSendRecordLargerThanSegment(t *testing.T) {
	b := openBroker(t, testConfig(t)) // 64 KiB segments, 4 MiB max body
	createTopic(t, b, "T", 1)
	_, err := b.Send(t.Context(), "T", []*message.Message{newMsg("T", 0, strings.Repeat("x", 100<<10), "")})
	require.ErrorIs(t, err, broker.ErrInvalidMessage)
	assert.False(t, broker.IsIndeterminate(err))
}

func TestSendPropertiesAtRecordLimit(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 1)
	// Room left by the record format: 32767 - CRC tail (20) - generated
	// UNIQ_KEY pair (42) = 32705 bytes; "p" 0x01 value 0x02 is 3 + value.
	m := newMsg("T", 0, "x", "")
	m.Properties = message.Properties{{Key: "p", Value: strings.Repeat("v", 32702)}}
	send(t, b, m)
	waitVisible(t, b, "T", 0, 1)
	_, got := pull(t, b, broker.PullRequest{Topic: "T"})
	require.Len(t, got, 1)
	v, _ := got[0].Properties.Get("p")
	assert.Len(t, v, 32702)
}
