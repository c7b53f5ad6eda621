package remoting

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// DefaultMaxFrameBytes is the default limit on one frame, length prefix
// included: Java's com.rocketmq.remoting.frameMaxLength (16 MiB).
const DefaultMaxFrameBytes = 16 << 20

// maxHeaderLen is the largest header the 24-bit header length can carry.
const maxHeaderLen = 1<<24 - 1

// frameOverhead is the length prefix and the header word.
const frameOverhead = 8

// AppendFrame appends c as one frame (the package doc's Wire format) to
// dst and returns the extended slice; its header is encoded as
// c.SerializeType says. On error dst is returned unchanged.
func (c *Command) AppendFrame(dst []byte) ([]byte, error) {
	out, err := c.appendFrameHead(dst)
	if err != nil {
		return dst, err
	}
	return append(out, c.Body...), nil
}

// appendFrameHead appends everything of c's frame but the body: the length
// prefix (which counts the body), the header word and the header.
func (c *Command) appendFrameHead(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	var err error
	switch c.SerializeType {
	case JSON:
		dst = appendJSONHeader(dst, c)
	case RocketMQ:
		dst, err = appendBinaryHeader(dst, c)
	default:
		err = fmt.Errorf("remoting: cannot encode a header as %s", c.SerializeType)
	}
	if err != nil {
		return dst[:start], err
	}
	headerLen := len(dst) - start - frameOverhead
	if headerLen > maxHeaderLen {
		return dst[:start], fmt.Errorf("%w: header of %d bytes, limit %d", ErrFrameTooLarge, headerLen, maxHeaderLen)
	}
	frameLen := int64(4+headerLen) + int64(len(c.Body))
	if frameLen > math.MaxInt32 {
		return dst[:start], fmt.Errorf("%w: %d bytes do not fit a frame's length prefix", ErrFrameTooLarge, frameLen+4)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(frameLen))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(c.SerializeType)<<24|uint32(headerLen))
	return dst, nil
}

// checkFrameLen refuses a length prefix that is impossible or over max (a
// whole frame's limit, prefix included).
func checkFrameLen(frameLen, maxFrameBytes int64) error {
	if frameLen < 4 || frameLen+4 > maxFrameBytes {
		return &FrameSizeError{FrameLen: frameLen, HeaderLen: -1, Max: maxFrameBytes}
	}
	return nil
}

// splitHeaderWord checks a header word against its frame's length.
func splitHeaderWord(word uint32, frameLen, maxFrameBytes int64) (SerializeType, int, error) {
	headerLen := int64(word & maxHeaderLen)
	if headerLen > frameLen-4 {
		return 0, 0, &FrameSizeError{FrameLen: frameLen, HeaderLen: headerLen, Max: maxFrameBytes}
	}
	t := SerializeType(word >> 24)
	if t != JSON && t != RocketMQ {
		return 0, 0, &HeaderError{Type: t, Reason: "unknown serialize type"}
	}
	return t, int(headerLen), nil
}

// ReadFrame reads one frame from r. A frame whose length prefix or header
// length is impossible, or which with its prefix is over maxFrameBytes
// (DefaultMaxFrameBytes when ≤ 0), is refused with a *FrameSizeError before
// anything is allocated for it; the buffer of a frame within the limit
// grows as its bytes arrive (see readFrameRest), so a peer that announces
// a large frame and sends little of it costs little. A clean end of input
// before the frame is io.EOF; inside it, io.ErrUnexpectedEOF. The
// command's Body aliases the one buffer the frame was read into. Wrap a
// net.Conn in a bufio.Reader: ReadFrame makes several reads per frame.
func ReadFrame(r io.Reader, maxFrameBytes int64) (*Command, error) {
	h, err := readFrameHead(r, maxFrameBytes)
	if err != nil {
		return nil, err
	}
	buf, err := readFrameRest(r, h, nil)
	if err != nil {
		return nil, err
	}
	return h.decode(buf)
}

// frameHead is a frame's length prefix and header word, checked.
type frameHead struct {
	t         SerializeType
	frameLen  int64 // the bytes after the length prefix
	headerLen int
}

// rest is how many bytes follow the header word: the header and the body.
func (h frameHead) rest() int { return int(h.frameLen) - 4 }

// decode decodes the frame's rest, read whole into buf.
func (h frameHead) decode(buf []byte) (*Command, error) {
	return decodeParts(h.t, buf[:h.headerLen], buf[h.headerLen:])
}

// readFrameHead reads and checks a frame's length prefix and header word.
func readFrameHead(r io.Reader, maxFrameBytes int64) (frameHead, error) {
	if maxFrameBytes <= 0 {
		maxFrameBytes = DefaultMaxFrameBytes
	}
	var head [frameOverhead]byte
	if _, err := io.ReadFull(r, head[:4]); err != nil {
		return frameHead{}, err
	}
	frameLen := int64(int32(binary.BigEndian.Uint32(head[:4])))
	if err := checkFrameLen(frameLen, maxFrameBytes); err != nil {
		return frameHead{}, err
	}
	if _, err := io.ReadFull(r, head[4:]); err != nil {
		return frameHead{}, noEOF(err)
	}
	t, headerLen, err := splitHeaderWord(binary.BigEndian.Uint32(head[4:]), frameLen, maxFrameBytes)
	if err != nil {
		return frameHead{}, err
	}
	return frameHead{t: t, frameLen: frameLen, headerLen: headerLen}, nil
}

