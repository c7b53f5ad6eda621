package remoting_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/remoting"
)

// seedFrames returns every captured frame, and each again with a binary
// header.
func seedFrames(f *testing.F) [][]byte {
	var frames [][]byte
	for _, suffix := range []string{"_request", "_response"} {
		for _, name := range goldenNames(f, suffix) {
			g := loadGolden(f, name)
			frames = append(frames, g.Bin)
			c, err := remoting.DecodeFrame(g.Bin)
			require.NoError(f, err)
			c.SerializeType = remoting.RocketMQ
			b, err := c.AppendFrame(nil)
			require.NoError(f, err)
			frames = append(frames, b)
		}
	}
	return frames
}

// FuzzDecodeFrame: decoding never panics, a frame DecodeFrame accepts
// reads the same from a stream, and what it decodes re-encodes to a frame
// that decodes to the same command.
func FuzzDecodeFrame(f *testing.F) {
	for _, b := range seedFrames(f) {
		f.Add(b)
	}
	f.Add(prefix(4, 0))
	f.Add(prefix(-1, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := remoting.DecodeFrame(b)
		if err != nil {
			require.ErrorIs(t, err, remoting.ErrMalformed)
			return
		}
		// Only now is the length prefix known to match len(b): a stream
		// read of a prefix claiming 2 GiB would allocate it.
		streamed, err := remoting.ReadFrame(bytes.NewReader(b), math.MaxInt32)
		require.NoError(t, err)
		require.Equal(t, c, streamed)
		out, err := c.AppendFrame(nil)
		if errors.Is(err, remoting.ErrFrameTooLarge) {
			return // escaping grew a huge header past 16 MiB
		}
		require.NoError(t, err)
		back, err := remoting.DecodeFrame(out)
		require.NoError(t, err)
		require.Equal(t, c, back)
	})
}

// FuzzReadFrame: reading frames from a stream never panics, whatever
// their length prefixes claim (up to 2 GiB: the buffer grows only as
// bytes arrive), and reads each frame as DecodeFrame decodes its bytes.
func FuzzReadFrame(f *testing.F) {
	frames := seedFrames(f)
	for _, b := range frames {
		f.Add(b)
	}
	f.Add(append(append([]byte(nil), frames[0]...), frames[1]...))
	f.Add(append(prefix(math.MaxInt32, 0), frames[0][8:]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		for off := 0; ; {
			c, err := remoting.ReadFrame(r, math.MaxInt32)
			if err != nil {
				return
			}
			n := 4 + int(binary.BigEndian.Uint32(b[off:]))
			want, err := remoting.DecodeFrame(b[off : off+n])
			require.NoError(t, err)
			require.Equal(t, want, c)
			off += n
		}
	})
}

// FuzzDecodeHeader: either header type (or an unknown one) never panics,
// and a header that decodes re-encodes, in its type, to the same command.
func FuzzDecodeHeader(f *testing.F) {
	for _, b := range seedFrames(f) {
		hlen := int(b[5])<<16 | int(b[6])<<8 | int(b[7])
		f.Add(b[4], b[8:8+hlen])
	}
	f.Add(byte(0), []byte(`{"code":1,"extFields":{"a":1,"b":null},"x":[{"y":"\ud83d\ude00"}]}`))
	f.Add(byte(0), []byte(`{"remark":"\u0001\"\\ \xff"}`))
	f.Add(byte(1), binaryHeader(10, 9, 317, 1, 0, "r", [][2]string{{"k", "v"}}))
	f.Add(byte(2), []byte(`{}`))
	f.Fuzz(func(t *testing.T, typ byte, b []byte) {
		st := remoting.SerializeType(typ)
		c, err := remoting.DecodeHeader(st, b)
		if err != nil {
			require.ErrorIs(t, err, remoting.ErrMalformed)
			return
		}
		require.Equal(t, st, c.SerializeType)
		out, err := c.AppendHeader(nil, st)
		require.NoError(t, err)
		back, err := remoting.DecodeHeader(st, out)
		require.NoError(t, err)
		require.Equal(t, c, back)
	})
}
