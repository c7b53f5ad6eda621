package gantryv1

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// UnmarshalOwned decodes every request as proto.Unmarshal does, and the
// records of a request of records alias its input.
func TestUnmarshalOwnedMatchesProto(t *testing.T) {
	withUnknown := protowire.AppendTag(must(t, &SendRequest{Topic: "T", Records: [][]byte{[]byte("r")}}), 99, protowire.VarintType)
	withUnknown = protowire.AppendVarint(withUnknown, 7)
	for _, tt := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"records", must(t, &SendRequest{Topic: "Orders", ProducerGroup: "pg", RequestId: 42, Attempt: 2,
			Records: [][]byte{[]byte("first record"), {}, []byte("third")}})},
		{"messages", must(t, &SendRequest{Topic: "T", Messages: []*Message{{QueueId: 3, Body: []byte("b")}}})},
		{"messages and records", must(t, &SendRequest{Topic: "T", Messages: []*Message{{Body: []byte("b")}}, Records: [][]byte{[]byte("r")}})},
		{"unknown field", withUnknown},
		{"repeated scalar: the last wins", append(must(t, &SendRequest{Topic: "A", RequestId: 1}), must(t, &SendRequest{Topic: "B", RequestId: 2})...)},
		{"invalid UTF-8 topic", protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff, 0xfe})},
		{"truncated", must(t, &SendRequest{Topic: "Orders", Records: [][]byte{[]byte("record")}})[:10]},
		{"wrong wire type", protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.VarintType), 1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := matchProto(tt.in, &SendRequest{}, &SendRequest{Topic: "stale", Records: [][]byte{[]byte("stale")}})
			assert.NoError(t, err, "UnmarshalOwned and proto.Unmarshal disagree")
		})
	}

	in := must(t, &SendRequest{Topic: "T", Records: [][]byte{[]byte("aaaa"), []byte("bbbb")}})
	var r SendRequest
	require.NoError(t, r.UnmarshalOwned(in))
	require.Len(t, r.Records, 2)
	assert.Equal(t, "aaaa", string(r.Records[0]))
	assert.Same(t, &in[len(in)-4], &r.Records[1][0], "the records alias the input")
	assert.Equal(t, len(r.Records[0]), cap(r.Records[0]), "a record's capacity ends with it")
}

func FuzzUnmarshalOwned(f *testing.F) {
	f.Add([]byte(nil))
	f.Add(must(f, &SendRequest{Topic: "Orders", ProducerGroup: "pg", RequestId: 42, Attempt: 1, Records: [][]byte{[]byte("r1"), []byte("r2")}}))
	f.Add(must(f, &SendRequest{Topic: "T", Messages: []*Message{{Body: []byte("b")}}}))
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := matchProto(in, &SendRequest{}, &SendRequest{}); err != nil {
			t.Fatal(err)
		}
	})
}

// ownedMessage is a message with an UnmarshalOwned.
type ownedMessage interface {
	proto.Message
	UnmarshalOwned(b []byte) error
}

// matchProto decodes in into want with proto.Unmarshal and into got (which
// may hold stale fields) with UnmarshalOwned, from a copy, and says how
// the two differ: whether they fail, and what they decode.
func matchProto[M ownedMessage](in []byte, want, got M) error {
	wantErr := proto.Unmarshal(in, want)
	err := got.UnmarshalOwned(append([]byte(nil), in...))
	switch {
	case (err != nil) != (wantErr != nil):
		return fmt.Errorf("error %v, proto.Unmarshal's %v", err, wantErr)
	case err == nil && !proto.Equal(want, got):
		return fmt.Errorf("got %v, want %v", got, want)
	}
	return nil
}

