package grpcapi

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/internal/grpcbuf"
	"github.com/gantrymq/gantry/message"
)

// records returns n records of topic T with bodies of size bytes.
func records(t testing.TB, n, size int) []byte {
	var b []byte
	for i := range n {
		m := &message.Message{Topic: "T", QueueID: -1, Body: bytes.Repeat([]byte{byte('a' + i%26)}, size)}
		var err error
		b, err = message.AppendUnsealed(b, m, fmt.Sprintf("%032X", i))
		require.NoError(t, err)
	}
	return b
}

// sendRequest encodes a request of records as Gantry's producer does.
func sendRequest(recs []byte) []byte {
	b := gantryv1.AppendRecordsKey(nil, len(recs))
	b = append(b, recs...)
	return (&gantryv1.SendRequest{Topic: "T", ProducerGroup: "G", RequestId: 77, Attempt: 1}).AppendFieldsAfterRecords(b)
}

// split cuts b into buffers of at most size bytes, as gRPC's frames.
func split(b []byte, size int) mem.BufferSlice {
	var out mem.BufferSlice
	for len(b) > 0 {
		n := min(size, len(b))
		out = append(out, mem.SliceBuffer(bytes.Clone(b[:n])))
		b = b[n:]
	}
	return out
}

// A request decoded from frames into a pooledSendRequest that held one
// before starts afresh, as proto.Unmarshal does: a field it lacks is zero.
func TestUnmarshalFramesStartsAfresh(t *testing.T) {
	recs := records(t, 3, 100)
	var p pooledSendRequest
	require.NoError(t, p.UnmarshalPooled(split(sendRequest(recs), 64)))
	p.release()
	bare := gantryv1.AppendRecordsKey(nil, len(recs)) // records alone: no topic, group or id
	require.NoError(t, p.UnmarshalPooled(split(append(bare, recs...), 64)))
	defer p.release()
	require.NotNil(t, p.frames, "decoded from the frames")
	assert.Empty(t, p.req.Topic)
	assert.Empty(t, p.req.ProducerGroup)
	assert.Zero(t, p.req.RequestId)
	assert.Zero(t, p.req.Attempt)
	assert.Equal(t, recs, bytes.Join(p.req.Records, nil))
}

// A request of records received in frames is decoded without joining
// them: the records come out in order, in chunks of whole records, the
// chunks views of the frames but for the records that straddle two.
func TestUnmarshalFrames(t *testing.T) {
	recs := records(t, 40, 1000)
	req := sendRequest(recs)
	for _, size := range []int{1, 7, 100, 1024, 4096, 16 << 10, len(req)} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := split(req, size)
			var p pooledSendRequest
			require.NoError(t, p.UnmarshalPooled(data))
			defer p.release()
			require.NotNil(t, p.frames, "decoded from the frames")
			assert.Equal(t, "T", p.req.Topic)
			assert.Equal(t, "G", p.req.ProducerGroup)
			assert.Equal(t, uint64(77), p.req.RequestId)
			assert.Equal(t, uint32(1), p.req.Attempt)
			assert.Equal(t, recs, bytes.Join(p.req.Records, nil), "the records, in order")
			for i, c := range p.req.Records {
				for off := 0; off < len(c); {
					v, err := message.NewView(c[off:])
					require.NoError(t, err, "chunk %d holds whole records", i)
					off += len(v.Bytes())
				}
			}
			views := 0
			for _, c := range p.req.Records {
				for _, b := range data {
					if inside(c, b.ReadOnlyData()) {
						views++
						break
					}
				}
			}
			if size >= 4096 {
				assert.GreaterOrEqual(t, views, len(p.req.Records)/2, "chunks are views of the frames")
			}
		})
	}
}

// inside reports whether c lies in d's memory.
func inside(c, d []byte) bool {
	if len(c) == 0 || len(d) == 0 {
		return false
	}
	for i := range d {
		if &d[i] == &c[0] {
			return len(d)-i >= len(c)
		}
	}
	return false
}

