//go:build linux

package index

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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
// default-sized index file holds a few entries: "warm", the file's pages
// as the previous Open left them in the page cache (a restart), "cold",
// written back and evicted first (a restart after a reboot).
func BenchmarkOpenFew(b *testing.B) {
	for _, cold := range []bool{false, true} {
		b.Run(map[bool]string{false: "warm", true: "cold"}[cold], func(b *testing.B) { benchOpenFew(b, cold) })
	}
}

func benchOpenFew(b *testing.B, cold bool) {
	dir := filepath.Join(b.TempDir(), "index")
	require.NoError(b, putFew(b, dir).Close())
	var faults int64
	for b.Loop() {
		if cold {
			b.StopTimer()
			evict(b, dir)
			b.StartTimer()
		}
		f0 := minorFaults(b)
		s, err := Open(b.Context(), Config{Dir: dir})
		require.NoError(b, err)
		faults += minorFaults(b) - f0
		b.StopTimer()
		require.NoError(b, s.Close())
		b.StartTimer()
	}
	f0 := faults
	b.ReportMetric(float64(f0)/float64(b.N), "faults/op")
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

// evict writes the files of dir back and drops them from the page cache.
func evict(tb testing.TB, dir string) {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(tb, err)
	for _, e := range ents {
		f, err := os.OpenFile(filepath.Join(dir, e.Name()), os.O_RDWR, 0)
		require.NoError(tb, err)
		require.NoError(tb, f.Sync())
		require.NoError(tb, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
		require.NoError(tb, f.Close())
	}
}
