package remoting_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/remoting"
)

// prefix is a frame's first 8 bytes: the length prefix and the header word.
func prefix(frameLen int32, word uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(frameLen))
	return binary.BigEndian.AppendUint32(b, word)
}

func TestReadFrameRefusesSizes(t *testing.T) {
	const limit = 1 << 20
	tests := []struct {
		name        string
		frame       []byte
		tooLarge    bool
		frameLen    int64
		headerLen   int64
		wantMessage string
	}{
		{"negative length", prefix(-1, 0), false, -1, -1, "remoting: malformed frame: length -1 is below 4"},
		{"most negative length", prefix(math.MinInt32, 0), false, math.MinInt32, -1, "remoting: malformed frame: length -2147483648 is below 4"},
		{"length 0", prefix(0, 0), false, 0, -1, "remoting: malformed frame: length 0 is below 4"},
		{"length 3", prefix(3, 0), false, 3, -1, "remoting: malformed frame: length 3 is below 4"},
		{"over the limit", prefix(limit-3, 0), true, limit - 3, -1, "remoting: frame too large: 1048577 bytes, limit 1048576"},
		{"2 GiB claim", prefix(math.MaxInt32, 0), true, math.MaxInt32, -1, "remoting: frame too large: 2147483651 bytes, limit 1048576"},
		{"header longer than frame", prefix(10, 7), false, 10, 7, "remoting: malformed frame: header length 7 exceeds frame length 10"},
		{"header of 16 MiB in a small frame", prefix(100, 0x00FFFFFF), false, 100, 0xFFFFFF, "remoting: malformed frame: header length 16777215 exceeds frame length 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := remoting.ReadFrame(bytes.NewReader(tt.frame), limit)
			var fe *remoting.FrameSizeError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tt.frameLen, fe.FrameLen)
			assert.Equal(t, tt.headerLen, fe.HeaderLen)
			assert.Equal(t, int64(limit), fe.Max)
			assert.EqualError(t, err, tt.wantMessage)
			if tt.tooLarge {
				assert.ErrorIs(t, err, remoting.ErrFrameTooLarge)
			} else {
				assert.ErrorIs(t, err, remoting.ErrMalformed)
			}
		})
	}
}

// The exact limit passes; one byte more does not. Zero means 16 MiB.
func TestReadFrameLimitEdges(t *testing.T) {
	c := &remoting.Command{Code: 10, Body: make([]byte, 3000)}
	frame, err := c.AppendFrame(nil)
	require.NoError(t, err)
	_, err = remoting.ReadFrame(bytes.NewReader(frame), int64(len(frame)))
	require.NoError(t, err)
	_, err = remoting.ReadFrame(bytes.NewReader(frame), int64(len(frame))-1)
	require.ErrorIs(t, err, remoting.ErrFrameTooLarge)

	_, err = remoting.ReadFrame(bytes.NewReader(prefix(remoting.DefaultMaxFrameBytes-4, 0)), 0)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "16 MiB exactly is allowed by default")
	_, err = remoting.ReadFrame(bytes.NewReader(prefix(remoting.DefaultMaxFrameBytes-3, 0)), 0)
	require.ErrorIs(t, err, remoting.ErrFrameTooLarge)
}

// A frame that claims 2 GiB, or one under the limit with an impossible
// header, is refused without allocating its buffer: the only allocations
// are the 8-byte prefix array (it escapes through io.Reader) and the error.
func TestReadFrameRefusesWithoutAllocating(t *testing.T) {
	for _, frame := range [][]byte{prefix(math.MaxInt32, 0), prefix(16<<20, 0x00FFFFFF+1<<24)} {
		r := bytes.NewReader(frame)
		allocs := testing.AllocsPerRun(100, func() {
			r.Reset(frame)
			_, err := remoting.ReadFrame(r, 1<<30)
			require.Error(t, err)
		})
		assert.LessOrEqual(t, allocs, 2.0)

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 100 {
			r.Reset(frame)
			_, err := remoting.ReadFrame(r, 0)
			require.Error(t, err)
		}
		runtime.ReadMemStats(&after)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "bytes allocated refusing 100 frames")
	}
}

func TestReadFrameEnds(t *testing.T) {
	frame, err := (&remoting.Command{Code: 34, Body: []byte("body")}).AppendFrame(nil)
	require.NoError(t, err)

	_, err = remoting.ReadFrame(bytes.NewReader(nil), 0)
	require.ErrorIs(t, err, io.EOF, "clean end between frames")
	for cut := 1; cut < len(frame); cut++ {
		_, err = remoting.ReadFrame(bytes.NewReader(frame[:cut]), 0)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF, "cut=%d", cut)
	}

	two := append(append([]byte(nil), frame...), frame...)
	r := bytes.NewReader(two)
	for range 2 {
		c, err := remoting.ReadFrame(r, 0)
		require.NoError(t, err)
		assert.Equal(t, "body", string(c.Body))
	}
	_, err = remoting.ReadFrame(r, 0)
	require.ErrorIs(t, err, io.EOF)
}

func TestDecodeFrameErrors(t *testing.T) {
	good, err := (&remoting.Command{Code: 1}).AppendFrame(nil)
	require.NoError(t, err)
	unknownType := append([]byte(nil), good...)
	unknownType[4] = 2
	tests := []struct {
		name  string
		frame []byte
	}{
		{"short", good[:7]},
		{"truncated", good[:len(good)-1]},
		{"trailing byte", append(append([]byte(nil), good...), 0)},
		{"header longer than frame", prefix(4, 1)},
		{"unknown serialize type", unknownType},
		{"bad header", append(prefix(6, 2), '{', '"')},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := remoting.DecodeFrame(tt.frame)
			require.ErrorIs(t, err, remoting.ErrMalformed)
		})
	}
}

func TestAppendFrameLayout(t *testing.T) {
	c := &remoting.Command{Code: 105, ExtFields: map[string]string{"topic": "T"}, Body: []byte("xy")}
	dst := []byte("prefix")
	out, err := c.AppendFrame(dst)
	require.NoError(t, err)
	require.Equal(t, "prefix", string(out[:6]))
	frame := out[6:]
	hdr, err := c.AppendHeader(nil, remoting.JSON)
	require.NoError(t, err)
	assert.Equal(t, uint32(4+len(hdr)+2), binary.BigEndian.Uint32(frame))
	assert.Equal(t, uint32(len(hdr)), binary.BigEndian.Uint32(frame[4:]))
	assert.Equal(t, hdr, frame[8:8+len(hdr)])
	assert.Equal(t, "xy", string(frame[8+len(hdr):]))
}

func TestAppendFrameErrors(t *testing.T) {
	dst := []byte("keep")
	out, err := (&remoting.Command{SerializeType: 7}).AppendFrame(dst)
	require.Error(t, err)
	assert.Equal(t, "keep", string(out))

	big := &remoting.Command{Remark: string(make([]byte, 1<<24)), SerializeType: remoting.RocketMQ}
	out, err = big.AppendFrame(dst)
	require.ErrorIs(t, err, remoting.ErrFrameTooLarge, "header over 24 bits")
	assert.Equal(t, "keep", string(out))
}
