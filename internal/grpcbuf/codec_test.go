package grpcbuf

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
)

// A message marshalled into a dirty pooled buffer comes back whole, small
// (not pooled) and large, and is byte for byte what proto.Marshal makes.
func TestCodecRoundTrip(t *testing.T) {
	c := Codec{}
	assert.Equal(t, "proto", c.Name())
	for _, n := range []int{0, 10, 100 << 10} {
		dirty := Shared.Get(n + 64) // leave garbage in the tier the marshal will use
		copy(*dirty, bytes.Repeat([]byte{0xEE}, len(*dirty)))
		Shared.Put(dirty)

		in := &gantryv1.PullResponse{Status: gantryv1.PullStatus(1), Records: bytes.Repeat([]byte{'r'}, n),
			RecordCount: 7, NextOffset: 42, MinOffset: 1, MaxOffset: 99}
		data, err := c.Marshal(in)
		require.NoError(t, err)
		want, err := proto.Marshal(in)
		require.NoError(t, err)
		assert.Equal(t, want, data.Materialize(), "%d bytes of records", n)

		out := &gantryv1.PullResponse{}
		require.NoError(t, c.Unmarshal(data, out))
		assert.True(t, proto.Equal(in, out), "%d bytes of records", n)
		data.Free()
	}
}

// An Appender is marshalled by its own AppendMarshal, small and pooled,
// and one it declines by proto.Marshal: the same bytes either way.
func TestCodecAppender(t *testing.T) {
	c := Codec{}
	for _, n := range []int{1, 64, 4096} { // results: about 50 bytes each
		dirty := Shared.Get(n*60 + 64)
		copy(*dirty, bytes.Repeat([]byte{0xEE}, len(*dirty)))
		Shared.Put(dirty)
		in := &gantryv1.SendResponse{RequestId: 5}
		for i := range n {
			in.Results = append(in.Results, &gantryv1.SendResult{MsgId: "0A0000010000271B0000000000000010",
				QueueId: 1, QueueOffset: int64(i), PhysicalOffset: int64(i) << 10, StoreTimestampMs: 1764460800000})
		}
		_, ok := in.MarshalSize()
		require.True(t, ok)
		data, err := c.Marshal(in)
		require.NoError(t, err)
		want, err := proto.Marshal(in)
		require.NoError(t, err)
		assert.Equal(t, want, data.Materialize(), "%d results", n)
		data.Free()
	}
	declined := &gantryv1.SendResponse{Results: []*gantryv1.SendResult{{UniqKey: "\xff"}}}
	_, ok := declined.MarshalSize()
	require.False(t, ok)
	_, err := c.Marshal(declined)
	assert.ErrorContains(t, err, "UTF-8", "proto.Marshal's refusal")
}

func TestCodecRefusesOtherTypes(t *testing.T) {
	_, err := Codec{}.Marshal("not a message")
	assert.ErrorContains(t, err, "not a proto.Message")
	assert.ErrorContains(t, Codec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{1})}, 3), "not a proto.Message")
}

type owned struct{ got []byte }

func (o *owned) UnmarshalOwned(b []byte) error { o.got = b; return nil }

// An OwnedUnmarshaler gets the message's bytes, joined, in a slice of its
// own.
func TestCodecOwnedUnmarshaler(t *testing.T) {
	for _, tt := range []struct {
		name string
		data mem.BufferSlice
		want string
	}{
		{"none", nil, ""},
		{"one", mem.BufferSlice{mem.SliceBuffer([]byte("hello"))}, "hello"},
		{"two", mem.BufferSlice{mem.SliceBuffer([]byte("hello, ")), mem.SliceBuffer([]byte("world"))}, "hello, world"},
		{"more than fit on the stack", func() (d mem.BufferSlice) {
			for i := range 40 {
				d = append(d, mem.SliceBuffer([]byte{'a' + byte(i%26)}))
			}
			return d
		}(), "abcdefghijklmnopqrstuvwxyzabcdefghijklmn"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var o owned
			require.NoError(t, Codec{}.Unmarshal(tt.data, &o))
			assert.Equal(t, tt.want, string(o.got))
			if len(tt.data) > 0 {
				assert.NotSame(t, &tt.data[0].ReadOnlyData()[0], &o.got[0], "a copy of its own")
			}
		})
	}
}

// BenchmarkUnmarshalOwned hands a 256 KiB message that arrived in 16 KiB
// frames (a consumer's pull of 256 1 KiB messages) to an OwnedUnmarshaler.
func BenchmarkUnmarshalOwned(b *testing.B) {
	var data mem.BufferSlice
	for range 16 {
		data = append(data, mem.SliceBuffer(make([]byte, 16<<10)))
	}
	b.SetBytes(int64(data.Len()))
	b.ReportAllocs()
	var o owned
	for b.Loop() {
		if err := (Codec{}).Unmarshal(data, &o); err != nil {
			b.Fatal(err)
		}
	}
}

type encodedReply struct{ data mem.BufferSlice }

func (e *encodedReply) TakeEncoding() (mem.BufferSlice, error) {
	d := e.data
	e.data = nil
	return d, nil
}

// An Encoded reply is sent as it is: Marshal hands over its buffers.
func TestCodecEncoded(t *testing.T) {
	want, err := proto.Marshal(&gantryv1.PullResponse{Status: gantryv1.PullStatus(1), RecordCount: 3})
	require.NoError(t, err)
	buf := Shared.Get(len(want))
	copy(*buf, want)
	data, err := Codec{}.Marshal(&encodedReply{data: mem.BufferSlice{mem.NewBuffer(buf, Shared)}})
	require.NoError(t, err)
	assert.Equal(t, want, data.Materialize())
	data.Free()
}

type pooledReq struct {
	req gantryv1.PullResponse
	buf *[]byte
}

func (p *pooledReq) UnmarshalPooled(data mem.BufferSlice) error {
	p.buf = JoinPooled(data)
	return p.req.UnmarshalOwned(*p.buf)
}

// A PooledUnmarshaler decodes from a Shared buffer holding the message's
// frames joined, whose records it may keep until it puts the buffer back.
func TestCodecPooled(t *testing.T) {
	in := &gantryv1.PullResponse{Status: gantryv1.PullStatus(1), RecordCount: 2, NextOffset: 5, Records: append(bytes.Repeat([]byte{'a'}, 20_000), 'b')}
	wire, err := proto.Marshal(in)
	require.NoError(t, err)
	data := mem.BufferSlice{mem.SliceBuffer(wire[:7000]), mem.SliceBuffer(wire[7000:16000]), mem.SliceBuffer(wire[16000:])}
	var p pooledReq
	require.NoError(t, Codec{}.Unmarshal(data, &p))
	assert.True(t, proto.Equal(in, &p.req))
	assert.Equal(t, len(wire), len(*p.buf))
	at := bytes.Index(*p.buf, in.Records)
	require.Positive(t, at)
	assert.Same(t, &(*p.buf)[at], &p.req.Records[0], "the records are views of the pooled buffer")
	Shared.Put(p.buf)
}
