package remoting

import (
	"errors"
	"fmt"
)

var (
	// ErrMalformed means bytes are not a valid frame or header. A stream
	// that carried one cannot be resynchronized: close the connection.
	ErrMalformed = errors.New("remoting: malformed frame")
	// ErrFrameTooLarge means a frame is over the size limit.
	ErrFrameTooLarge = errors.New("remoting: frame too large")
	// ErrClosed means the connection, client or server is closed.
	ErrClosed = errors.New("remoting: closed")
	// ErrBusy means a frame was refused because the server buffers
	// Config.MaxBufferedBytes already.
	ErrBusy = errors.New("remoting: busy")
)

// FrameSizeError is a frame refused for its sizes, before any of it was
// allocated: a length prefix that is negative, below 4 or (with the prefix)
// over Max, or a header length beyond the frame. It unwraps to
// ErrFrameTooLarge when the frame is over Max, else to ErrMalformed.
type FrameSizeError struct {
	// FrameLen is the length prefix: the bytes after it.
	FrameLen int64
	// HeaderLen is the header length from the header word, -1 when the
	// frame was refused before it was read.
	HeaderLen int64
	// Max is the limit on a whole frame, length prefix included.
	Max int64
}

func (e *FrameSizeError) Error() string {
	switch {
	case e.FrameLen < 4:
		return fmt.Sprintf("remoting: malformed frame: length %d is below 4", e.FrameLen)
	case e.FrameLen+4 > e.Max:
		return fmt.Sprintf("remoting: frame too large: %d bytes, limit %d", e.FrameLen+4, e.Max)
	}
	return fmt.Sprintf("remoting: malformed frame: header length %d exceeds frame length %d", e.HeaderLen, e.FrameLen)
}

func (e *FrameSizeError) Unwrap() error {
	if e.FrameLen >= 4 && e.FrameLen+4 > e.Max {
		return ErrFrameTooLarge
	}
	return ErrMalformed
}

// HeaderError is a header that does not decode: its encoding, the byte
// offset in the header where decoding stopped, and why. It unwraps to
// ErrMalformed.
type HeaderError struct {
	Type   SerializeType
	Offset int
	Reason string
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("remoting: malformed %s header at byte %d: %s", e.Type, e.Offset, e.Reason)
}

func (e *HeaderError) Unwrap() error { return ErrMalformed }
