package replication

import (
	"errors"
	"fmt"

	"github.com/gantrymq/gantry/replication/epoch"
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

var (
	// ErrTruncateNeeded is the kind of every *TruncateNeededError.
	ErrTruncateNeeded = errors.New("replication: the replica's log must be truncated")
	// ErrResyncNeeded is the kind of every *ResyncNeededError.
	ErrResyncNeeded = errors.New("replication: the replica must copy the master's log from its first offset")
	// ErrStaleEpoch means a data frame's epoch is older than the replica's
	// last epoch entry: bytes of an epoch the replica has moved past. It
	// comes wrapped with ErrProtocol; the connection is closed.
	ErrStaleEpoch = errors.New("replication: frame from an old epoch")
)

// TruncateNeededError stops a Slave whose log extends past the history it
// shares with the master (epoch.LastCommonPoint of the two epoch lists):
// bytes the master lacks, written by an older master or by this replica
// while it was master. The slave appends nothing and does not reconnect;
// its owner truncates the log to To (commitlog.Truncate, then the epoch
// file's TruncateAfter) and starts the slave again. It unwraps to
// ErrTruncateNeeded.
type TruncateNeededError struct {
	To  int64 // the common point: the offset to truncate the log to
	Cut int64 // the bytes past it: the replica's log end minus To
}

func (e *TruncateNeededError) Error() string {
	return fmt.Sprintf("replication: the replica's log ends at %d, past %d, the end of the history it shares with the master: truncate it to %d (%d bytes) and restart the slave",
		e.To+e.Cut, e.To, e.To, e.Cut)
}

// Unwrap returns ErrTruncateNeeded.
func (e *TruncateNeededError) Unwrap() error { return ErrTruncateNeeded }

// ResyncNeededError stops a Slave whose log ends below the master's first
// offset: retention on the master deleted the bytes that would follow
// (a replica long gone, or with an empty disk). The slave appends nothing
// and does not reconnect; its owner empties its log to start at From
// (broker.ResetLog), makes its epoch file the master's entries up to From
// (Epochs) and starts the slave again. It unwraps to ErrResyncNeeded.
type ResyncNeededError struct {
	From   int64         // the master's first offset
	End    int64         // the replica's log end
	Epochs []epoch.Entry // the master's epoch list
}

func (e *ResyncNeededError) Error() string {
	return fmt.Sprintf("replication: the replica's log ends at %d, below the master's first offset %d: empty it to start at %d and restart the slave",
		e.End, e.From, e.From)
}

// Unwrap returns ErrResyncNeeded.
func (e *ResyncNeededError) Unwrap() error { return ErrResyncNeeded }
