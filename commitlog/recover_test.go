package commitlog_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/testutil"
)

// writeLog appends n records in segments of segBytes and abandons the log
// (a process crash: the page cache keeps everything, the abort marker stays).
func writeLog(t *testing.T, segBytes int64, n, bodySize int) (string, []stored) {
	t.Helper()
	dir := t.TempDir()
	l := open(t, commitlog.Config{Dir: dir, SegmentBytes: segBytes})
	want := appendN(t, l, 0, n, bodySize)
	require.NoError(t, l.Flush())
	require.NoError(t, l.CheckpointNow())
	l.SettleAlloc()
	l.Abandon()
	return dir, want
}

func TestRecoverAfterProcessCrash(t *testing.T) {
	dir, want := writeLog(t, 8<<10, 100, 200)
	l := open(t, commitlog.Config{Dir: dir})
	defer l.Close()
	r := l.Recovery()
	assert.False(t, r.Clean)
	assert.True(t, r.CheckpointFound)
	assert.Nil(t, r.TornTail)
	assert.Equal(t, want, readAll(t, l))
	assert.Equal(t, l.MaxOffset(), l.FlushedOffset())
	b, err := os.ReadFile(filepath.Join(dir, "recovery-report.json"))
	require.NoError(t, err)
	var onDisk commitlog.RecoveryReport
	require.NoError(t, json.Unmarshal(b, &onDisk))
	assert.Equal(t, r.MaxOffset, onDisk.MaxOffset)
}

func lastSegmentWithData(dir string, want []stored, segBytes int64) string {
	last := want[len(want)-1].off
	return filepath.Join(dir, segmentName(last/segBytes*segBytes))
}

func segmentName(base int64) string { return fsx.OffsetName(base) }

// Truncating the last segment at every byte inside its last record
// recovers to the end of the previous record.
func TestRecoverTruncatedTailEveryByte(t *testing.T) {
	const seg = 8 << 10
	dir, want := writeLog(t, seg, 30, 100)
	lastRec, prev := want[len(want)-1], want[len(want)-2]
	require.Equal(t, lastRec.off/seg, prev.off/seg, "want the last two records in one segment")
	file := lastSegmentWithData(dir, want, seg)
	lo, hi := lastRec.off%seg, lastRec.off%seg+int64(len(lastRec.b))
	for cut := lo; cut < hi; cut++ {
		d := copyDir(t, dir)
		require.NoError(t, os.Truncate(filepath.Join(d, filepath.Base(file)), cut))
		l, err := commitlog.Open(t.Context(), commitlog.Config{Dir: d, Logger: testLogger(t)})
		require.NoError(t, err, "cut=%d", cut)
		require.Equal(t, lastRec.off, l.MaxOffset(), "cut=%d", cut)
		got := readAll(t, l)
		require.Equal(t, want[:len(want)-1], got, "cut=%d", cut)
		require.NoError(t, l.Close())
	}
}

// A torn write (garbage after the last valid record, nothing valid after
// it) is truncated, zeroed and reported; the log takes appends after it.
func TestRecoverTornTailGarbage(t *testing.T) {
	const seg = 8 << 10
	dir, want := writeLog(t, seg, 20, 100)
	file := lastSegmentWithData(dir, want, seg)
	end := want[len(want)-1].off%seg + int64(len(want[len(want)-1].b))
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0, 0, 1, 0, 0xDA, 0xA3, 0x20, 0xA7, 1, 2, 3, 4, 5}, end) // a record header, then junk
	require.NoError(t, err)
	require.NoError(t, f.Close())

	l := open(t, commitlog.Config{Dir: dir})
	r := l.Recovery()
	require.NotNil(t, r.TornTail)
	assert.Equal(t, want[len(want)-1].off+int64(len(want[len(want)-1].b)), r.TornTail.Offset)
	assert.Equal(t, int64(13), r.TornTail.TruncatedBytes)
	assert.Equal(t, want, readAll(t, l))
	more := appendN(t, l, 20, 5, 100)
	require.NoError(t, l.Close())

	l = open(t, commitlog.Config{Dir: dir})
	defer l.Close()
	assert.Nil(t, l.Recovery().TornTail)
	assert.Equal(t, append(want, more...), readAll(t, l))
}

