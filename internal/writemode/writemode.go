// Package writemode lets the module's tests choose how a commit log writes
// its appends. Outside tests the commit log chooses itself from its flush
// mode (see docs/decisions/0023-commit-log-chooses-how-it-writes.md); nothing else
// in the module sets it.
package writemode

import "context"

// Mode is a way of writing appends into the segment files.
type Mode int

const (
	// Auto lets the log choose (the default).
	Auto Mode = iota
	// Mapped copies appends into the segment's mapping.
	Mapped
	// Buffered stages appends and writes them whole (O_DIRECT where it can).
	Buffered
	// Direct writes each append with pwrite.
	Direct
	// Hybrid writes large appends with pwrite, small ones into the mapping.
	Hybrid
)

func (m Mode) String() string {
	switch m {
	case Mapped:
		return "mapped"
	case Buffered:
		return "buffered"
	case Direct:
		return "direct"
	case Hybrid:
		return "hybrid"
	}
	return "auto"
}

type key struct{}

// With returns a context that makes a commit log opened with it write in m.
func With(ctx context.Context, m Mode) context.Context { return context.WithValue(ctx, key{}, m) }

// From returns the mode ctx asks for, Auto if none.
func From(ctx context.Context) Mode {
	m, _ := ctx.Value(key{}).(Mode)
	return m
}
