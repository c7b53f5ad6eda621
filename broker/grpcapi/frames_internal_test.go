package grpcapi

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

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
// before starts afresh, as UnmarshalOwned does: a field it lacks is zero.
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

// Anything but a request of records goes to UnmarshalOwned, which decodes
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
			werr := want.UnmarshalOwned(bytes.Clone(b))
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

// Whatever unmarshalFrames accepts, UnmarshalOwned decodes the same.
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
		require.NoError(t, want.UnmarshalOwned(bytes.Clone(b)), "UnmarshalOwned takes what unmarshalFrames takes")
		assert.Equal(t, want.Topic, p.req.Topic)
		assert.Equal(t, want.ProducerGroup, p.req.ProducerGroup)
		assert.Equal(t, want.RequestId, p.req.RequestId)
		assert.Empty(t, want.Messages)
		assert.Equal(t, bytes.Join(want.Records, nil), bytes.Join(p.req.Records, nil))
	})
}

// BenchmarkUnmarshalSendRequest decodes a request of 230 records of 1 KiB
// received in 16 KiB frames, as the broker's SendStream does
// (UnmarshalPooled: the records as views of the frames) and by joining
// the frames first (JoinPooled and UnmarshalOwned, what it did before).
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
			p.buf = grpcbuf.JoinPooled(data)
			if err := p.req.UnmarshalOwned(*p.buf); err != nil {
				b.Fatal(err)
			}
			p.release()
		}
	})
}
