package remoting

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Config configures a Server's connections, and a Client's (DialOptions).
// The zero value of every field means its default.
type Config struct {
	// MaxFrameBytes limits one frame, length prefix included, read or
	// written. A peer that sends a larger frame is disconnected; a larger
	// response is replaced by SYSTEM_ERROR. Default DefaultMaxFrameBytes
	// (16 MiB, Java's frameMaxLength); at least 1 KiB.
	MaxFrameBytes int64
	// MaxBufferedBytesPerConn bounds the bytes one connection holds in
	// frames: the frame being read (its buffer grows as its bytes arrive)
	// and the requests read whose handlers have not returned. A frame
	// that would not fit is not read until handlers return: the peer
	// waits, as TCP makes it. Default twice MaxFrameBytes (32 MiB); at
	// least MaxFrameBytes.
	MaxBufferedBytesPerConn int64
	// MaxBufferedBytes bounds the same over all of a server's connections
	// (a dialed connection's: its own). A frame whose bytes would go over
	// it is refused: a request is answered SYSTEM_BUSY, naming the limit,
	// and the rest of its bytes are read and dropped; the connection stays
	// open. The first 4 KiB of every frame are never refused (so a
	// refusal can be answered, and small requests such as heartbeats and
	// pulls go through), but they count. Default 64 MiB, raised to
	// MaxBufferedBytesPerConn if that is larger; at least
	// MaxBufferedBytesPerConn.
	MaxBufferedBytes int64
	// MaxConcurrentPerConn bounds the requests of one connection handled at
	// once. When it is reached the connection is not read (not even for
	// responses to Conn.Invoke) until a handler returns, so it must stay
	// well above the number of requests a client holds open (long-polling
	// pulls). Default 256.
	MaxConcurrentPerConn int
	// IdleTimeout closes a connection that sent nothing for this long.
	// Default 120 s (Java closes channels idle for 120 s); negative: never.
	IdleTimeout time.Duration
	// WriteTimeout bounds the writing of one frame; a connection whose
	// write times out is closed. Default 30 s; negative: no bound other
	// than the caller's context.
	WriteTimeout time.Duration
	// Logger receives connection lifecycle (Debug), malformed frames
	// (Warn) and handler panics (Error). Default: discard.
	Logger *slog.Logger
}

const (
	defaultMaxConcurrentPerConn = 256
	defaultMaxBufferedBytes     = 64 << 20
	defaultIdleTimeout          = 120 * time.Second
	defaultWriteTimeout         = 30 * time.Second
	minMaxFrameBytes            = 1 << 10
)

func (c Config) withDefaults() Config {
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if c.MaxBufferedBytesPerConn == 0 {
		c.MaxBufferedBytesPerConn = 2 * c.MaxFrameBytes
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = max(defaultMaxBufferedBytes, c.MaxBufferedBytesPerConn)
	}
	if c.MaxConcurrentPerConn == 0 {
		c.MaxConcurrentPerConn = defaultMaxConcurrentPerConn
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = defaultIdleTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = defaultWriteTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c. Zero fields are valid (defaults).
func (c Config) Validate() error {
	var errs []error
	if c.MaxFrameBytes != 0 && (c.MaxFrameBytes < minMaxFrameBytes || c.MaxFrameBytes > 1<<31) {
		errs = append(errs, fmt.Errorf("remoting: MaxFrameBytes must be in [%d, %d], got %d", minMaxFrameBytes, int64(1)<<31, c.MaxFrameBytes))
	}
	d := c.withDefaults()
	if c.MaxBufferedBytesPerConn != 0 && c.MaxBufferedBytesPerConn < d.MaxFrameBytes {
		errs = append(errs, fmt.Errorf("remoting: MaxBufferedBytesPerConn %d is below MaxFrameBytes %d: a frame would never fit", c.MaxBufferedBytesPerConn, d.MaxFrameBytes))
	}
	if c.MaxBufferedBytes != 0 && c.MaxBufferedBytes < d.MaxBufferedBytesPerConn {
		errs = append(errs, fmt.Errorf("remoting: MaxBufferedBytes %d is below MaxBufferedBytesPerConn %d", c.MaxBufferedBytes, d.MaxBufferedBytesPerConn))
	}
	if c.MaxConcurrentPerConn < 0 {
		errs = append(errs, fmt.Errorf("remoting: MaxConcurrentPerConn must not be negative, got %d", c.MaxConcurrentPerConn))
	}
	return errors.Join(errs...)
}
