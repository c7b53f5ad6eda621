package histogram

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestBucketsCoverEveryValue(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 1000, 1 << 20, 1<<40 + 12345, 1<<63 - 1} {
		i := index(v)
		if lo, hi := lowest(i), lowest(i+1); v < lo || v >= hi {
			t.Fatalf("value %d in bucket %d = [%d, %d)", v, i, lo, hi)
		}
		if i > 0 && lowest(i)-lowest(i-1) > 1 && float64(lowest(i+1)-lowest(i))/float64(lowest(i)) > 1.0/64 {
			t.Fatalf("bucket %d too wide: [%d, %d)", i, lowest(i), lowest(i+1))
		}
	}
}

func TestQuantilesMatchSortedSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var vals []time.Duration
	for range 100_000 {
		d := time.Duration(rng.ExpFloat64() * float64(200*time.Microsecond))
		vals = append(vals, d)
		h.Record(d)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		want := vals[min(int(q*float64(len(vals))+0.5), len(vals))-1]
		got := h.Quantile(q)
		if diff := float64(got-want) / float64(want); diff < -0.01 || diff > 0.01 {
			t.Errorf("q%.3f: got %v, want %v (within 1%%)", q, got, want)
		}
	}
	if h.Max() != vals[len(vals)-1] || h.Count() != int64(len(vals)) {
		t.Errorf("max %v count %d", h.Max(), h.Count())
	}
}

func TestConcurrentRecordAndMerge(t *testing.T) {
	var a, b Histogram
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 10_000 {
				a.Record(time.Duration(g*10_000 + i))
			}
		})
	}
	wg.Wait()
	b.Record(time.Hour)
	b.Merge(&a)
	if b.Count() != 40_001 || b.Max() != time.Hour {
		t.Fatalf("count %d max %v", b.Count(), b.Max())
	}
	if testing.AllocsPerRun(100, func() { a.Record(time.Millisecond) }) != 0 {
		t.Fatal("Record allocates")
	}
}
