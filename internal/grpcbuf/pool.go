// Package grpcbuf is a gRPC buffer pool that does not zero the buffers it
// hands out.
//
// gRPC's default pool (mem.DefaultBufferPool) clears every buffer it
// returns, so that no data of an earlier message can leak into a later
// one. gRPC writes every byte of a buffer it asks for before it reads it
// (a message is marshalled into a buffer of its exact size; a frame is
// read into a buffer of its exact length), so for Gantry the clearing is
// pure cost: a pull response of 256 messages of 1 KiB is cleared in a
// 512 KiB buffer, a large share of the broker's CPU when it serves pulls
// (docs/decisions/0009-grpc-buffers-and-flow-window.md).
package grpcbuf

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

const (
	minShift = 8  // 256 B: smaller buffers are allocated, not pooled
	maxShift = 24 // 16 MiB: larger ones too
)

// Pool is a mem.BufferPool of power-of-two tiers whose Get returns a
// buffer with whatever its last user left in it.
type Pool struct {
	tiers [maxShift + 1]sync.Pool
}

var _ mem.BufferPool = (*Pool)(nil)

// Shared is the pool the broker's server and Gantry's client use.
var Shared = &Pool{}

// shift returns the tier of a buffer of n bytes: the smallest power of two
// at least n.
func shift(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

// Get returns a buffer of length n; its content is unspecified.
func (p *Pool) Get(n int) *[]byte {
	s := shift(n)
	if s < minShift || s > maxShift {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.tiers[s].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<s)
	return &b
}

// Put returns a buffer that Get returned (others are dropped).
func (p *Pool) Put(b *[]byte) {
	c := cap(*b)
	s := shift(c)
	if s < minShift || s > maxShift || c != 1<<s {
		return
	}
	p.tiers[s].Put(b)
}
