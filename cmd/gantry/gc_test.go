package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gantrymq/gantry/internal/memlimit"
)

func TestServerGCMemoryLimit(t *testing.T) {
	prevLimit, prevGC := debug.SetMemoryLimit(-1), debug.SetGCPercent(-1)
	debug.SetGCPercent(prevGC)
	t.Cleanup(func() { debug.SetMemoryLimit(prevLimit); debug.SetGCPercent(prevGC) })

	t.Setenv("GOGC", "100") // left alone
	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(math.MaxInt64)
	assert.Equal(t, "1.0 GiB (memoryLimit)", serverGC(1<<30))
	assert.Equal(t, int64(1<<30), debug.SetMemoryLimit(-1))

	debug.SetMemoryLimit(math.MaxInt64)
	assert.Equal(t, "off (memoryLimit=off)", serverGC(memlimit.Off))
	assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1), "off sets nothing")

	note := serverGC(0)
	assert.Contains(t, note, "50% of", "sized from the machine: %s", note)
	limit := debug.SetMemoryLimit(-1)
	assert.Greater(t, limit, int64(40<<20), "not the old 40 MiB")
	assert.Less(t, limit, int64(math.MaxInt64))

	t.Setenv("GOMEMLIMIT", "3GiB")
	debug.SetMemoryLimit(math.MaxInt64)
	assert.Equal(t, "GOMEMLIMIT=3GiB", serverGC(1<<30), "the environment wins")
	assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1), "as the runtime read it at start")
	assert.Equal(t, prevGC, debug.SetGCPercent(prevGC), "GOGC set: the percentage is left alone")
}

// The load generator's soft limit grows with the bodies in flight, so
// that it never throttles a load larger than the defaults'.
func TestBenchMemoryLimit(t *testing.T) {
	tests := []struct {
		inflight, size int
		want           int64
	}{
		{4096, 1024, 40 << 20},     // the defaults: 16 MiB in flight
		{0, 0, 40 << 20},           // consume: no sends
		{65536, 16 << 10, 4 << 30}, // 1 GiB in flight
		{-1, 1024, 40 << 20},       // nonsense is not negative
		{20000, 1000, 80_000_000},  // 4 x 20 MB in flight
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, benchMemoryLimit(tt.inflight, tt.size), "%d in flight of %d bytes", tt.inflight, tt.size)
	}
}
