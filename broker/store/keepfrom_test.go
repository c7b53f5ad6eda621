package store_test

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/internal/fsx"
)

// Retention does not delete, for its age, a segment holding an offset at
// or above KeepFrom; once the pin moves on, it does.
func TestRetentionKeepFrom(t *testing.T) {
	mem := fsx.NewMemFS()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 3, 1, 2, 30, 0, 0, time.UTC).UnixMilli())
	cfg := testConfig(t, "/store", mem)
	cfg.Now = func() time.Time { return time.UnixMilli(clock.Load()).UTC() }
	cfg.Log.FileReservedTime = time.Hour
	cfg.Log.DeleteWhen = "04"
	var keep atomic.Int64
	cfg.KeepFrom = keep.Load
	s := openStore(t, cfg)
	defer func() { _ = s.Close() }()
	res := putAll(t, s, 0, 3000) // about 6 segments of 64 KiB
	waitDispatched(t, s)
	pinned := res[1000].PhysicalOffset
	keep.Store(pinned)

	clock.Add((2 * time.Hour).Milliseconds())
	cr, err := s.CommitLog().Clean()
	require.NoError(t, err)
	require.NotEmpty(t, cr.Deleted, "segments wholly below the pin go")
	require.NotEmpty(t, cr.Pinned)
	logMin := s.CommitLog().MinOffset()
	assert.LessOrEqual(t, logMin, pinned, "the pinned record's segment stays")
	assert.Greater(t, logMin+64<<10, pinned, "no segment before it stays")
	m, err := s.MessageAt(pinned)
	require.NoError(t, err)
	assert.Equal(t, "body-1000", string(m.Body))

	cr, err = s.CommitLog().Clean()
	require.NoError(t, err)
	assert.Empty(t, cr.Deleted, "still pinned")

	keep.Store(math.MaxInt64)
	cr, err = s.CommitLog().Clean()
	require.NoError(t, err)
	assert.NotEmpty(t, cr.Deleted)
	assert.Empty(t, cr.Pinned)
	assert.Greater(t, s.CommitLog().MinOffset(), pinned)
}

// RaiseQueueMin hides a queue's entries below an offset; it never lowers
// the min offset, and retention's trim does not lower it either.
func TestRaiseQueueMin(t *testing.T) {
	cfg := testConfig(t, "/store", fsx.NewMemFS())
	s := openStore(t, cfg)
	defer func() { _ = s.Close() }()
	putAll(t, s, 0, 300)
	waitDispatched(t, s)
	_, maxOff := s.QueueOffsets("Orders", 0)
	assert.Equal(t, int64(10), s.RaiseQueueMin("Orders", 0, 10))
	assert.Equal(t, int64(10), s.RaiseQueueMin("Orders", 0, 5), "never lowered")
	assert.Equal(t, maxOff, s.RaiseQueueMin("Orders", 0, maxOff+100), "at most the max offset")
	assert.Equal(t, int64(0), s.RaiseQueueMin("Nope", 0, 10), "an unknown queue")
	s.RaiseQueueMin("Orders", 1, 10)
	g, err := s.Get("Orders", 1, 3, 8, 1<<20, nil)
	require.NoError(t, err)
	assert.Equal(t, store.OffsetTooSmall, g.Status)
	assert.Equal(t, int64(10), g.NextOffset)
	require.NoError(t, s.Trim())
	minOff, _ := s.QueueOffsets("Orders", 1)
	assert.Equal(t, int64(10), minOff)
}
