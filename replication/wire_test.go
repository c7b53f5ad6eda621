package replication_test

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/replication"
	"github.com/gantrymq/gantry/replication/epoch"
)

func TestWireRoundTrips(t *testing.T) {
	h := replication.Hello{Version: replication.Version, ReplicaID: 3, SegmentBytes: 1 << 30, End: 123456, MaxFrameBytes: 1 << 20}
	b := replication.AppendHello(nil, h)
	require.Len(t, b, replication.HelloSize)
	got, err := replication.ReadHello(bytes.NewReader(b))
	require.NoError(t, err)
	assert.Equal(t, h, got)
	signed := h
	signed.Proof = &replication.HelloProof{Nonce: [replication.NonceSize]byte{1, 2, 3}, Date: "1700000000000", Authorization: "GANTRY-HMAC-SHA256 Credential=ak, Signature=x"}
	b = replication.AppendHello(nil, signed)
	require.Len(t, b, replication.HelloSize+replication.NonceSize+1+13+2+len(signed.Proof.Authorization))
	got, err = replication.ReadHello(bytes.NewReader(b))
	require.NoError(t, err)
	assert.Equal(t, signed, got)
	got, err = replication.DecodeHello(b)
	require.NoError(t, err)
	assert.Equal(t, signed, got)
	assert.NotEqual(t, h.SignedContent([replication.NonceSize]byte{1}), h.SignedContent([replication.NonceSize]byte{2}), "the nonce is signed")

	three := []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 4096}, {Epoch: 4, StartOffset: 4096}}
	for _, w := range []replication.Welcome{
		{Version: replication.Version, SegmentBytes: 1 << 30, End: 99, Epoch: 4},
		{Version: replication.Version, SegmentBytes: 1 << 30, End: 99, Epoch: 4, Reason: "no"},
		{Version: replication.Version, SegmentBytes: 1 << 30, End: 8192, Epoch: 4, Epochs: three, Start: 4096},
		{Version: replication.Version, SegmentBytes: 1 << 30, End: 8192, Epoch: 4, Reason: "beyond", Epochs: three},
		{Version: 1, SegmentBytes: 1 << 30, End: 99, Epoch: 4, Reason: "version 1 has no list"},
	} {
		b := replication.AppendWelcome(nil, w)
		size := replication.WelcomeHeaderSize + len(w.Reason)
		if w.Version == replication.Version {
			size += 4 + 12*len(w.Epochs) + 8
		}
		require.Len(t, b, size)
		got, err := replication.ReadWelcome(bytes.NewReader(b))
		require.NoError(t, err)
		assert.Equal(t, w, got)
		got, err = replication.DecodeWelcome(b)
		require.NoError(t, err)
		assert.Equal(t, w, got)
	}
	long := replication.Welcome{Version: replication.Version, Reason: strings.Repeat("x", 2*replication.MaxReasonBytes)}
	got2, err := replication.DecodeWelcome(replication.AppendWelcome(nil, long))
	require.NoError(t, err)
	assert.Len(t, got2.Reason, replication.MaxReasonBytes, "a long reason is cut")

	fh := replication.FrameHeader{Type: replication.FrameData, Epoch: 2, Offset: 4096, BodyLen: 3}
	fb := append(replication.AppendFrameHeader(nil, fh), 1, 2, 3)
	gh, body, err := replication.ReadFrame(bytes.NewReader(fb), nil, 3)
	require.NoError(t, err)
	assert.Equal(t, fh, gh)
	assert.Equal(t, []byte{1, 2, 3}, body)

	end, err := replication.DecodeAck(replication.AppendAck(nil, 77))
	require.NoError(t, err)
	assert.Equal(t, int64(77), end)
}

// signedHelloBytes is a signed hello's encoding.
var signedHelloBytes = replication.AppendHello(nil, replication.Hello{Version: replication.Version, ReplicaID: 2, SegmentBytes: 1 << 30,
	MaxFrameBytes: 1 << 20, Proof: &replication.HelloProof{Nonce: [replication.NonceSize]byte{9}, Date: "1700000000000", Authorization: "GANTRY-HMAC-SHA256 Credential=ak, Signature=x"}})

