package replication

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by calls on a closed Master or Slave.
	ErrClosed = errors.New("replication: closed")
	// ErrProtocol means a peer sent bytes that break the protocol; the
	// connection is closed.
	ErrProtocol = errors.New("replication: protocol violation")
	// ErrFrameTooLarge is the kind of every *FrameTooLargeError.
	ErrFrameTooLarge = errors.New("replication: frame larger than the limit")
	// ErrRefused is the kind of every *RefusedError.
	ErrRefused = errors.New("replication: refused")
	// ErrOffset is the kind of every *OffsetError.
	ErrOffset = errors.New("replication: frame not at the replica's end")
)

// FrameTooLargeError reports a frame header announcing a body longer than
// the limit. It unwraps to ErrFrameTooLarge and ErrProtocol.
type FrameTooLargeError struct {
	Offset int64  // the frame's log offset
	Len    uint32 // the body length announced
	Max    int    // the limit
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("replication: frame at %d announces a body of %d bytes, more than the limit of %d", e.Offset, e.Len, e.Max)
}

// Unwrap returns ErrFrameTooLarge and ErrProtocol.
func (e *FrameTooLargeError) Unwrap() []error { return []error{ErrFrameTooLarge, ErrProtocol} }

// RefusedError reports a handshake refused: by the master (its welcome's
// reason) or by the slave (the master's welcome does not suit it). It
// unwraps to ErrRefused.
type RefusedError struct {
	By     string // "master" or "slave"
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("replication: %s refused the replica: %s", e.By, e.Reason)
}

// Unwrap returns ErrRefused.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// OffsetError reports a data frame whose offset is not the replica's log
// end. It unwraps to ErrOffset.
type OffsetError struct {
	Frame int64 // the frame's offset
	End   int64 // the replica's log end
}

func (e *OffsetError) Error() string {
	return fmt.Sprintf("replication: data frame at offset %d, but the replica's log ends at %d", e.Frame, e.End)
}

// Unwrap returns ErrOffset.
func (e *OffsetError) Unwrap() error { return ErrOffset }
