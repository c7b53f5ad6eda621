package commitlog

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

// Writes and syncs are made inline while they are quick and a second
// processor is there; one that takes longer than inlineLimit turns them
// off for inlinePauseMin, a slow one right after that pause for twice as
// long (up to inlinePauseMax), and a quick one sets the pause back.
func TestInlineCallsBackOffAfterASlowOne(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs GOMAXPROCS >= 2")
	}
	now := time.Unix(1_000_000, 0)
	l, err := Open(t.Context(), Config{Dir: t.TempDir(), SegmentBytes: 64 << 10, FlushMode: SyncFlush, Now: func() time.Time { return now }})
	require.NoError(t, err)
	defer l.Close()
	f := l.segs.Load().last().file
	require.Implements(t, (*fsx.InlineFile)(nil), f)
	slow := func() { l.inlineTook("fdatasync", "seg", inlineLimit+time.Millisecond) }
	// pausedFor checks that inline calls are off for d from now, then
	// moves the clock past it.
	pausedFor := func(d time.Duration, msg string) {
		t.Helper()
		assert.Nil(t, l.inlineFile(f), "%s: paused", msg)
		now = now.Add(d - time.Millisecond)
		assert.Nil(t, l.inlineFile(f), "%s: still paused just before %v", msg, d)
		now = now.Add(time.Millisecond)
		assert.NotNil(t, l.inlineFile(f), "%s: inline again after %v", msg, d)
	}

	assert.NotNil(t, l.inlineFile(f), "inline at first")
	l.inlineTook("fdatasync", "seg", inlineLimit)
	assert.NotNil(t, l.inlineFile(f), "a call of inlineLimit is not too long")
	slow()
	pausedFor(inlinePauseMin, "a slow call")
	slow()
	pausedFor(2*inlinePauseMin, "another right after the pause")
	for range 10 {
		slow()
		now = now.Add(inlinePauseMax)
	}
	slow()
	pausedFor(inlinePauseMax, "the longest pause")
	l.inlineTook("fdatasync", "seg", time.Millisecond)
	slow()
	pausedFor(inlinePauseMin, "a quick call sets the pause back")

	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	assert.Nil(t, l.inlineFile(f), "never with one processor")
}
