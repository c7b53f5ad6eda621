// Package histogram records latencies in a fixed log-linear histogram (HDR
// style: 2^subBits buckets per power of two, so every recorded value is
// known to within 1/2^subBits, ~0.8 %) and reports percentiles. Recording
// is lock-free and allocation-free; merge per-goroutine histograms for
// reports.
package histogram

import (
	"math/bits"
	"sync/atomic"
	"time"
)

const (
	subBits    = 7 // 128 sub-buckets per power of two
	subCount   = 1 << subBits
	groupCount = 64 - subBits + 1
)

// Histogram counts durations (nanoseconds, 1 ns .. ~292 years).
type Histogram struct {
	counts [groupCount * subCount]atomic.Int64
	n      atomic.Int64
	sum    atomic.Int64
	max    atomic.Int64
}

// index maps v >= 0 to its bucket.
func index(v uint64) int {
	if v < subCount {
		return int(v)
	}
	g := bits.Len64(v) - subBits // >= 1
	return g*subCount + int(v>>(g-1)) - subCount
}

// lowest returns the smallest value of bucket i.
func lowest(i int) uint64 {
	g, s := i/subCount, uint64(i%subCount)
	if g == 0 {
		return s
	}
	return (s + subCount) << (g - 1)
}

// Record adds one observation.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[index(uint64(v))].Add(1)
	h.n.Add(1)
	h.sum.Add(v)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// Merge adds o's observations to h.
func (h *Histogram) Merge(o *Histogram) {
	for i := range o.counts {
		if c := o.counts[i].Load(); c != 0 {
			h.counts[i].Add(c)
		}
	}
	h.n.Add(o.n.Load())
	h.sum.Add(o.sum.Load())
	for m := o.max.Load(); ; { // concurrent merges keep the largest
		cur := h.max.Load()
		if m <= cur || h.max.CompareAndSwap(cur, m) {
			break
		}
	}
}

// Count returns the number of observations.
func (h *Histogram) Count() int64 { return h.n.Load() }

// Mean returns the average observation.
func (h *Histogram) Mean() time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / n)
}

// Max returns the largest observation.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Quantile returns the value below or at which a fraction q (0..1) of the
// observations lie, as the upper end of its bucket (never above Max).
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := int64(q*float64(n) + 0.5)
	rank = min(max(rank, 1), n)
	var seen int64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			upper := lowest(i+1) - 1
			return min(time.Duration(upper), h.Max())
		}
	}
	return h.Max()
}