func TestWireRefusesMalformed(t *testing.T) {
	hello := replication.AppendHello(nil, replication.Hello{Version: 1, SegmentBytes: 1 << 20, MaxFrameBytes: 1})
	welcome := replication.AppendWelcome(nil, replication.Welcome{Version: 1, Reason: "why"})
	accepted := replication.AppendWelcome(nil, replication.Welcome{Version: replication.Version})
	withList := func(count uint32, entries ...epoch.Entry) []byte {
		b := binary.BigEndian.AppendUint32(bytes.Clone(accepted[:replication.WelcomeHeaderSize]), count)
		for _, e := range entries {
			b = binary.BigEndian.AppendUint32(b, uint32(e.Epoch))
			b = binary.BigEndian.AppendUint64(b, uint64(e.StartOffset))
		}
		return b
	}
	frame := func(h replication.FrameHeader) []byte { return replication.AppendFrameHeader(nil, h) }
	set := func(b []byte, at int, v uint16) []byte {
		b = bytes.Clone(b)
		binary.BigEndian.PutUint16(b[at:], v)
		return b
	}
	for _, tc := range []struct {
		name   string
		decode func() error
		says   string
	}{
		{"hello: short", func() error { _, err := replication.DecodeHello(hello[:10]); return err }, "hello of 10 bytes"},
		{"hello: magic", func() error { _, err := replication.DecodeHello(set(hello, 0, 0)); return err }, "not a Gantry replica"},
		{"hello: unknown flags", func() error { _, err := replication.DecodeHello(set(hello, 6, 2)); return err }, "hello flags 0x2, want 0 or 0x1"},
		{"hello: signed without a proof", func() error { _, err := replication.DecodeHello(set(hello, 6, 1)); return err }, "signed hello cut in its nonce"},
		{"hello: unsigned with more bytes", func() error { _, err := replication.DecodeHello(append(bytes.Clone(hello), 0)); return err }, "unsigned hello of 37 bytes"},
		{"hello: proof cut", func() error {
			_, err := replication.DecodeHello(signedHelloBytes[:len(signedHelloBytes)-1])
			return err
		}, "signed hello cut in its authorization"},
		{"hello: bytes after the proof", func() error { _, err := replication.DecodeHello(append(bytes.Clone(signedHelloBytes), 0)); return err }, "1 bytes after the hello's proof"},
		{"hello: authorization too long", func() error {
			b := append(set(hello, 6, 1), make([]byte, replication.NonceSize+1)...)
			_, err := replication.ReadHello(bytes.NewReader(binary.BigEndian.AppendUint16(b, 5000)))
			return err
		}, "authorization of 5000 bytes, at most 1024"},
		{"welcome: magic", func() error { _, err := replication.DecodeWelcome(set(welcome, 0, 0)); return err }, "not a Gantry master"},
		{"welcome: status", func() error { _, err := replication.DecodeWelcome(set(welcome, 6, 7)); return err }, "status 7"},
		{"welcome: reason too long", func() error { _, err := replication.DecodeWelcome(set(welcome, 28, 5000)); return err }, "reason of 5000 bytes, at most 1024"},
		{"welcome: refusal without a reason", func() error {
			_, err := replication.DecodeWelcome(set(welcome, 28, 0)[:replication.WelcomeHeaderSize])
			return err
		}, "status 1 with a reason of 0 bytes"},
		{"welcome: cut", func() error { _, err := replication.DecodeWelcome(welcome[:len(welcome)-1]); return err }, "its header announces a reason of 3"},
		{"welcome: version 1 with more bytes", func() error { _, err := replication.DecodeWelcome(append(bytes.Clone(welcome), 0)); return err }, "version 1 with 1 bytes after its reason"},
		{"welcome: no epoch list", func() error {
			_, err := replication.DecodeWelcome(accepted[:replication.WelcomeHeaderSize])
			return err
		}, "epoch list"},
		{"welcome: epoch count beyond MaxEntries", func() error { _, err := replication.DecodeWelcome(withList(epoch.MaxEntries + 1)); return err }, "65537 entries, more than MaxEntries"},
		{"welcome: epoch list cut", func() error {
			b := withList(2, epoch.Entry{Epoch: 1})
			_, err := replication.DecodeWelcome(b[:len(b)-1])
			return err
		}, "unexpected EOF"},
		{"welcome: epoch list short of its count", func() error { _, err := replication.DecodeWelcome(withList(2, epoch.Entry{Epoch: 1})); return err }, "entry 1 of 2"},
		{"welcome: epochs out of order", func() error {
			_, err := replication.DecodeWelcome(withList(2, epoch.Entry{Epoch: 2}, epoch.Entry{Epoch: 1, StartOffset: 10}))
			return err
		}, "epoch 1 is not greater than the previous entry's 2"},
		{"welcome: no first offset", func() error { _, err := replication.DecodeWelcome(append(withList(0), 7)); return err }, "welcome without the master's first offset"},
		{"welcome: first offset past the end", func() error {
			_, err := replication.DecodeWelcome(binary.BigEndian.AppendUint64(withList(0), 1<<40))
			return err
		}, "first offset 1099511627776 outside the master's log"},
		{"welcome: bytes after the first offset", func() error {
			_, err := replication.DecodeWelcome(append(binary.BigEndian.AppendUint64(withList(0), 0), 7))
			return err
		}, "1 bytes after the welcome's first offset"},
		{"frame: type", func() error {
			_, err := replication.DecodeFrameHeader(frame(replication.FrameHeader{Type: 0}), 10)
			return err
		}, "unknown frame type 0"},
		{"frame: negative offset", func() error {
			_, err := replication.DecodeFrameHeader(frame(replication.FrameHeader{Type: replication.FrameData, Offset: -1, BodyLen: 1}), 10)
			return err
		}, "negative offset"},
		{"frame: negative epoch", func() error {
			_, err := replication.DecodeFrameHeader(frame(replication.FrameHeader{Type: replication.FrameData, Epoch: -1, BodyLen: 1}), 10)
			return err
		}, "negative epoch -1"},
		{"frame: empty data", func() error {
			_, err := replication.DecodeFrameHeader(frame(replication.FrameHeader{Type: replication.FrameData}), 10)
			return err
		}, "without a body"},
		{"frame: too large", func() error {
			_, err := replication.DecodeFrameHeader(frame(replication.FrameHeader{Type: replication.FrameData, BodyLen: 11}), 10)
			return err
		}, "body of 11 bytes, more than the limit of 10"},
		{"ack: negative", func() error { _, err := replication.DecodeAck(replication.AppendAck(nil, -1)); return err }, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.decode()
			require.ErrorIs(t, err, replication.ErrProtocol)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r bytes.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestReadFrameRefusesALargeBodyUnread: a header announcing 4 GiB is
// refused after its 17 bytes, with no buffer allocated for the body.
func TestReadFrameRefusesALargeBodyUnread(t *testing.T) {
	forged := replication.AppendFrameHeader(nil, replication.FrameHeader{Type: replication.FrameData, Offset: 8, BodyLen: 1<<32 - 1})
	forged = append(forged, make([]byte, 64)...)
	var r countingReader
	var err error
	allocs := testing.AllocsPerRun(20, func() {
		r.r.Reset(forged)
		r.n = 0
		_, _, err = replication.ReadFrame(&r, nil, 1<<20)
	})
	require.ErrorIs(t, err, replication.ErrFrameTooLarge)
	var fe *replication.FrameTooLargeError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, replication.FrameTooLargeError{Offset: 8, Len: 1<<32 - 1, Max: 1 << 20}, *fe)
	assert.Equal(t, replication.FrameHeaderSize, r.n, "only the header is read")
	assert.LessOrEqual(t, allocs, 2.0, "the header and the error, nothing for the body")

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r.r.Reset(forged)
	_, _, err = replication.ReadFrame(&r, nil, 1<<20)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, replication.ErrFrameTooLarge)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated")
}

func TestDefaultMaxFrameHoldsTheLargestRecord(t *testing.T) {
	assert.GreaterOrEqual(t, replication.DefaultMaxFrameBytes, message.MaxRecordBytes)
}

// FuzzReadFrame: decoding never panics, never reads a body past the
// limit, and what it decodes encodes to the bytes it read.
func FuzzReadFrame(f *testing.F) {
	f.Add(append(replication.AppendFrameHeader(nil, replication.FrameHeader{Type: replication.FrameData, Epoch: 1, Offset: 64, BodyLen: 3}), 1, 2, 3))
	f.Add(replication.AppendFrameHeader(nil, replication.FrameHeader{Type: replication.FrameHeartbeat, Offset: 9}))
	f.Add(replication.AppendFrameHeader(nil, replication.FrameHeader{Type: replication.FrameData, BodyLen: 1 << 31}))
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 1 << 10
		h, body, err := replication.ReadFrame(bytes.NewReader(b), nil, limit)
		if err != nil {
			return
		}
		require.LessOrEqual(t, len(body), limit)
		require.Equal(t, b[:replication.FrameHeaderSize+len(body)], append(replication.AppendFrameHeader(nil, h), body...))
	})
}