// benchDecoders measures proto.Unmarshal of in from a buffer, as gRPC's
// codec does, and UnmarshalOwned from a copy of it, as Gantry's does.
func benchDecoders[M ownedMessage](b *testing.B, in []byte, newM func() M) {
	b.Run("decoder=proto", func(b *testing.B) {
		b.SetBytes(int64(len(in)))
		b.ReportAllocs()
		for b.Loop() {
			if err := proto.Unmarshal(in, newM()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoder=owned", func(b *testing.B) {
		b.SetBytes(int64(len(in)))
		b.ReportAllocs()
		for b.Loop() {
			if err := newM().UnmarshalOwned(append([]byte(nil), in...)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func must(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

// BenchmarkUnmarshalSendRequest decodes a request of 64 1 KiB records
// (what a producer's queue sender sends under load) with proto.Unmarshal
// from a buffer, as gRPC's codec does, and with UnmarshalOwned from a copy
// of the message, as the broker's does.
//
//	go test -run=^$ -bench=UnmarshalSendRequest -benchmem ./api/gantry/v1
func BenchmarkUnmarshalSendRequest(b *testing.B) {
	req := &SendRequest{Topic: "Orders", ProducerGroup: "pg", RequestId: 1}
	for range 64 {
		req.Records = append(req.Records, make([]byte, 1024))
	}
	in := must(b, req)
	benchDecoders(b, in, func() *SendRequest { return &SendRequest{} })
}

func TestSendResponseUnmarshalOwnedMatchesProto(t *testing.T) {
	full := &SendResponse{RequestId: 9, Results: []*SendResult{
		{MsgId: "0A0000010000271B0000000000000010", QueueId: 3, QueueOffset: 41, PhysicalOffset: 16, StoreTimestampMs: 1764460800000},
		{MsgId: "0A0000010000271B00000000000004F0", UniqKey: "U1", QueueId: 3, QueueOffset: -1, PhysicalOffset: 1264, Duplicate: true},
		{},
	}}
	badUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType),
		protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff}))
	for _, tt := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"results", must(t, full)},
		{"error", must(t, &SendResponse{RequestId: 2, Error: &Error{Code: 14, Message: "unavailable", Indeterminate: true}})},
		{"unknown field in a result", protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType),
			protowire.AppendVarint(protowire.AppendTag(nil, 12, protowire.VarintType), 1))},
		{"invalid UTF-8 msg_id", badUTF8},
		{"truncated", must(t, full)[:20]},
		{"a result's fields twice", append(must(t, &SendResponse{Results: []*SendResult{{QueueId: 1}}}),
			protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), must(t, &SendResult{QueueId: 2, MsgId: "x"}))...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := matchProto(tt.in, &SendResponse{}, &SendResponse{RequestId: 77, Results: []*SendResult{{MsgId: "stale"}}})
			assert.NoError(t, err, "UnmarshalOwned and proto.Unmarshal disagree")
		})
	}
}

func FuzzSendResponseUnmarshalOwned(f *testing.F) {
	f.Add([]byte(nil))
	f.Add(must(f, &SendResponse{RequestId: 9, Results: []*SendResult{{MsgId: "m", QueueId: 3, QueueOffset: 41, Duplicate: true}}}))
	f.Add(must(f, &SendResponse{Error: &Error{Code: 14, Message: "x"}}))
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := matchProto(in, &SendResponse{}, &SendResponse{}); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkUnmarshalSendResponse decodes the answer to a request of 64
// messages, as BenchmarkUnmarshalSendRequest does a request.
func BenchmarkUnmarshalSendResponse(b *testing.B) {
	resp := &SendResponse{RequestId: 1}
	for i := range 64 {
		resp.Results = append(resp.Results, &SendResult{MsgId: "0A0000010000271B0000000000000010", QueueId: 3,
			QueueOffset: int64(1000 + i), PhysicalOffset: int64(1 << 30), StoreTimestampMs: 1764460800000})
	}
	in := must(b, resp)
	benchDecoders(b, in, func() *SendResponse { return &SendResponse{} })
}

func TestPullResponseUnmarshalOwnedMatchesProto(t *testing.T) {
	full := &PullResponse{Status: PullStatus_PULL_STATUS_FOUND, Records: []byte("two records, back to back"), RecordCount: 2,
		NextOffset: 42, MinOffset: -1, MaxOffset: 1 << 40}
	for _, tt := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"found", must(t, full)},
		{"no records", must(t, &PullResponse{Status: PullStatus_PULL_STATUS_NO_NEW_MESSAGE, NextOffset: 7, MaxOffset: 7})},
		{"unknown field", protowire.AppendVarint(protowire.AppendTag(must(t, full), 99, protowire.VarintType), 1)},
		{"records twice: the last wins", append(must(t, full), must(t, &PullResponse{Records: []byte("other")})...)},
		{"truncated", must(t, full)[:12]},
		{"wrong wire type", protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := matchProto(tt.in, &PullResponse{}, &PullResponse{Records: []byte("stale"), NextOffset: 9})
			assert.NoError(t, err, "UnmarshalOwned and proto.Unmarshal disagree")
		})
	}

	in := must(t, full)
	var r PullResponse
	require.NoError(t, r.UnmarshalOwned(in))
	at := bytes.Index(in, full.Records)
	require.Positive(t, at)
	assert.Same(t, &in[at], &r.Records[0], "the records alias the input")
	assert.Equal(t, len(r.Records), cap(r.Records), "the records' capacity ends with them")
}

