package commitlog_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gantrymq/gantry/commitlog"
)

// appendBatch appends n records of bodySize as one batch (one flush under
// WriteBuffered with sync flush) and returns what the log stored.
func appendBatch(t *testing.T, l *commitlog.Log, from, n, bodySize int) []stored {
	t.Helper()
	var batch []byte
	for i := from; i < from+n; i++ {
		batch = append(batch, record(t, i, bodySize)...)
	}
	var offs []int64
	res, err := l.Append(t.Context(), batch, func(_ []byte, off int64) { offs = append(offs, off) })
	require.NoError(t, err)
	require.Equal(t, n, res.Records)
	out := make([]stored, n)
	for i, off := range offs {
		out[i] = stored{off: off, b: expected(t, record(t, from+i, bodySize), off, res.StoreTimestamp)}
	}
	return out
}

// countPads counts the block fillers ("PAD!") in the log's segment files.
func countPads(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, f := range segmentFiles(t, dir) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		n += bytes.Count(b, []byte("PAD!"))
	}
	return n
}

// directSupported reports whether dir's file system takes O_DIRECT.
func directSupported(t *testing.T, dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, "direct-probe"), os.O_CREATE|os.O_WRONLY|syscall.O_DIRECT, 0o644)
	if errors.Is(err, syscall.EINVAL) {
		return false
	}
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Remove(f.Name()))
	return true
}

// WriteBuffered writes large flushes with O_DIRECT (on file systems that
// take it, as t.TempDir's ext4 here does), padding each to a block with a
// filler that every reader steps over: Read, CopyRecords (which copies
// the last flushes from memory), ReadCopy and recovery, clean or not.
// With NoDirectWrites nothing is padded.
func TestBufferedDirectWrites(t *testing.T) {
	for _, tt := range []struct {
		name     string
		noDirect bool
	}{{"direct", false}, {"page-cache", true}} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := commitlog.Config{Dir: t.TempDir(), SegmentBytes: 1 << 20, FlushMode: commitlog.SyncFlush}.Mode(commitlog.WriteBuffered).NoDirect(tt.noDirect)
			if !tt.noDirect && !directSupported(t, cfg.Dir) {
				t.Skip("the test directory's file system does not take O_DIRECT")
			}
			l := open(t, cfg)
			want := appendN(t, l, 0, 1, 100) // a small flush: through the page cache, unaligned
			for i := range 30 {              // ~100 KiB flushes: padded, then direct; three segments
				want = append(want, appendBatch(t, l, 1+100*i, 100, 1000)...)
				if i%7 == 3 {
					want = append(want, appendN(t, l, 10000+i, 2, 50)...)
				}
			}
			require.Greater(t, l.Stats().SegmentsRolled, int64(1))
			assert.Equal(t, want, readAll(t, l))
			for _, size := range []int{4096, 300 << 10} {
				assert.Equal(t, want, copyAll(t, l, size), "a buffer of %d bytes", size)
			}
			spans := make([]commitlog.Span, len(want))
			for i, w := range want {
				spans[i] = commitlog.Span{Off: w.off, End: w.off + int64(len(w.b))}
			}
			cp, err := l.ReadCopy(spans)
			require.NoError(t, err)
			at := 0
			for i, w := range want {
				r := cp.Region(at, at+len(w.b))
				require.Equal(t, w.b, r.B, "record %d at %d", i, w.off)
				r.Release()
				at += len(w.b)
			}
			cp.Release()

			// Flushes across a roll, and the first in a segment after a
			// small one, are not written directly.
			pads := countPads(t, cfg.Dir)
			if tt.noDirect {
				assert.Zero(t, pads)
				assert.Zero(t, l.Stats().DirectWrites)
			} else {
				assert.GreaterOrEqual(t, pads, 20, "large flushes are padded")
				assert.GreaterOrEqual(t, l.Stats().DirectWrites, int64(15))
			}
			end := l.MaxOffset()
			require.NoError(t, l.Close())

			l = open(t, cfg)
			assert.True(t, l.Recovery().Clean)
			assert.Equal(t, end, l.MaxOffset())
			assert.Equal(t, want, readAll(t, l))
			want = append(want, appendBatch(t, l, 5000, 100, 1000)...)
			want = append(want, appendBatch(t, l, 6000, 100, 1000)...)
			assert.Equal(t, want, copyAll(t, l, 64<<10))
			end = l.MaxOffset()
			l.Abandon() // a crash: recovery scans the padded tail

			l = open(t, cfg)
			defer l.Close()
			assert.False(t, l.Recovery().Clean)
			assert.Nil(t, l.Recovery().TornTail)
			assert.Empty(t, l.Recovery().Corrupt)
			assert.Equal(t, end, l.MaxOffset())
			assert.Equal(t, want, readAll(t, l))
			assert.Equal(t, want, copyAll(t, l, 1<<20))
		})
	}
}

// Segments written directly are read, past what the last flushes keep in
// memory, in blocks read with O_DIRECT into the log's own buffers
// (blocks.go): each block once by a reader going through the log, and
// nothing of them comes into the page cache. Many readers at once, at
// random places, read what was written.
func TestDirectSegmentsBlockReads(t *testing.T) {
	cfg := commitlog.Config{Dir: t.TempDir(), SegmentBytes: 4 << 20, FlushMode: commitlog.SyncFlush}.Mode(commitlog.WriteBuffered)
	if !directSupported(t, cfg.Dir) {
		t.Skip("the test directory's file system does not take O_DIRECT")
	}
	l := open(t, cfg)
	var want []stored
	for i := range 60 { // ~6 MiB of ~100 KiB flushes, nearly all direct; two segments
		want = append(want, appendBatch(t, l, 100*i, 100, 1000)...)
	}
	require.Greater(t, l.Stats().DirectWrites, int64(40))
	require.NoError(t, l.Close())
	for _, f := range segmentFiles(t, cfg.Dir) { // nothing of the log in the page cache
		fd, err := os.Open(f)
		require.NoError(t, err)
		require.NoError(t, unix.Fadvise(int(fd.Fd()), 0, 0, unix.FADV_DONTNEED))
		require.NoError(t, fd.Close())
	}

	l = open(t, cfg) // recovery reads the last segment, not the first
	defer l.Close()
	resident := pageCount(t, l.ResidentPages)
	const window = 4 << 20 // the first segment
	before := resident(0, window)
	require.Less(t, before, 100)

	assert.Equal(t, want, copyAll(t, l, 64<<10)) // CopyRecords
	reads := l.Stats().BlockReads
	assert.GreaterOrEqual(t, reads, int64(6), "a block at a time")
	assert.LessOrEqual(t, reads, int64(8), "each block once")
	for _, w := range want { // ReadCopy, from the cached blocks of the last segment and from the disk
		cp, err := l.ReadCopy([]commitlog.Span{{Off: w.off, End: w.off + int64(len(w.b))}})
		require.NoError(t, err)
		require.Equal(t, w.b, cp.Region(0, len(w.b)).B)
		cp.Release()
	}
	assert.LessOrEqual(t, resident(0, window), before+4, "the page cache is left alone")

	var wg sync.WaitGroup
	for g := range 24 { // more readers than blocks
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 200 {
				w := want[rng.IntN(len(want))]
				cp, err := l.ReadCopy([]commitlog.Span{{Off: w.off, End: w.off + int64(len(w.b))}})
				if !assert.NoError(t, err) || !assert.Equal(t, w.b, cp.Region(0, len(w.b)).B) {
					return
				}
				cp.Release()
			}
		})
	}
	wg.Wait()
}