// Anything but a request of records goes to the slow branch, which decodes
// it or says what is wrong: the frames are not kept.
func TestUnmarshalFramesFallsBack(t *testing.T) {
	recs := records(t, 3, 100)
	withMessages := protowire.AppendTag(sendRequest(recs), 2, protowire.BytesType)
	withMessages = protowire.AppendBytes(withMessages, nil)
	badSize := bytes.Clone(recs)
	badSize[3] = 10 // TOTALSIZE below the minimum
	unknown := protowire.AppendTag(sendRequest(recs), 9, protowire.VarintType)
	unknown = protowire.AppendVarint(unknown, 1)
	for name, b := range map[string][]byte{
		"messages":        withMessages,
		"record size":     sendRequest(badSize),
		"empty records":   sendRequest(nil),
		"unknown field":   unknown,
		"truncated":       sendRequest(recs)[:50],
		"no records":      (&gantryv1.SendRequest{Topic: "T"}).AppendFieldsAfterRecords(nil),
		"records cut":     sendRequest(recs[:len(recs)-1]),
		"invalid utf-8":   append(gantryv1.AppendRecordsKey(nil, len(recs)), append(recs, 0x0A, 1, 0xFF)...),
		"fixed64 field":   protowire.AppendFixed64(protowire.AppendTag(sendRequest(recs), 4, protowire.Fixed64Type), 1),
		"string too long": append(sendRequest(recs), 0x0A, 100, 'x'),
	} {
		t.Run(name, func(t *testing.T) {
			var p pooledSendRequest
			assert.False(t, p.unmarshalFrames(split(b, 64)))
			assert.Nil(t, p.frames)
			assert.Nil(t, p.buf)
			var want gantryv1.SendRequest
			werr := proto.Unmarshal(b, &want)
			gerr := p.UnmarshalPooled(split(b, 64))
			if werr != nil {
				assert.Error(t, gerr)
			} else {
				require.NoError(t, gerr)
				assert.Equal(t, want.Topic, p.req.Topic)
				assert.Equal(t, bytes.Join(want.Records, nil), bytes.Join(p.req.Records, nil))
			}
			p.release()
		})
	}
}

// Whatever unmarshalFrames accepts, proto.Unmarshal decodes the same.
func FuzzUnmarshalFrames(f *testing.F) {
	recs := records(f, 3, 50)
	f.Add(sendRequest(recs), uint16(64))
	f.Add(sendRequest(recs), uint16(1))
	f.Add(sendRequest(recs[:len(recs)/2]), uint16(100))
	f.Fuzz(func(t *testing.T, b []byte, size uint16) {
		var p pooledSendRequest
		if !p.unmarshalFrames(split(b, int(size%512)+1)) {
			return
		}
		defer p.release()
		var want gantryv1.SendRequest
		require.NoError(t, proto.Unmarshal(b, &want), "proto.Unmarshal takes what unmarshalFrames takes")
		assert.Equal(t, want.Topic, p.req.Topic)
		assert.Equal(t, want.ProducerGroup, p.req.ProducerGroup)
		assert.Equal(t, want.RequestId, p.req.RequestId)
		assert.Empty(t, want.Messages)
		assert.Equal(t, bytes.Join(want.Records, nil), bytes.Join(p.req.Records, nil))
	})
}

// BenchmarkUnmarshalSendRequest decodes a request of 230 records of 1 KiB
// received in 16 KiB frames with UnmarshalPooled's two branches: the fast
// one (the records as views of the frames) and the slow one (the frames
// joined, then proto.Unmarshal).
//
//	go test -run='^$' -bench=UnmarshalSendRequest ./broker/grpcapi
func BenchmarkUnmarshalSendRequest(b *testing.B) {
	req := sendRequest(records(b, 230, 1024))
	data := split(req, 16<<10)
	b.Run("frames", func(b *testing.B) {
		b.SetBytes(int64(len(req)))
		b.ReportAllocs()
		for b.Loop() {
			var p pooledSendRequest
			if err := p.UnmarshalPooled(data); err != nil {
				b.Fatal(err)
			}
			p.release()
		}
	})
	b.Run("join", func(b *testing.B) {
		b.SetBytes(int64(len(req)))
		b.ReportAllocs()
		for b.Loop() {
			var p pooledSendRequest
			joined := grpcbuf.JoinPooled(data)
			if err := proto.Unmarshal(*joined, &p.req); err != nil {
				b.Fatal(err)
			}
			grpcbuf.Shared.Put(joined)
		}
	})
}

