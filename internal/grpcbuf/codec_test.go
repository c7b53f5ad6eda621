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
	var o owned
	data := mem.BufferSlice{mem.SliceBuffer([]byte("hello, ")), mem.SliceBuffer([]byte("world"))}
	require.NoError(t, Codec{}.Unmarshal(data, &o))
	assert.Equal(t, "hello, world", string(o.got))
}
