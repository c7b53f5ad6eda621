package gantryv1

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// AppendMarshal writes the bytes proto.Marshal does, and MarshalSize
// declines what it cannot write.
func TestSendResponseAppendMarshalMatchesProto(t *testing.T) {
	withUnknown := &SendResponse{Results: []*SendResult{{QueueId: 1}}}
	withUnknown.Results[0].ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7))
	for _, tt := range []struct {
		name    string
		in      *SendResponse
		refused bool // MarshalSize says false
	}{
		{name: "empty", in: &SendResponse{}},
		{name: "results", in: &SendResponse{RequestId: 9, Results: []*SendResult{
			{MsgId: "0A0000010000271B0000000000000010", QueueId: 3, QueueOffset: 41, PhysicalOffset: 16, StoreTimestampMs: 1764460800000},
			{MsgId: "0A0000010000271B00000000000004F0", UniqKey: "U1", QueueId: 3, QueueOffset: 7, PhysicalOffset: 1264, Duplicate: true},
			{},
		}}},
		{name: "negative and extreme values", in: &SendResponse{RequestId: math.MaxUint64, Results: []*SendResult{
			{QueueId: -1, QueueOffset: math.MinInt64, PhysicalOffset: math.MaxInt64, StoreTimestampMs: -5},
		}}},
		{name: "a result of 200 bytes", in: &SendResponse{Results: []*SendResult{{UniqKey: string(make([]byte, 200))}}}},
		{name: "error", in: &SendResponse{RequestId: 2, Error: &Error{Code: 14, Message: "unavailable", Indeterminate: true}}},
		{name: "negative error code", in: &SendResponse{Error: &Error{Code: -3}}},
		{name: "empty error", in: &SendResponse{Error: &Error{}}},
		{name: "invalid UTF-8 key", in: &SendResponse{Results: []*SendResult{{UniqKey: "\xff"}}}, refused: true},
		{name: "invalid UTF-8 error", in: &SendResponse{Error: &Error{Message: "\xff"}}, refused: true},
		{name: "nil result", in: &SendResponse{Results: []*SendResult{nil}}, refused: true},
		{name: "unknown field", in: withUnknown, refused: true},
	} {
		t.Run(tt.name, func(t *testing.T) { checkAppendMarshal(t, tt.in, tt.refused) })
	}
}

// Whatever a broker puts in a response, AppendMarshal writes proto.Marshal's
// bytes, or MarshalSize declines it.
func FuzzSendResponseAppendMarshal(f *testing.F) {
	f.Add("0A0000010000271B0000000000000010", "U1", int32(3), int64(41), int64(16), int64(1764460800000), true, uint64(9), int32(0), "", false)
	f.Add("", "", int32(-1), int64(-1), int64(0), int64(0), false, uint64(0), int32(14), "unavailable", true)
	f.Fuzz(func(t *testing.T, msgID, uniq string, qid int32, qoff, phys, ts int64, dup bool, reqID uint64, code int32, msg string, indet bool) {
		in := &SendResponse{RequestId: reqID, Results: []*SendResult{
			{MsgId: msgID, UniqKey: uniq, QueueId: qid, QueueOffset: qoff, PhysicalOffset: phys, StoreTimestampMs: ts, Duplicate: dup},
			{MsgId: uniq, QueueOffset: ts},
		}}
		if code != 0 || msg != "" || indet {
			in.Error = &Error{Code: code, Message: msg, Indeterminate: indet}
		}
		fuzzAppendMarshal(t, in)
	})
}

// BenchmarkMarshalSendResponse encodes the answer to a request of 64
// messages with proto.Marshal and with AppendMarshal.
//
//	go test -run=^$ -bench=MarshalSendResponse -benchmem ./api/gantry/v1
func BenchmarkMarshalSendResponse(b *testing.B) {
	resp := &SendResponse{RequestId: 1}
	for i := range 64 {
		resp.Results = append(resp.Results, &SendResult{MsgId: "0A0000010000271B0000000000000010", QueueId: 3,
			QueueOffset: int64(1000 + i), PhysicalOffset: int64(1 << 30), StoreTimestampMs: 1764460800000})
	}
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			opts := proto.MarshalOptions{UseCachedSize: true}
			buf, err = opts.MarshalAppend(buf[:0], resp)
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			if _, ok := resp.MarshalSize(); !ok {
				b.Fatal("declined")
			}
			buf = resp.AppendMarshal(buf[:0])
		}
	})
}