// firstChunk is the most a frame's buffer holds before more of the frame
// has arrived: a small frame is read whole into it, a header almost
// always. A larger frame's buffer at most doubles each time it is full and
// more bytes have arrived (grownCap), so it is never more than twice what
// came (and first chunk) however large the length prefix.
const firstChunk = 4 << 10

// grownCap is the capacity a full buffer of c bytes grows to on its way
// to need: at most twice c, and need halved k times (rounded up), so that
// the last growth ends at need instead of just past a doubling that fell
// short of it (which would allocate and copy the frame once more).
func grownCap(c, need int) int {
	next := need
	for next > 2*c {
		next = (next + 1) / 2
	}
	return next
}

// errNoRoom is what a grow function's refusal makes readFrameRest return.
var errNoRoom = errors.New("remoting: no room to buffer the frame")

// growFunc is asked before a frame's buffer takes n more bytes: the first
// chunk (first, which it may not refuse) and every growth after it. It
// reports whether the buffer may grow; a refusal ends the read with
// errNoRoom.
type growFunc func(n int, first bool) bool

// readFrameRest reads the rest of frame h (its header and body) from r
// into a buffer that grows as the bytes arrive, asking grow (if not nil)
// first. On errNoRoom it returns the bytes read so far; the rest of the
// frame is still to be read from r.
func readFrameRest(r io.Reader, h frameHead, grow growFunc) ([]byte, error) {
	need := h.rest()
	size := min(need, firstChunk)
	if grow != nil {
		grow(size, true)
	}
	if b, ok := r.(interface{ Buffered() int }); ok { // what arrived already, at once
		if more := min(need, b.Buffered()) - size; more > 0 && (grow == nil || grow(more, false)) {
			size += more
		}
	}
	buf := make([]byte, 0, size)
	for len(buf) < need {
		if len(buf) == cap(buf) {
			if err := awaitBytes(r); err != nil {
				return buf, noEOF(err)
			}
			n := grownCap(cap(buf), need) - cap(buf)
			if grow != nil && !grow(n, false) {
				return buf, errNoRoom
			}
			buf = append(make([]byte, 0, cap(buf)+n), buf...)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil && len(buf) < need {
			return buf, noEOF(err)
		}
	}
	return buf, nil
}

// awaitBytes waits until r has a byte to read, when r can tell
// (a *bufio.Reader), so that a buffer grows only once bytes for it came.
func awaitBytes(r io.Reader) error {
	if p, ok := r.(interface{ Peek(int) ([]byte, error) }); ok {
		_, err := p.Peek(1)
		return err
	}
	return nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// DecodeFrame decodes b, which must hold exactly one whole frame, length
// prefix included. The command's Body aliases b.
func DecodeFrame(b []byte) (*Command, error) {
	if len(b) < frameOverhead {
		return nil, fmt.Errorf("%w: %d bytes are shorter than a frame's %d-byte prefix", ErrMalformed, len(b), frameOverhead)
	}
	frameLen := int64(int32(binary.BigEndian.Uint32(b)))
	if frameLen != int64(len(b)-4) {
		return nil, fmt.Errorf("%w: length prefix %d, but %d bytes follow it", ErrMalformed, frameLen, len(b)-4)
	}
	t, headerLen, err := splitHeaderWord(binary.BigEndian.Uint32(b[4:]), frameLen, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	return decodeParts(t, b[frameOverhead:frameOverhead+headerLen], b[frameOverhead+headerLen:])
}

// DecodeHeader decodes a header of type t (the bytes after the header word,
// without the body).
func DecodeHeader(t SerializeType, b []byte) (*Command, error) {
	switch t {
	case JSON:
		return decodeJSONHeader(b)
	case RocketMQ:
		return decodeBinaryHeader(b)
	}
	return nil, &HeaderError{Type: t, Reason: "unknown serialize type"}
}

func decodeParts(t SerializeType, header, body []byte) (*Command, error) {
	c, err := DecodeHeader(t, header)
	if err != nil {
		return nil, err
	}
	if len(body) > 0 {
		c.Body = body
	}
	return c, nil
}

// AppendHeader appends c's header alone, encoded as t, to dst (for tests
// and tools; AppendFrame is what goes on the wire).
func (c *Command) AppendHeader(dst []byte, t SerializeType) ([]byte, error) {
	switch t {
	case JSON:
		return appendJSONHeader(dst, c), nil
	case RocketMQ:
		return appendBinaryHeader(dst, c)
	}
	return dst, fmt.Errorf("remoting: cannot encode a header as %s", t)
}
