package commitlog_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
)

// fileBytes reads what the segment file holding stored record w has at
// w's place, through a descriptor of its own: what the kernel has, which
// a crash of the process cannot take back.
func fileBytes(t *testing.T, dir string, segBytes int64, w stored) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, segmentName(w.off/segBytes*segBytes)))
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, len(w.b))
	_, err = f.ReadAt(b, w.off%segBytes)
	require.NoError(t, err)
	return b
}

// Under async flush the default write mode is WriteBuffered: an append
// returns once its records are in the segment file (so a process crash
// loses nothing acknowledged), not once they are durable. One message at
// a time is copied into the mapping, with a window after it pre-faulted;
// batches past that window are written with O_DIRECT, and batches inside
// it (whose pages the window brought into the page cache) never are.
func TestAsyncWritesThrough(t *testing.T) {
	cfg := commitlog.Config{Dir: t.TempDir(), SegmentBytes: 4 << 20, PrefaultAhead: 256 << 10}
	direct := directSupported(t, cfg.Dir)
	l := open(t, cfg)
	defer l.Close()
	require.Equal(t, commitlog.WriteBuffered, l.WriteMode())
	require.NoError(t, l.WaitPrefault(t.Context()))

	var want []stored
	for i := range 20 { // one at a time: through the mapping
		w := appendBatch(t, l, i, 1, 1000)
		require.Equal(t, w[0].b, fileBytes(t, cfg.Dir, cfg.SegmentBytes, w[0]), "record %d in the file on return", i)
		want = append(want, w...)
	}
	assert.Zero(t, l.Stats().DirectWrites)
	for i := range 2 { // batches inside the pre-faulted window: not direct
		want = append(want, appendBatch(t, l, 20+100*i, 100, 1000)...)
	}
	assert.Zero(t, l.Stats().DirectWrites, "no direct write over the window")
	for i := range 20 { // batches past it
		ws := appendBatch(t, l, 300+100*i, 100, 1000)
		for _, w := range ws {
			require.Equal(t, w.b, fileBytes(t, cfg.Dir, cfg.SegmentBytes, w))
		}
		want = append(want, ws...)
	}
	if direct {
		assert.Positive(t, l.Stats().DirectWrites, "batches past the window go direct")
	}
	assert.Less(t, l.FlushedOffset(), l.MaxOffset(), "written, not yet durable")
	assert.Equal(t, want, readAll(t, l))
	assert.Equal(t, want, copyAll(t, l, 64<<10))

	require.NoError(t, l.Close())
	l = open(t, cfg)
	defer l.Close()
	assert.Equal(t, want, readAll(t, l), "recovered, fillers stepped over")
}

// A log killed without Close (no final flush) keeps every record an
// append returned for: they were in the files.
func TestAsyncWritesThroughProcessCrash(t *testing.T) {
	cfg := commitlog.Config{Dir: t.TempDir(), SegmentBytes: 1 << 20, PrefaultAhead: 64 << 10,
		FlushInterval: 1 << 62, FlushThoroughInterval: 1 << 62}
	l := open(t, cfg)
	var want []stored
	for i := range 30 {
		want = append(want, appendBatch(t, l, 100*i, 1+i%7*30, 900)...)
	}
	require.Less(t, l.FlushedOffset(), l.MaxOffset(), "not flushed")
	dir := copyDir(t, cfg.Dir) // the files as the process left them
	l2 := open(t, commitlog.Config{Dir: dir, SegmentBytes: cfg.SegmentBytes})
	defer l2.Close()
	assert.False(t, l2.Recovery().Clean)
	assert.Equal(t, want, readAll(t, l2))
	require.NoError(t, l.Close())
}

// An idle log lets go of its staging buffers (once no append came since
// the last pass) and of its block cache (once no block was read since);
// both come back when needed.
func TestTrimIdle(t *testing.T) {
	cfg := commitlog.Config{Dir: t.TempDir(), SegmentBytes: 4 << 20, PrefaultAhead: -1, CheckpointInterval: time.Hour}
	if !directSupported(t, cfg.Dir) {
		t.Skip("the test directory's file system does not take O_DIRECT")
	}
	l := open(t, cfg)
	defer l.Close()
	var want []stored
	for i := range 60 { // ~6 MiB in ~100 KiB writes, nearly all direct
		want = append(want, appendBatch(t, l, 100*i, 100, 1000)...)
	}
	var mark commitlog.IdleMark
	l.TrimIdle(&mark) // appends since the last pass: kept
	staged, blocks := l.MappedStages()
	require.Positive(t, staged)
	require.Zero(t, blocks)

	l.TrimIdle(&mark)
	staged, _ = l.MappedStages()
	require.Zero(t, staged, "idle: staging buffers unmapped")
	assert.Equal(t, want, copyAll(t, l, 64<<10), "read from the disk, in blocks")
	require.Positive(t, l.Stats().BlockReads)
	l.TrimIdle(&mark) // blocks read since the last pass: kept
	_, blocks = l.MappedStages()
	require.Positive(t, blocks)
	l.TrimIdle(&mark)
	_, blocks = l.MappedStages()
	require.Zero(t, blocks, "idle: block cache unmapped")

	assert.Equal(t, want, copyAll(t, l, 64<<10))
	want = append(want, appendBatch(t, l, 6000, 100, 1000)...)
	assert.Equal(t, want, readAll(t, l))
}