// FuzzDecodeHandshake: the hello and welcome decoders never panic, and
// what they decode encodes to the same bytes.
func FuzzDecodeHandshake(f *testing.F) {
	f.Add(replication.AppendHello(nil, replication.Hello{Version: 1, ReplicaID: 2, SegmentBytes: 1 << 30, End: 5, MaxFrameBytes: 1 << 20}))
	f.Add(signedHelloBytes)
	f.Add(signedHelloBytes[:replication.HelloSize+replication.NonceSize+3])
	f.Add(replication.AppendWelcome(nil, replication.Welcome{Version: 1, SegmentBytes: 1 << 30, End: 5, Epoch: 2}))
	f.Add(replication.AppendWelcome(nil, replication.Welcome{Version: 1, Reason: "segment size"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := replication.DecodeHello(b); err == nil {
			require.Equal(t, b, replication.AppendHello(nil, h))
		}
		if h, err := replication.ReadHello(bytes.NewReader(b)); err == nil {
			enc := replication.AppendHello(nil, h)
			require.LessOrEqual(t, len(enc), len(b))
			require.Equal(t, b[:len(enc)], enc)
		}
		checkWelcome(t, b)
	})
}

// FuzzDecodeWelcome: the version 2 welcome decoders (DecodeWelcome and
// ReadWelcome) never panic, accept only a valid epoch list (epoch.Validate),
// allocate for the list no more than the bytes present hold, and what they
// decode encodes to the bytes they read.
func FuzzDecodeWelcome(f *testing.F) {
	three := []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 4096}, {Epoch: 5, StartOffset: 1 << 40}}
	for _, w := range []replication.Welcome{
		{Version: replication.Version, SegmentBytes: 1 << 30, End: 5, Epoch: 2},
		{Version: replication.Version, SegmentBytes: 1 << 30, End: 1 << 41, Epoch: 5, Epochs: three},
		{Version: replication.Version, Reason: "beyond the master's end", Epochs: three},
	} {
		b := replication.AppendWelcome(nil, w)
		f.Add(b)
		f.Add(b[:len(b)-3])
	}
	huge := binary.BigEndian.AppendUint32(replication.AppendWelcome(nil, replication.Welcome{Version: replication.Version})[:replication.WelcomeHeaderSize], 1<<32-1)
	f.Add(huge)
	f.Fuzz(func(t *testing.T, b []byte) { checkWelcome(t, b) })
}

// checkWelcome decodes b as a welcome both ways.
func checkWelcome(t *testing.T, b []byte) {
	if w, err := replication.DecodeWelcome(b); err == nil {
		require.NoError(t, epoch.Validate(w.Epochs))
		require.LessOrEqual(t, 12*len(w.Epochs), len(b))
		require.Equal(t, b, replication.AppendWelcome(nil, w))
	}
	if w, err := replication.ReadWelcome(bytes.NewReader(b)); err == nil {
		enc := replication.AppendWelcome(nil, w)
		require.LessOrEqual(t, len(enc), len(b))
		require.Equal(t, b[:len(enc)], enc)
	}
}
