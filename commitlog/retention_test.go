package commitlog_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
)

type fakeClock struct{ ms atomic.Int64 }

func newClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.ms.Store(t.UnixMilli())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.UnixMilli(c.ms.Load()).UTC() }
func (c *fakeClock) Set(t time.Time)         { c.ms.Store(t.UnixMilli()) }
func (c *fakeClock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// retentionLog writes about 6 segments of records stored at start.
func retentionLog(t *testing.T, mem *fsx.MemFS, clock *fakeClock, cfg commitlog.Config) (*commitlog.Log, []stored) {
	t.Helper()
	cfg.FS, cfg.Dir, cfg.SegmentBytes, cfg.CleanInterval, cfg.Now = mem, "/cl", 8<<10, -1, clock.Now
	if cfg.FileReservedTime == 0 {
		cfg.FileReservedTime = time.Hour
	}
	l := open(t, cfg)
	want := appendN(t, l, 0, 120, 300)
	l.SettleAlloc()
	return l, want
}

func TestRetentionDeletesExpiredSegmentsAtDeleteWhen(t *testing.T) {
	mem := fsx.NewMemFS()
	clock := newClock(time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC))
	l, want := retentionLog(t, mem, clock, commitlog.Config{DeleteWhen: "04"})
	defer l.Close()
	segs := len(mustReadDir(t, mem, "/cl"))
	require.GreaterOrEqual(t, segs, 5)

	clock.Set(time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC)) // expired, but not the hour
	res, err := l.Clean()
	require.NoError(t, err)
	assert.Empty(t, res.Deleted)

	held, err := l.Read(want[0].off, len(want[0].b)) // a reader holds the first record
	require.NoError(t, err)

	clock.Set(time.Date(2026, 3, 1, 4, 0, 0, 0, time.UTC))
	res, err = l.Clean()
	require.NoError(t, err)
	// Every segment whose successor's first record is older than an hour
	// goes; the segment holding the newest records stays with the active one.
	assert.Len(t, res.Deleted, segs-2)
	assert.Equal(t, "/cl/00000000000000000000", res.Deleted[0], "oldest first")
	assert.Equal(t, want[0].b, held.B, "a held region stays valid after its segment is deleted")
	held.Release()
	assert.Len(t, mustReadDir(t, mem, "/cl"), 2)
	_, err = l.Read(want[0].off, 8)
	require.ErrorIs(t, err, commitlog.ErrOffsetTooSmall)
	got := readAll(t, l)
	require.NotEmpty(t, got)
	assert.Equal(t, l.MinOffset(), got[0].off)
	assert.Equal(t, want[len(want)-len(got):], got, "what remains is the newest records, intact")
	assert.Equal(t, int64(segs-2), l.Stats().SegmentsDelete)
}

func TestRetentionRespectsBatchMaxAndFreshSegments(t *testing.T) {
	mem := fsx.NewMemFS()
	clock := newClock(time.Date(2026, 3, 1, 4, 0, 0, 0, time.UTC))
	l, _ := retentionLog(t, mem, clock, commitlog.Config{DeleteWhen: "04", DeleteFilesBatchMax: 2})
	defer l.Close()
	res, err := l.Clean()
	require.NoError(t, err)
	assert.Empty(t, res.Deleted, "nothing is older than FileReservedTime")
	clock.Advance(2 * time.Hour)
	clock.Set(time.Date(2026, 3, 2, 4, 0, 0, 0, time.UTC))
	res, err = l.Clean()
	require.NoError(t, err)
	assert.Len(t, res.Deleted, 2)
}

func TestRetentionByDiskUsage(t *testing.T) {
	mem := fsx.NewMemFS()
	clock := newClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var ratio atomic.Value
	ratio.Store(0.5)
	const total = 1 << 30
	mem.SetUsage(func(int64) fsx.Usage {
		return fsx.Usage{Total: total, Free: int64((1 - ratio.Load().(float64)) * total)}
	})
	l, _ := retentionLog(t, mem, clock, commitlog.Config{DeleteWhen: "04"})
	defer l.Close()
	segs := len(mustReadDir(t, mem, "/cl"))

	// Above 75 %: expired segments go at any hour; fresh ones stay.
	ratio.Store(0.80)
	res, err := l.Clean()
	require.NoError(t, err)
	assert.Empty(t, res.Deleted, "not expired yet")
	clock.Advance(2 * time.Hour)
	res, err = l.Clean()
	require.NoError(t, err)
	assert.Len(t, res.Deleted, segs-2)
	assert.False(t, res.DiskFull)
	assert.InDelta(t, 0.80, res.UsedRatio, 1e-9)

	// Above 85 %: the oldest go even when not expired, until usage drops.
	var deleted int
	l3mem := fsx.NewMemFS()
	l3mem.SetUsage(func(int64) fsx.Usage {
		// each deleted segment frees 2 % of the disk
		r := 0.90 - 0.02*float64(deleted)
		return fsx.Usage{Total: total, Free: int64((1 - r) * total)}
	})
	l3, want := retentionLog(t, l3mem, clock, commitlog.Config{DeleteWhen: "04"})
	defer l3.Close()
	l3mem.SetHook(func(op fsx.Op, _ string) {
		if op == fsx.OpRemove {
			deleted++
		}
	})
	res, err = l3.Clean()
	require.NoError(t, err)
	assert.Len(t, res.Deleted, 3, "0.90 -> 0.88 -> 0.86 -> 0.84: three forced deletions")
	l3mem.SetHook(nil)
	assert.Equal(t, want[len(want)-1].off, readAll(t, l3)[len(readAll(t, l3))-1].off)
}

func TestDiskFullRefusesAppendsUntilSpaceReturns(t *testing.T) {
	mem := fsx.NewMemFS()
	clock := newClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var ratio atomic.Value
	ratio.Store(0.5)
	mem.SetUsage(func(int64) fsx.Usage {
		return fsx.Usage{Total: 1 << 30, Free: int64((1 - ratio.Load().(float64)) * (1 << 30))}
	})
	l, _ := retentionLog(t, mem, clock, commitlog.Config{DeleteWhen: "04", DiskForceCleanRatio: 0.99, DiskFullRatio: 0.90})
	defer l.Close()
	ratio.Store(0.95)
	res, err := l.Clean()
	require.NoError(t, err)
	assert.True(t, res.DiskFull)
	end := l.MaxOffset()
	_, err = l.Append(t.Context(), record(t, 999, 100), nil)
	require.ErrorIs(t, err, commitlog.ErrDiskFull)
	assert.Equal(t, end, l.MaxOffset(), "nothing appended")
	r, err := l.Read(l.MinOffset(), 8)
	require.NoError(t, err, "reads keep working")
	r.Release()

	ratio.Store(0.70)
	res, err = l.Clean()
	require.NoError(t, err)
	assert.False(t, res.DiskFull)
	_, err = l.Append(t.Context(), record(t, 1000, 100), nil)
	require.NoError(t, err)
}

func mustReadDir(t *testing.T, fs fsx.FS, dir string) []string {
	t.Helper()
	names, err := fs.ReadDir(dir)
	require.NoError(t, err)
	var segs []string
	for _, n := range names {
		if _, err := strconv.ParseUint(n, 10, 64); err == nil && len(n) == 20 {
			segs = append(segs, n)
		}
	}
	return segs
}