// matchProto decodes in with proto.Unmarshal and with UnmarshalPooled, from
// in cut into frames of size bytes, into a request holding stale fields,
// and says how the two differ: whether they fail, and what they decode.
func matchProto(in []byte, size int) error {
	var want gantryv1.SendRequest
	wantErr := proto.Unmarshal(in, &want)
	p := pooledSendRequest{}
	p.req.Topic, p.req.Records = "stale", [][]byte{[]byte("stale")}
	err := p.UnmarshalPooled(split(in, size))
	defer p.release()
	switch {
	case (err != nil) != (wantErr != nil):
		return fmt.Errorf("error %v, proto.Unmarshal's %v", err, wantErr)
	case err != nil:
		return nil
	case want.Topic != p.req.Topic || want.ProducerGroup != p.req.ProducerGroup || want.RequestId != p.req.RequestId ||
		want.Attempt != p.req.Attempt || len(want.Messages) != len(p.req.Messages):
		return fmt.Errorf("got %v, want %v", &p.req, &want)
	case !bytes.Equal(bytes.Join(want.Records, nil), bytes.Join(p.req.Records, nil)):
		return fmt.Errorf("records %q, want %q", p.req.Records, want.Records)
	}
	for i := range want.Messages {
		if !proto.Equal(want.Messages[i], p.req.Messages[i]) {
			return fmt.Errorf("message %d: got %v, want %v", i, p.req.Messages[i], want.Messages[i])
		}
	}
	return nil
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

// UnmarshalPooled decodes every request as proto.Unmarshal does, whatever
// frames it arrives in: the records' bytes, the other fields, the errors.
func TestUnmarshalPooledMatchesProto(t *testing.T) {
	withUnknown := protowire.AppendTag(mustMarshal(t, &gantryv1.SendRequest{Topic: "T", Records: [][]byte{[]byte("r")}}), 99, protowire.VarintType)
	withUnknown = protowire.AppendVarint(withUnknown, 7)
	for _, tt := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"records", mustMarshal(t, &gantryv1.SendRequest{Topic: "Orders", ProducerGroup: "pg", RequestId: 42, Attempt: 2,
			Records: [][]byte{[]byte("first record"), {}, []byte("third")}})},
		{"whole records", sendRequest(records(t, 3, 100))},
		{"messages", mustMarshal(t, &gantryv1.SendRequest{Topic: "T", Messages: []*gantryv1.Message{{QueueId: 3, Body: []byte("b")}}})},
		{"messages and records", mustMarshal(t, &gantryv1.SendRequest{Topic: "T", Messages: []*gantryv1.Message{{Body: []byte("b")}}, Records: [][]byte{[]byte("r")}})},
		{"unknown field", withUnknown},
		{"repeated scalar: the last wins", append(mustMarshal(t, &gantryv1.SendRequest{Topic: "A", RequestId: 1}), mustMarshal(t, &gantryv1.SendRequest{Topic: "B", RequestId: 2})...)},
		{"invalid UTF-8 topic", protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff, 0xfe})},
		{"truncated", mustMarshal(t, &gantryv1.SendRequest{Topic: "Orders", Records: [][]byte{[]byte("record")}})[:10]},
		{"wrong wire type", protowire.AppendVarint(protowire.AppendTag(nil, 5, protowire.VarintType), 1)},
	} {
		for _, size := range []int{1, 7, 64, 1 << 20} {
			t.Run(fmt.Sprintf("%s/frames of %d", tt.name, size), func(t *testing.T) {
				assert.NoError(t, matchProto(tt.in, size), "UnmarshalPooled and proto.Unmarshal disagree")
			})
		}
	}
}

func FuzzUnmarshalPooled(f *testing.F) {
	f.Add([]byte(nil), uint16(1))
	f.Add(mustMarshal(f, &gantryv1.SendRequest{Topic: "Orders", ProducerGroup: "pg", RequestId: 42, Attempt: 1, Records: [][]byte{[]byte("r1"), []byte("r2")}}), uint16(3))
	f.Add(mustMarshal(f, &gantryv1.SendRequest{Topic: "T", Messages: []*gantryv1.Message{{Body: []byte("b")}}}), uint16(64))
	f.Add(sendRequest(records(f, 3, 50)), uint16(64))
	f.Fuzz(func(t *testing.T, in []byte, size uint16) {
		if err := matchProto(in, int(size%512)+1); err != nil {
			t.Fatal(err)
		}
	})
}
