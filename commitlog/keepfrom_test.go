package commitlog_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
)

// KeepFrom stops deletion by age at the first segment holding an offset at
// or above it, is asked once a pass, and does not hold back deletion
// forced by disk use.
func TestRetentionKeepFromPins(t *testing.T) {
	mem := fsx.NewMemFS()
	clock := newClock(time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC))
	var keep int64
	asked := 0
	l, want := retentionLog(t, mem, clock, commitlog.Config{DeleteWhen: "04", KeepFrom: func() int64 { asked++; return keep }})
	defer l.Close()
	keep = want[len(want)/2].off

	res, err := l.Clean()
	require.NoError(t, err)
	assert.Empty(t, res.Deleted)
	assert.Zero(t, asked, "not asked while nothing is due")

	clock.Set(time.Date(2026, 3, 1, 4, 0, 0, 0, time.UTC))
	res, err = l.Clean()
	require.NoError(t, err)
	assert.NotEmpty(t, res.Deleted)
	assert.NotEmpty(t, res.Pinned)
	assert.Equal(t, 1, asked, "asked once a pass")
	assert.LessOrEqual(t, l.MinOffset(), keep)
	_, err = l.Read(keep, 8)
	require.NoError(t, err, "the pinned offset is readable")

	mem.SetUsage(func(int64) fsx.Usage { return fsx.Usage{Total: 100, Free: 5} }) // 95 % used: forced
	res, err = l.Clean()
	require.NoError(t, err)
	assert.NotEmpty(t, res.Deleted, "forced deletion ignores the pin")
	assert.Greater(t, l.MinOffset(), keep)
}

// DeleteFloor holds back every deletion at the first segment holding an
// offset at or above it: deletion by age and deletion forced by disk use
// alike. Without it, forced cleaning could delete records the store has
// not dispatched yet.
func TestRetentionDeleteFloorHoldsForcedCleaning(t *testing.T) {
	mem := fsx.NewMemFS()
	clock := newClock(time.Date(2026, 3, 1, 4, 0, 0, 0, time.UTC))
	var floor int64
	l, want := retentionLog(t, mem, clock, commitlog.Config{DeleteWhen: "04", DeleteFloor: func() int64 { return floor }})
	defer l.Close()

	mem.SetUsage(func(int64) fsx.Usage { return fsx.Usage{Total: 100, Free: 5} }) // 95 % used: forced
	res, err := l.Clean()
	require.NoError(t, err)
	assert.Empty(t, res.Deleted, "nothing is dispatched: nothing may go")
	assert.NotEmpty(t, res.Held)
	assert.Zero(t, l.MinOffset())

	floor = want[len(want)/2].off
	clock.Advance(2 * time.Hour) // expired too
	res, err = l.Clean()
	require.NoError(t, err)
	assert.NotEmpty(t, res.Deleted, "what is below the floor may go")
	assert.NotEmpty(t, res.Held)
	assert.LessOrEqual(t, l.MinOffset(), floor)
	for _, w := range want {
		if w.off >= floor {
			r, err := l.Read(w.off, len(w.b))
			require.NoError(t, err, "offset %d at or above the floor", w.off)
			assert.Equal(t, w.b, r.B)
			r.Release()
		}
	}
}