// A PullResponse's encoding is proto.Marshal's, whether its records come
// in one slice or in parts.
func TestPullResponseAppendMarshalMatchesProto(t *testing.T) {
	withUnknown := &PullResponse{Status: PullStatus_PULL_STATUS_FOUND}
	withUnknown.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7))
	_, ok := withUnknown.MarshalSize()
	assert.False(t, ok, "unknown fields: proto.Marshal writes them")
	for _, tt := range []struct {
		name  string
		in    *PullResponse
		parts [][]byte
	}{
		{name: "empty", in: &PullResponse{}},
		{name: "found", in: &PullResponse{Status: PullStatus_PULL_STATUS_FOUND, Records: []byte("abcdefgh"), RecordCount: 2, NextOffset: 42, MinOffset: 0, MaxOffset: 1 << 40},
			parts: [][]byte{[]byte("abc"), nil, []byte("defgh")}},
		{name: "no records", in: &PullResponse{Status: PullStatus_PULL_STATUS_NO_NEW_MESSAGE, NextOffset: 7, MinOffset: 3, MaxOffset: 7}},
		{name: "large records", in: &PullResponse{Status: PullStatus_PULL_STATUS_FOUND, Records: make([]byte, 300_000), RecordCount: 256},
			parts: [][]byte{make([]byte, 100_000), make([]byte, 200_000)}},
		{name: "negative values", in: &PullResponse{Status: -1, RecordCount: -2, NextOffset: math.MinInt64, MinOffset: -1, MaxOffset: math.MaxInt64}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want, err := proto.Marshal(tt.in)
			require.NoError(t, err)
			size, ok := tt.in.MarshalSize()
			require.True(t, ok)
			assert.Equal(t, len(want), size)
			assert.Equal(t, want, append([]byte{}, tt.in.AppendMarshal(nil)...))
			if tt.parts == nil {
				tt.parts = [][]byte{tt.in.Records}
			}
			hdr := &PullResponse{Status: tt.in.Status, RecordCount: tt.in.RecordCount, NextOffset: tt.in.NextOffset, MinOffset: tt.in.MinOffset, MaxOffset: tt.in.MaxOffset}
			n := len(tt.in.Records)
			assert.Equal(t, len(want), hdr.SizeWithRecords(n))
			appendParts := func(b []byte) []byte {
				for _, p := range tt.parts {
					b = append(b, p...)
				}
				return b
			}
			assert.Equal(t, append([]byte("prefix"), want...), hdr.AppendMarshalFunc([]byte("prefix"), n, appendParts))
		})
	}
}

// Whatever a broker answers a pull with, AppendMarshal writes proto.Marshal's
// bytes.
func FuzzPullResponseAppendMarshal(f *testing.F) {
	f.Add(int32(1), []byte("records"), int32(2), int64(3), int64(0), int64(-1))
	f.Fuzz(func(t *testing.T, status int32, records []byte, count int32, next, lo, hi int64) {
		in := &PullResponse{Status: PullStatus(status), Records: records, RecordCount: count, NextOffset: next, MinOffset: lo, MaxOffset: hi}
		want, err := proto.Marshal(in)
		require.NoError(t, err)
		size, ok := in.MarshalSize()
		require.True(t, ok)
		require.Equal(t, len(want), size)
		require.Equal(t, want, append([]byte{}, in.AppendMarshal(nil)...))
	})
}

// AppendMarshal writes the bytes proto.Marshal does, and MarshalSize
// declines what it cannot write.
func TestSendBackBatchRequestAppendMarshalMatchesProto(t *testing.T) {
	withUnknown := &SendBackBatchRequest{Requests: []*SendBackRequest{{Group: "G"}}}
	withUnknown.Requests[0].ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7))
	for _, tt := range []struct {
		name    string
		in      *SendBackBatchRequest
		refused bool
	}{
		{name: "empty", in: &SendBackBatchRequest{}},
		{name: "requests", in: &SendBackBatchRequest{Requests: []*SendBackRequest{
			{Group: "billing", PhysicalOffset: 1 << 33, MaxReconsumeTimes: 16, Reason: "handler failed: timeout"},
			{Group: "billing", MsgId: "0A0000010000271B0000000000000010", PhysicalOffset: 16, DelayLevel: 3},
			{},
		}}},
		{name: "negative and extreme values", in: &SendBackBatchRequest{Requests: []*SendBackRequest{
			{DelayLevel: -1, MaxReconsumeTimes: math.MinInt32, PhysicalOffset: math.MaxInt64},
			{PhysicalOffset: -1, DelayLevel: math.MaxInt32},
		}}},
		{name: "a request of 200 bytes", in: &SendBackBatchRequest{Requests: []*SendBackRequest{{Reason: string(make([]byte, 200))}}}},
		{name: "invalid UTF-8 group", in: &SendBackBatchRequest{Requests: []*SendBackRequest{{Group: "\xff"}}}, refused: true},
		{name: "invalid UTF-8 reason", in: &SendBackBatchRequest{Requests: []*SendBackRequest{{Reason: "\xff"}}}, refused: true},
		{name: "nil request", in: &SendBackBatchRequest{Requests: []*SendBackRequest{nil}}, refused: true},
		{name: "unknown field", in: withUnknown, refused: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !checkAppendMarshal(t, tt.in, tt.refused) {
				return
			}
			var back SendBackBatchRequest
			require.NoError(t, back.UnmarshalOwned(tt.in.AppendMarshal(nil)))
			assert.True(t, proto.Equal(tt.in, &back), "the broker's decoder reads it back")
		})
	}
}