func FuzzPullResponseUnmarshalOwned(f *testing.F) {
	f.Add([]byte(nil))
	f.Add(must(f, &PullResponse{Status: PullStatus_PULL_STATUS_FOUND, Records: []byte("r"), RecordCount: 1, NextOffset: 1, MaxOffset: 1}))
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := matchProto(in, &PullResponse{}, &PullResponse{}); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkUnmarshalPullResponse decodes a pull of 256 1 KiB messages
// (the push consumer's default batch).
func BenchmarkUnmarshalPullResponse(b *testing.B) {
	resp := &PullResponse{Status: PullStatus_PULL_STATUS_FOUND, Records: make([]byte, 256*1200), RecordCount: 256,
		NextOffset: 1 << 20, MaxOffset: 1 << 21}
	in := must(b, resp)
	benchDecoders(b, in, func() *PullResponse { return &PullResponse{} })
}

func TestSendBackBatchRequestUnmarshalOwnedMatchesProto(t *testing.T) {
	full := &SendBackBatchRequest{Requests: []*SendBackRequest{
		{Group: "orders-consumers", PhysicalOffset: 1 << 33, MaxReconsumeTimes: 16},
		{Group: "orders-consumers", MsgId: "0A0000010000271B0000000000000010", PhysicalOffset: 16, DelayLevel: -1, Reason: "bad input"},
		{},
	}}
	badUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType),
		protowire.AppendBytes(protowire.AppendTag(nil, 6, protowire.BytesType), []byte{0xff}))
	for _, tt := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"requests", must(t, full)},
		{"unknown field in a request", protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType),
			protowire.AppendVarint(protowire.AppendTag(nil, 12, protowire.VarintType), 1))},
		{"unknown field", protowire.AppendVarint(protowire.AppendTag(must(t, full), 7, protowire.VarintType), 1)},
		{"invalid UTF-8 reason", badUTF8},
		{"truncated", must(t, full)[:20]},
		{"wrong wire type", protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := matchProto(tt.in, &SendBackBatchRequest{}, &SendBackBatchRequest{Requests: []*SendBackRequest{{Group: "stale"}}})
			assert.NoError(t, err, "UnmarshalOwned and proto.Unmarshal disagree")
		})
	}
}

func FuzzSendBackBatchRequestUnmarshalOwned(f *testing.F) {
	f.Add([]byte(nil))
	f.Add(must(f, &SendBackBatchRequest{Requests: []*SendBackRequest{{Group: "g", PhysicalOffset: 7, DelayLevel: -1, Reason: "r"}}}))
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := matchProto(in, &SendBackBatchRequest{}, &SendBackBatchRequest{}); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkUnmarshalSendBackBatchRequest decodes a consumer's send-back of
// 256 failed messages (its largest call).
func BenchmarkUnmarshalSendBackBatchRequest(b *testing.B) {
	req := &SendBackBatchRequest{}
	for i := range 256 {
		req.Requests = append(req.Requests, &SendBackRequest{Group: "orders-consumers", PhysicalOffset: int64(i) << 10, MaxReconsumeTimes: 16})
	}
	in := must(b, req)
	benchDecoders(b, in, func() *SendBackBatchRequest { return &SendBackBatchRequest{} })
}