// A flipped bit in a record followed by valid records is corruption: open
// fails with the segment and offset, unless SkipCorrupt, which keeps every
// later record and reports the damaged range.
func TestRecoverBitFlipFollowedByValidRecords(t *testing.T) {
	const seg = 8 << 10
	dir, want := writeLog(t, seg, 60, 100)
	// Damage a record in the middle of the last segment with data.
	file := lastSegmentWithData(dir, want, seg)
	base := want[len(want)-1].off / seg * seg
	var victim int
	for i, s := range want {
		if s.off >= base {
			victim = i + 2
			break
		}
	}
	require.Less(t, victim, len(want)-2)
	for _, bit := range []int64{0, 7, 8 * 30, 8*int64(len(want[victim].b)) - 1} { // size field, header, middle, last byte
		t.Run("", func(t *testing.T) {
			d := copyDir(t, dir)
			path := filepath.Join(d, filepath.Base(file))
			pos := want[victim].off - base + bit/8
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			b[pos] ^= 1 << (bit % 8)
			require.NoError(t, os.WriteFile(path, b, 0o644))

			_, err = commitlog.Open(t.Context(), commitlog.Config{Dir: d, Logger: testLogger(t)})
			var cerr *commitlog.CorruptError
			require.ErrorAs(t, err, &cerr)
			require.ErrorIs(t, err, commitlog.ErrCorrupt)
			assert.Equal(t, path, cerr.Segment)
			assert.Equal(t, want[victim].off, cerr.Offset)
			assert.Equal(t, want[victim].off-base, cerr.FileOff)
			assert.Equal(t, want[victim+1].off, cerr.NextValid)
			assert.Contains(t, err.Error(), path)

			l := open(t, commitlog.Config{Dir: d, SkipCorrupt: true})
			got := readAll(t, l)
			assert.Equal(t, append(append([]stored{}, want[:victim]...), want[victim+1:]...), got)
			assert.Equal(t, got, copyAll(t, l, 4096), "CopyRecords steps over the hole")
			rep := l.Recovery()
			require.Len(t, rep.Corrupt, 1)
			assert.Equal(t, want[victim].off, rep.Corrupt[0].Offset)
			assert.Equal(t, want[victim+1].off, rep.Corrupt[0].End)
			saved, err := os.ReadFile(rep.Corrupt[0].SavedTo)
			require.NoError(t, err)
			assert.Len(t, saved, len(want[victim].b))
			require.NoError(t, l.Close())

			// The hole is marked: a plain reopen works and keeps the same records.
			l = open(t, commitlog.Config{Dir: d, VerifyAll: true})
			assert.Equal(t, got, readAll(t, l))
			require.NoError(t, l.Close())
		})
	}
}

// Corruption in a sealed segment before the checkpoint is found when
// VerifyAll asks for it; a zeroed range counts as damage too.
func TestRecoverZeroedRangeInSealedSegment(t *testing.T) {
	const seg = 8 << 10
	dir, want := writeLog(t, seg, 100, 100)
	first := filepath.Join(dir, segmentName(0))
	b, err := os.ReadFile(first)
	require.NoError(t, err)
	clear(b[want[3].off : want[3].off+50])
	require.NoError(t, os.WriteFile(first, b, 0o644))
	_, err = commitlog.Open(t.Context(), commitlog.Config{Dir: dir, VerifyAll: true, Logger: testLogger(t)})
	var cerr *commitlog.CorruptError
	require.ErrorAs(t, err, &cerr)
	assert.Equal(t, first, cerr.Segment)
	assert.Equal(t, want[3].off, cerr.Offset)
}

func TestRecoverMissingSegmentIsCorruption(t *testing.T) {
	const seg = 8 << 10
	dir, _ := writeLog(t, seg, 100, 100)
	files := segmentFiles(t, dir)
	require.Greater(t, len(files), 3)
	require.NoError(t, os.Remove(files[1]))
	_, err := commitlog.Open(t.Context(), commitlog.Config{Dir: dir, Logger: testLogger(t)})
	require.ErrorIs(t, err, commitlog.ErrCorrupt)
	require.ErrorContains(t, err, "segment file is missing")
}

func TestRecoverMissingCheckpointScansEverything(t *testing.T) {
	dir, want := writeLog(t, 8<<10, 100, 100)
	require.NoError(t, os.Remove(filepath.Join(dir, "commitlog.checkpoint")))
	l := open(t, commitlog.Config{Dir: dir})
	defer l.Close()
	assert.False(t, l.Recovery().CheckpointFound)
	assert.Equal(t, int64(len(want)), l.Recovery().RecordsScanned)
	assert.Equal(t, want, readAll(t, l))
}

