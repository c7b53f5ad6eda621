package commitlog_test

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/testutil"
)

// kib1 is a 1 KiB record (body 1024 - header - topic - properties).
func kib1(b *testing.B, i int) []byte {
	rec := record(b, i, 1024-len(record(b, i, 0)))
	require.Len(b, rec, 1024)
	return rec
}

// kib64 is a batch of 64 1 KiB records.
func kib64(b *testing.B) []byte {
	var batch []byte
	for i := range 64 {
		batch = append(batch, kib1(b, i)...)
	}
	return batch
}

// BenchmarkAppendAsync appends batches of 64 1 KiB records with async
// flush, in each write mode (mapped is the default). Run it over at least
// 2 GiB so segments roll:
//
//	go test -run=^$ -bench=AppendAsync -benchtime=40000x ./commitlog
func BenchmarkAppendAsync(b *testing.B) {
	for _, mode := range []commitlog.WriteMode{commitlog.WriteDirect, commitlog.WriteMapped, commitlog.WriteHybrid} {
		b.Run("write="+mode.String(), func(b *testing.B) { benchAppendAsync(b, mode) })
	}
}

func benchAppendAsync(b *testing.B, mode commitlog.WriteMode) {
	l, err := commitlog.Open(b.Context(), commitlog.Config{Dir: testutil.BenchDir(b)}.Mode(mode))
	require.NoError(b, err)
	defer l.Close()
	batch := kib64(b)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	require.NoError(b, l.WaitPrefault(b.Context())) // the first segment's one-time pre-fault is not append work
	syscall.Sync()                                  // start with no dirty pages left by an earlier run, whose writeback would share the disk
	ctx := b.Context()
	cpu0 := testutil.ProcessCPU(b)
	for b.Loop() {
		if _, err := l.Append(ctx, batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// The process's CPU (the pre-faulter's included) per appended record.
	b.ReportMetric(float64(testutil.ProcessCPU(b)-cpu0)/float64(l.Stats().Records), "cpu-ns/record")
	b.ReportMetric(float64(l.Stats().Records)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(l.Stats().SegmentsRolled), "rolls")
}

// BenchmarkAppendSync appends single 1 KiB records from 64 goroutines with
// sync flush (each waits until its record is durable):
//
//	go test -run=^$ -bench=AppendSync -benchtime=500000x ./commitlog
func BenchmarkAppendSync(b *testing.B) {
	yes, no := true, false
	for _, mode := range []struct {
		name string
		mode commitlog.WriteMode
		zero *bool
	}{
		{"buffered-zerofill", commitlog.WriteBuffered, &yes},
		{"buffered", commitlog.WriteBuffered, &no},
		{"mapped", commitlog.WriteMapped, &no},
	} {
		b.Run(mode.name, func(b *testing.B) {
			l, err := commitlog.Open(b.Context(), commitlog.Config{Dir: testutil.BenchDir(b), FlushMode: commitlog.SyncFlush, ZeroFillAhead: mode.zero}.Mode(mode.mode))
			require.NoError(b, err)
			defer l.Close()
			rec := kib1(b, 1)
			const appenders = 64
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			start := l.Stats()
			var wg sync.WaitGroup
			per := b.N / appenders
			l.SettleAlloc() // the next segment's preallocation is not part of the measurement
			b.ResetTimer()
			t0 := time.Now()
			for range appenders {
				wg.Go(func() {
					for range per {
						if _, err := l.Append(b.Context(), rec, nil); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			el := time.Since(t0)
			b.StopTimer()
			st := l.Stats()
			b.ReportMetric(float64(st.Records-start.Records)/el.Seconds(), "records/s")
			b.ReportMetric(float64(st.Records-start.Records)/float64(max(st.Flushes-start.Flushes, 1)), "records/flush")
		})
	}
}

// BenchmarkReadAfterFlush reads back, record by record, 64 MiB of 1 KiB
// records that were appended, read once (as the broker's dispatcher reads
// each record it indexes) and then flushed: what a consumer catching up on
// a backlog makes the broker do. Each op appends, reads and flushes (not
// timed) and then reads again (timed) a fresh 64 MiB:
//
//	go test -run=^$ -bench=ReadAfterFlush -benchtime=12x ./commitlog
func BenchmarkReadAfterFlush(b *testing.B) {
	for _, mode := range []commitlog.WriteMode{commitlog.WriteMapped, commitlog.WriteHybrid} {
		b.Run("write="+mode.String(), func(b *testing.B) {
			l, err := commitlog.Open(b.Context(), commitlog.Config{Dir: testutil.BenchDir(b)}.Mode(mode))
			require.NoError(b, err)
			defer l.Close()
			batch := kib64(b)
			// read touches the first and the last byte of every record
			// from off on, as a pull's check and its copy do.
			var sum int64
			read := func(off int64) (records int64) {
				for off < l.MaxOffset() {
					rec, next, err := l.ReadRecord(off)
					if err != nil {
						b.Fatal(err)
					}
					sum += int64(rec.B[len(rec.B)-1])
					rec.Release()
					off = next
					records++
				}
				return records
			}
			const chunk = 64 << 20
			var records int64
			for b.Loop() {
				b.StopTimer()
				from := l.MaxOffset()
				for l.MaxOffset()-from < chunk {
					if _, err := l.Append(b.Context(), batch, nil); err != nil {
						b.Fatal(err)
					}
				}
				read(from)
				require.NoError(b, l.Flush())
				b.StartTimer()
				records += read(from)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records), "ns/record")
			_ = sum
		})
	}
}

// BenchmarkRecoverFullSegment measures Open after a crash with a full
// 1 GiB segment to validate (no checkpoint: every record is checked). With
// GANTRY_DROP_CACHES=1 (root only) the page cache is dropped before each
// Open, so the segment is read from disk:
//
//	go test -run=^$ -bench=RecoverFullSegment -benchtime=5x ./commitlog
func BenchmarkRecoverFullSegment(b *testing.B) {
	dir := testutil.BenchDir(b)
	l, err := commitlog.Open(b.Context(), commitlog.Config{Dir: dir})
	require.NoError(b, err)
	batch := kib64(b)
	for l.MaxOffset() < l.SegmentBytes()+int64(len(batch)) { // fill segment 0, spill into 1
		_, err := l.Append(b.Context(), batch, nil)
		require.NoError(b, err)
	}
	require.NoError(b, l.Flush())
	l.SettleAlloc()
	l.Abandon()
	cp := filepath.Join(dir, "commitlog.checkpoint")
	var records int64
	for b.Loop() {
		b.StopTimer()
		require.NoError(b, os.Remove(cp))
		if os.Getenv("GANTRY_DROP_CACHES") == "1" {
			require.NoError(b, os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200))
		}
		b.StartTimer()
		l, err := commitlog.Open(b.Context(), commitlog.Config{Dir: dir})
		require.NoError(b, err)
		b.StopTimer()
		records = l.Recovery().RecordsScanned
		l.SettleAlloc()
		l.Abandon()
		b.StartTimer()
	}
	b.ReportMetric(float64(records), "records")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/recovery")
}
