package index

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Benchmark sizes: a tenth of the default slots and entries, so a file is
// 42 MB instead of 420 MB.
const (
	benchSlots   = 500_000
	benchEntries = 2_000_000
)

func benchStore(b *testing.B) *Store {
	b.Helper()
	s, err := Open(b.Context(), Config{Dir: b.TempDir(), SlotCount: benchSlots, EntryCount: benchEntries})
	require.NoError(b, err)
	b.Cleanup(func() { s.Close() })
	return s
}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("TopicTest#order-%08d", i)
	}
	return keys
}

func BenchmarkPut(b *testing.B) {
	s := benchStore(b)
	keys := benchKeys(1 << 16)
	var i int64
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Put(keys[i&(1<<16-1)], i*200, t0+i); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(s.Files()), "files")
}

func BenchmarkLookup(b *testing.B) {
	const records = 1_000_000
	s := benchStore(b)
	keys := benchKeys(records / 4) // 4 records a key
	for i := range int64(records) {
		require.NoError(b, s.Put(keys[i%int64(len(keys))], i*200, t0+i))
	}
	r := rand.New(rand.NewPCG(1, 1))
	lat := make([]time.Duration, 0, 1<<20)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		got, err := s.Lookup(keys[r.IntN(len(keys))], 0, math.MaxInt64, 32)
		lat = append(lat, time.Since(start))
		if err != nil || len(got) != 4 {
			b.Fatalf("got %v, %v", got, err)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-us")
}