// Whatever a consumer puts in a send-back call, AppendMarshal writes
// proto.Marshal's bytes, or MarshalSize declines it.
func FuzzSendBackBatchRequestAppendMarshal(f *testing.F) {
	f.Add("billing", "", int64(1<<33), int32(0), int32(16), "handler failed")
	f.Add("", "0A0000010000271B0000000000000010", int64(-1), int32(-1), int32(-5), "\xff")
	f.Fuzz(func(t *testing.T, group, msgID string, phys int64, level, maxTimes int32, reason string) {
		in := &SendBackBatchRequest{Requests: []*SendBackRequest{
			{Group: group, MsgId: msgID, PhysicalOffset: phys, DelayLevel: level, MaxReconsumeTimes: maxTimes, Reason: reason},
			{Group: reason, PhysicalOffset: int64(level)},
		}}
		fuzzAppendMarshal(t, in)
	})
}

// appendMarshaler is a message with a reflection-free encoder.
type appendMarshaler interface {
	proto.Message
	MarshalSize() (int, bool)
	AppendMarshal(b []byte) []byte
}

// checkAppendMarshal checks that in's AppendMarshal writes what
// proto.Marshal does (also after a prefix) and MarshalSize its length, or,
// when refused, that MarshalSize declines in. It reports whether in was
// encoded.
func checkAppendMarshal(t *testing.T, in appendMarshaler, refused bool) bool {
	t.Helper()
	size, ok := in.MarshalSize()
	if refused {
		assert.False(t, ok)
		return false
	}
	require.True(t, ok)
	want, err := proto.Marshal(in)
	require.NoError(t, err)
	assert.Equal(t, len(want), size, "MarshalSize")
	assert.Equal(t, want, append([]byte{}, in.AppendMarshal(nil)...))
	assert.Equal(t, append([]byte("prefix"), want...), in.AppendMarshal([]byte("prefix")), "appends")
	return true
}

// fuzzAppendMarshal fails when MarshalSize declines what proto.Marshal
// encodes, accepts what it refuses, or AppendMarshal writes other bytes.
func fuzzAppendMarshal(t *testing.T, in appendMarshaler) {
	t.Helper()
	want, err := proto.Marshal(in)
	size, ok := in.MarshalSize()
	if !ok {
		if err == nil {
			t.Fatalf("MarshalSize declined what proto.Marshal encodes: %v", in)
		}
		return
	}
	if err != nil {
		t.Fatalf("proto.Marshal refused what MarshalSize accepted: %v", err)
	}
	if got := in.AppendMarshal(nil); size != len(want) || string(got) != string(want) {
		t.Fatalf("size %d, encoding %x; proto: %d, %x", size, got, len(want), want)
	}
}

// AppendRecordsKey, the records and AppendFieldsAfterRecords make an
// encoding that proto.Unmarshal reads as the request with its records in
// one element.
func TestSendRequestAppendAroundRecords(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   *SendRequest
	}{
		{name: "all fields", in: &SendRequest{Topic: "Orders", ProducerGroup: "G", RequestId: 42, Attempt: 1, Records: [][]byte{[]byte("abcdefgh")}}},
		{name: "a retry", in: &SendRequest{Topic: "Orders", RequestId: 7, Attempt: math.MaxUint32, Records: [][]byte{[]byte("abcdefgh")}}},
		{name: "no group, unary", in: &SendRequest{Topic: "T", Records: [][]byte{[]byte("x")}}},
		{name: "large records and id", in: &SendRequest{Topic: strings.Repeat("t", 127), ProducerGroup: "g", RequestId: math.MaxUint64, Records: [][]byte{make([]byte, 300_000)}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			recs := tt.in.Records[0]
			b := AppendRecordsKey([]byte("prefix"), len(recs))
			b = append(b, recs...)
			b = tt.in.AppendFieldsAfterRecords(b)
			var got SendRequest
			require.NoError(t, proto.Unmarshal(b[len("prefix"):], &got))
			assert.True(t, proto.Equal(tt.in, &got), "got %v", &got)
		})
	}
}
