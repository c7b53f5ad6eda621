package commitlog_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
)

// ResetTo empties a log into one that starts at a later segment boundary,
// with the cut on record; appends then go there.
func TestResetTo(t *testing.T) {
	mem := fsx.NewMemFS()
	cfg := commitlog.Config{FS: mem, Dir: "/s/commitlog", StateDir: "/s", SegmentBytes: truncSeg, CleanInterval: -1, Logger: testLogger(t)}
	recs := truncLog(t, cfg, 60)
	oldEnd := recs[len(recs)-1].off + int64(len(recs[len(recs)-1].b))
	at := (oldEnd/truncSeg + 3) * truncSeg

	for _, bad := range []int64{at + 1, oldEnd / truncSeg * truncSeg, 0} {
		_, err := commitlog.ResetTo(t.Context(), cfg, bad, "test")
		require.ErrorIs(t, err, commitlog.ErrTruncateOffset, "offset %d", bad)
	}
	assert.Empty(t, truncations(t, mem, "/s"), "a refused reset is not recorded")

	rep, err := commitlog.ResetTo(t.Context(), cfg, at, "behind the master")
	require.NoError(t, err)
	assert.Equal(t, 60, rep.Records)
	assert.Equal(t, recs[0].off, rep.FirstOffset)
	assert.Equal(t, recs[59].off, rep.LastOffset)
	assert.Equal(t, at, rep.Offset)
	assert.Equal(t, oldEnd, rep.OldEnd)
	recorded := truncations(t, mem, "/s")
	require.Len(t, recorded, 1)
	assert.Equal(t, "behind the master", recorded[0].Reason)
	assert.Equal(t, 60, recorded[0].Records)

	l := open(t, cfg)
	assert.Equal(t, at, l.MinOffset())
	assert.Equal(t, at, l.MaxOffset())
	res, err := l.Append(t.Context(), record(t, 1, 300), nil)
	require.NoError(t, err)
	assert.Equal(t, at, res.Offset)
	require.Len(t, readAll(t, l), 1)
	require.NoError(t, l.Close())

	again, err := commitlog.ResetTo(t.Context(), cfg, at+truncSeg, "again")
	require.NoError(t, err)
	assert.Equal(t, 1, again.Records)
}

// TestResetToCrashStates takes the state a power cut would leave before
// every filesystem operation of a reset: each opens as the old log or a
// prefix of it (its last segments removed, the records below intact), an
// empty log, or the reset one; a retry resets any of them.
func TestResetToCrashStates(t *testing.T) {
	mem := fsx.NewMemFS()
	cfg := commitlog.Config{FS: mem, Dir: "/s/commitlog", StateDir: "/s", SegmentBytes: truncSeg, CleanInterval: -1, Logger: testLogger(t)}
	recs := truncLog(t, cfg, 60)
	oldEnd := recs[len(recs)-1].off + int64(len(recs[len(recs)-1].b))
	at := (oldEnd/truncSeg + 2) * truncSeg
	rng := rand.New(rand.NewPCG(5, 6))
	var states int
	var failures []error
	check := func(fs *fsx.MemFS) {
		states++
		c := cfg
		c.FS = fs
		l, err := commitlog.Open(t.Context(), c)
		if err != nil {
			failures = append(failures, fmt.Errorf("state %d: open: %w", states, err))
			return
		}
		defer l.Close()
		got := readAll(t, l)
		switch end := l.MaxOffset(); {
		case end == at && l.MinOffset() == at, end == 0 && len(got) == 0:
		case l.MinOffset() == 0 && (end == oldEnd || end%truncSeg == 0) && assert.ObjectsAreEqual(recs[:len(got)], got):
		default:
			failures = append(failures, fmt.Errorf("state %d: log [%d, %d) with %d records: neither the old log, an empty one nor the reset one",
				states, l.MinOffset(), end, len(got)))
		}
	}
	mem.SetHook(func(fsx.Op, string) {
		check(mem.Crash(nil))
		check(mem.Crash(rng))
	})
	_, err := commitlog.ResetTo(t.Context(), cfg, at, "crash test")
	mem.SetHook(nil)
	require.NoError(t, err)
	check(mem.Crash(nil))
	t.Logf("%d crash states checked", states)
	assert.NoError(t, errors.Join(failures...))
	assert.Greater(t, states, 5)
}