// ENOSPC at fallocate surfaces as ErrDiskFull before anything is written,
// the log stays usable, rolls fail at once for a second after a failed
// attempt (no create per append), and appends resume when space returns.
func TestENOSPCAtFallocate(t *testing.T) {
	var faults fsx.Faults
	dir := t.TempDir()
	clock := testutil.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	cfg := commitlog.Config{Dir: dir, SegmentBytes: 8 << 10, FS: fsx.WithFaults(fsx.OS, &faults), Now: clock.Now}
	l := open(t, cfg)
	defer l.Close()
	l.SettleAlloc()                                                          // the second segment is ready
	appendN(t, l, 0, 30, 200)                                                // rolls into it; the third is being allocated
	l.SettleAlloc()                                                          // let that attempt finish
	remove := faults.Add(fsx.Fault{Op: fsx.OpAllocate, Err: syscall.ENOSPC}) // every later allocation fails
	var err error
	var kept []stored
	for i := 30; i < 200 && err == nil; i++ { // fill up the allocated segments
		rec := record(t, i, 200)
		var res commitlog.AppendResult
		res, err = l.Append(t.Context(), rec, nil)
		if err == nil {
			kept = append(kept, stored{res.Offset, expected(t, rec, res.Offset, res.StoreTimestamp)})
		}
	}
	require.ErrorIs(t, err, commitlog.ErrDiskFull)
	require.ErrorIs(t, err, syscall.ENOSPC)
	end := l.MaxOffset()
	require.NoError(t, l.Flush())
	assert.Equal(t, end, l.FlushedOffset(), "nothing of the failed append is flushed")
	_, err = l.Append(t.Context(), record(t, 1000, 200), nil)
	require.ErrorIs(t, err, commitlog.ErrDiskFull)
	assert.Equal(t, end, l.MaxOffset())

	remove()
	_, err = l.Append(t.Context(), record(t, 1001, 200), nil)
	require.ErrorIs(t, err, commitlog.ErrDiskFull, "within a second of the failure no new attempt is made")
	clock.Advance(time.Second)
	_, err = l.Append(t.Context(), record(t, 1002, 200), nil)
	require.NoError(t, err, "appends resume when space returns")
}

// EIO at msync (mapped), or fdatasync or write (buffered, direct), is final: the appender gets
// ErrFlushFailed, FlushedOffset never covers the failed range, and later
// appends are refused.
func TestEIOAtFlushIsFinal(t *testing.T) {
	for _, tt := range []struct {
		name string
		mode commitlog.WriteMode
		op   fsx.Op
		body int // of the failing append: WriteHybrid writes one of DirectBytes (1,000) or more with pwrite
	}{
		{"mapped-msync", commitlog.WriteMapped, fsx.OpMsync, 100},
		{"buffered-fdatasync", commitlog.WriteBuffered, fsx.OpSync, 100},
		{"buffered-write", commitlog.WriteBuffered, fsx.OpWrite, 100},
		{"direct-fdatasync", commitlog.WriteDirect, fsx.OpSync, 100},
		{"direct-write", commitlog.WriteDirect, fsx.OpWrite, 100},
		{"hybrid-msync", commitlog.WriteHybrid, fsx.OpMsync, 100},
		{"hybrid-write", commitlog.WriteHybrid, fsx.OpWrite, 2000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var faults fsx.Faults
			dir := t.TempDir()
			l := open(t, commitlog.Config{Dir: dir, SegmentBytes: 8 << 10, FS: fsx.WithFaults(fsx.OS, &faults),
				FlushMode: commitlog.SyncFlush, DirectBytes: 1000}.Mode(tt.mode))
			want := appendN(t, l, 0, 5, 100)
			flushed := l.FlushedOffset()
			faults.Add(fsx.Fault{Op: tt.op, Path: "/000", Err: syscall.EIO})
			_, err := l.Append(t.Context(), record(t, 5, tt.body), nil)
			require.ErrorIs(t, err, commitlog.ErrFlushFailed)
			require.ErrorIs(t, err, syscall.EIO)
			assert.Equal(t, flushed, l.FlushedOffset())
			_, err = l.Append(t.Context(), record(t, 6, 100), nil)
			require.ErrorIs(t, err, commitlog.ErrFlushFailed)
			require.ErrorIs(t, l.Flush(), commitlog.ErrFlushFailed)
			assert.Equal(t, flushed, l.FlushedOffset())
			require.Error(t, l.Close())

			faults.Clear()
			l = open(t, commitlog.Config{Dir: dir})
			defer l.Close()
			got := readAll(t, l)
			require.GreaterOrEqual(t, len(got), len(want))
			assert.Equal(t, want, got[:len(want)], "every acknowledged record survives")
		})
	}
}

func TestAsyncFlushEventuallyDurable(t *testing.T) {
	// A tail under FlushLeastPages waits for the thorough flush: when the
	// flusher runs between appends (a busy machine), the last partial page
	// is flushed only after the default 10 s, past the deadline below.
	l := open(t, commitlog.Config{Dir: t.TempDir(), SegmentBytes: 64 << 10, FlushLeastPages: 1,
		FlushInterval: 10 * time.Millisecond, FlushThoroughInterval: 50 * time.Millisecond})
	defer l.Close()
	appendN(t, l, 0, 50, 200)
	require.Eventually(t, func() bool { return l.FlushedOffset() == l.MaxOffset() }, 5e9, 1e6)
	assert.Positive(t, l.Stats().Flushes)
}
