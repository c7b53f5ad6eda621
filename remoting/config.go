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
	defaultIdleTimeout          = 120 * time.Second
	defaultWriteTimeout         = 30 * time.Second
	minMaxFrameBytes            = 1 << 10
)

func (c Config) withDefaults() Config {
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
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
	if c.MaxConcurrentPerConn < 0 {
		errs = append(errs, fmt.Errorf("remoting: MaxConcurrentPerConn must not be negative, got %d", c.MaxConcurrentPerConn))
	}
	return errors.Join(errs...)
}
