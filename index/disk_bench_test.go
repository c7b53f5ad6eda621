//go:build linux

package index

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// fewEntries is what the disk benchmarks index: a broker holding a few
// messages.
const fewEntries = 10

// putFew opens a store of default-sized files in dir and indexes
// fewEntries keys, flushed.
func putFew(tb testing.TB, dir string) *Store {
	tb.Helper()
	s, err := Open(tb.Context(), Config{Dir: dir})
	require.NoError(tb, err)
	for i := range int64(fewEntries) {
		require.NoError(tb, s.Put(fmt.Sprintf("TopicTest#key-%d", i), i*200, t0+i*1000))
	}
	require.NoError(tb, s.Flush())
	return s
}

// diskBytes is the disk the files of dir take (st_blocks × 512), and their
// apparent size.
func diskBytes(tb testing.TB, dir string) (disk, size int64) {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(tb, err)
	for _, e := range ents {
		var st syscall.Stat_t
		require.NoError(tb, syscall.Stat(filepath.Join(dir, e.Name()), &st))
		disk += st.Blocks * 512
		size += st.Size
	}
	return disk, size
}

// BenchmarkCreateFew measures creating a store's first index file (default
// size: 5,000,000 slots, 20,000,000 entries) and indexing a few keys in it,
// and reports the disk the file takes.
func BenchmarkCreateFew(b *testing.B) {
	var disk, size int64
	i := 0
	for b.Loop() {
		dir := filepath.Join(b.TempDir(), fmt.Sprint(i))
		i++
		s := putFew(b, dir)
		b.StopTimer()
		disk, size = diskBytes(b, dir)
		require.NoError(b, s.Close())
		require.NoError(b, os.RemoveAll(dir)) // keep the disk free for the next round
		b.StartTimer()
	}
	b.ReportMetric(float64(disk), "disk-B")
	b.ReportMetric(float64(size), "size-B")
}

// BenchmarkOpenFew measures opening (recovering) a store whose one
// default-sized index file holds a few entries.
func BenchmarkOpenFew(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "index")
	require.NoError(b, putFew(b, dir).Close())
	f0 := minorFaults(b)
	for b.Loop() {
		s, err := Open(b.Context(), Config{Dir: dir})
		require.NoError(b, err)
		require.NoError(b, s.Close())
	}
	b.ReportMetric(float64(minorFaults(b)-f0)/float64(b.N), "faults/op")
	disk, size := diskBytes(b, dir)
	b.ReportMetric(float64(disk), "disk-B")
	b.ReportMetric(float64(size), "size-B")
}

// minorFaults is the process's minor page faults so far: a page of a
// mapping touched (read or written) for the first time.
func minorFaults(tb testing.TB) int64 {
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return ru.Minflt
}
