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
// messages, as broker/grpcapi's BenchmarkUnmarshalSendRequest does a request.
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
