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
// off for inlinePause, after which they are made inline again.
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

	assert.NotNil(t, l.inlineFile(f), "inline at first")
	l.inlineTook("fdatasync", "seg", inlineLimit)
	assert.NotNil(t, l.inlineFile(f), "a call of inlineLimit is not too long")
	l.inlineTook("fdatasync", "seg", inlineLimit+time.Millisecond)
	assert.Nil(t, l.inlineFile(f), "after a slow call")
	now = now.Add(inlinePause - time.Second)
	assert.Nil(t, l.inlineFile(f), "still within the pause")
	now = now.Add(time.Second)
	assert.NotNil(t, l.inlineFile(f), "after the pause")

	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	assert.Nil(t, l.inlineFile(f), "never with one processor")
}
