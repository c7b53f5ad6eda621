package fsx

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"
)

// A filesystem's usage is df's: blocks reserved for root are neither used
// nor free, so a volume with a large reserve is as full as what is on it.
func TestStatfsUsage(t *testing.T) {
	for _, tt := range []struct {
		name                string
		st                  unix.Statfs_t
		wantTotal, wantFree int64
		wantRatio           float64
	}{
		{name: "no reserve", st: unix.Statfs_t{Blocks: 1000, Bfree: 750, Bavail: 750, Frsize: 4096},
			wantTotal: 1000 * 4096, wantFree: 750 * 4096, wantRatio: 0.25},
		{name: "a large reserve", st: unix.Statfs_t{Blocks: 1000, Bfree: 880, Bavail: 240, Frsize: 4096},
			wantTotal: 360 * 4096, wantFree: 240 * 4096, wantRatio: 1.0 / 3},
		{name: "the reserve in use: full for us", st: unix.Statfs_t{Blocks: 1000, Bfree: 30, Bavail: 0, Frsize: 4096},
			wantTotal: 970 * 4096, wantFree: 0, wantRatio: 1},
		{name: "no fragment size: block size", st: unix.Statfs_t{Blocks: 10, Bfree: 5, Bavail: 5, Bsize: 512},
			wantTotal: 10 * 512, wantFree: 5 * 512, wantRatio: 0.5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := statfsUsage(&tt.st)
			assert.Equal(t, tt.wantTotal, u.Total)
			assert.Equal(t, tt.wantFree, u.Free)
			assert.InDelta(t, tt.wantRatio, u.UsedRatio(), 1e-12)
		})
	}
}
