package commitlog_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/testutil"
	"github.com/gantrymq/gantry/message"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func modes() []struct {
	name string
	cfg  commitlog.Config
} {
	return []struct {
		name string
		cfg  commitlog.Config
	}{
		{"async-mapped", commitlog.Config{FlushMode: commitlog.AsyncFlush}},
		{"async-hybrid", commitlog.Config{FlushMode: commitlog.AsyncFlush}.Mode(commitlog.WriteHybrid)},
		{"async-hybrid-small", commitlog.Config{FlushMode: commitlog.AsyncFlush, DirectBytes: 300}.Mode(commitlog.WriteHybrid)},
		{"sync-buffered", commitlog.Config{FlushMode: commitlog.SyncFlush}},
		{"sync-mapped", commitlog.Config{FlushMode: commitlog.SyncFlush}.Mode(commitlog.WriteMapped)},
		{"async-direct", commitlog.Config{FlushMode: commitlog.AsyncFlush}.Mode(commitlog.WriteDirect)},
		{"sync-direct", commitlog.Config{FlushMode: commitlog.SyncFlush}.Mode(commitlog.WriteDirect)},
	}
}

func TestAppendReadReopen(t *testing.T) {
	for _, mode := range modes() {
		t.Run(mode.name, func(t *testing.T) {
			cfg := mode.cfg
			cfg.Dir = t.TempDir()
			cfg.SegmentBytes = 8 << 10
			l := open(t, cfg)
			want := appendN(t, l, 0, 100, 300) // ~400 B records: several segment rolls
			require.NoError(t, l.Flush())
			assert.Equal(t, l.MaxOffset(), l.FlushedOffset())
			assert.Equal(t, want, readAll(t, l))
			assert.Greater(t, l.Stats().SegmentsRolled, int64(3))
			require.NoError(t, l.Close())
			require.ErrorIs(t, l.Close(), commitlog.ErrClosed)

			l = open(t, cfg)
			defer l.Close()
			assert.True(t, l.Recovery().Clean)
			assert.Equal(t, want, readAll(t, l))
			more := appendN(t, l, 100, 10, 300)
			assert.Equal(t, append(want, more...), readAll(t, l))
		})
	}
}

func TestBatchAppendStampsEveryRecord(t *testing.T) {
	l := open(t, commitlog.Config{Dir: t.TempDir(), SegmentBytes: 64 << 10})
	defer l.Close()
	var batch []byte
	var recs [][]byte
	for i := range 64 {
		r := record(t, i, 100)
		recs = append(recs, r)
		batch = append(batch, r...)
	}
	var offs []int64
	res, err := l.Append(t.Context(), batch, func(rec []byte, off int64) {
		offs = append(offs, off)
		message.SetQueueOffset(rec, int64(len(offs)-1))
	})
	require.NoError(t, err)
	require.Equal(t, 64, res.Records)
	require.Len(t, offs, 64)
	got := readAll(t, l)
	require.Len(t, got, 64)
	for i, s := range got {
		assert.Equal(t, offs[i], s.off)
		assert.Equal(t, int64(i), message.QueueOffsetOf(s.b))
		assert.NoError(t, message.Check(s.b, s.off, true))
		m, _, err := message.Decode(s.b)
		require.NoError(t, err)
		assert.Equal(t, messageFor(i, 100).Body, m.Body)
	}
}

func TestAppendRejectsBadBatches(t *testing.T) {
	l := open(t, commitlog.Config{Dir: t.TempDir(), SegmentBytes: 8 << 10})
	defer l.Close()
	noCRC, err := message.Append(nil, messageFor(1, 10), false)
	require.NoError(t, err)
	good := record(t, 1, 10)
	tests := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"empty", nil, commitlog.ErrInvalidBatch},
		{"no crc tail", noCRC, commitlog.ErrInvalidBatch},
		{"truncated", good[:len(good)-1], commitlog.ErrInvalidBatch},
		{"garbage", []byte("hello, world, this is not a record at all"), commitlog.ErrInvalidBatch},
		{"larger than a segment", record(t, 2, 9<<10), commitlog.ErrRecordTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.Append(t.Context(), tt.batch, nil)
			require.ErrorIs(t, err, tt.want)
		})
	}
	assert.Equal(t, int64(0), l.MaxOffset(), "nothing was appended")
}

func TestConcurrentAppendersAndReaders(t *testing.T) {
	for _, mode := range modes() {
		t.Run(mode.name, func(t *testing.T) {
			cfg := mode.cfg
			cfg.Dir = t.TempDir()
			cfg.SegmentBytes = 32 << 10
			l := open(t, cfg)
			defer l.Close()
			const writers, per = 8, 200
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for w := range writers {
				wg.Go(func() {
					for i := range per {
						_, err := l.Append(t.Context(), record(t, w*per+i, 64+i%200), nil)
						assert.NoError(t, err)
					}
				})
			}
			var rwg sync.WaitGroup
			rwg.Go(func() { // a reader chasing the writers
				off := int64(0)
				for {
					select {
					case <-stop:
						return
					default:
					}
					r, next, err := l.ReadRecord(off)
					if errors.Is(err, commitlog.ErrOffsetTooBig) {
						time.Sleep(time.Millisecond)
						continue
					}
					if !assert.NoError(t, err) {
						return
					}
					assert.NoError(t, message.Check(r.B, next-int64(len(r.B)), true))
					r.Release()
					off = next
				}
			})
			wg.Wait()
			close(stop)
			rwg.Wait()
			got := readAll(t, l)
			require.Len(t, got, writers*per)
			seen := map[int32]bool{}
			for _, s := range got {
				require.NoError(t, message.Check(s.b, s.off, true))
				flag := message.Message{}
				_, err := message.DecodeInto(&flag, s.b, false)
				require.NoError(t, err)
				assert.False(t, seen[flag.Flag], "record %d twice", flag.Flag)
				seen[flag.Flag] = true
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	l := open(t, commitlog.Config{Dir: t.TempDir(), SegmentBytes: 8 << 10})
	defer l.Close()
	want := appendN(t, l, 0, 3, 50)
	_, err := l.Read(l.MaxOffset(), 1)
	require.ErrorIs(t, err, commitlog.ErrOffsetTooBig)
	_, _, err = l.ReadRecord(l.MaxOffset())
	require.ErrorIs(t, err, commitlog.ErrOffsetTooBig)
	_, err = l.Read(-1, 1)
	require.ErrorIs(t, err, commitlog.ErrOffsetTooSmall)
	r, err := l.Read(want[1].off, len(want[1].b))
	require.NoError(t, err)
	assert.Equal(t, want[1].b, r.B)
	r.Release()
}

// CopyRecords returns every record ReadRecord does, whole, with any buffer
// size: over segment fillers, across the ends of its buffer, and a record
// larger than the buffer alone; it stops at the readable end and refuses
// an offset below the log's start.
func TestCopyRecords(t *testing.T) {
	for _, mode := range []commitlog.WriteMode{commitlog.WriteMapped, commitlog.WriteBuffered} {
		t.Run(mode.String(), func(t *testing.T) {
			l := openMode(t, mode, 16<<10)
			defer l.Close()
			var want []stored
			for i, size := range []int{50, 3000, 700, 9000, 10, 5000, 200, 11000, 1} {
				want = append(want, appendN(t, l, 10*i, 4, size)...)
			}
			require.Greater(t, l.Stats().SegmentsRolled, int64(2), "fillers in the way")
			require.Equal(t, want, readAll(t, l))
			for _, size := range []int{64, 1000, 4096, 20000, 1 << 20} {
				assert.Equal(t, want, copyAll(t, l, size), "a buffer of %d bytes", size)
			}

			_, _, _, err := l.CopyRecords(l.MaxOffset(), make([]byte, 4096))
			require.ErrorIs(t, err, commitlog.ErrOffsetTooBig)
			_, _, _, err = l.CopyRecords(-1, make([]byte, 4096))
			require.ErrorIs(t, err, commitlog.ErrOffsetTooSmall)
			_, _, _, err = l.CopyRecords(want[0].off+1, make([]byte, 4096))
			require.ErrorIs(t, err, commitlog.ErrBadOffset, "not at a record")
		})
	}
}

func TestConfigValidate(t *testing.T) {
	_, err := commitlog.Open(t.Context(), commitlog.Config{})
	require.ErrorContains(t, err, "Dir is required")
	_, err = commitlog.Open(t.Context(), commitlog.Config{Dir: t.TempDir(), SegmentBytes: 100, DeleteWhen: "25", DiskFullRatio: 2})
	require.ErrorContains(t, err, "SegmentBytes 100 out of range")
	require.ErrorContains(t, err, `"25" is not an hour`)
	require.ErrorContains(t, err, "DiskFullRatio must be in (0, 1]")
	m, err := commitlog.ParseFlushMode("sync_flush")
	require.NoError(t, err)
	assert.Equal(t, commitlog.SyncFlush, m)
	_, err = commitlog.ParseFlushMode("sometimes")
	require.ErrorContains(t, err, `unknown flush mode "sometimes"`)
}

func TestSyncFlushTimeout(t *testing.T) {
	mem := fsx.NewMemFS()
	block := make(chan struct{})
	cfg := commitlog.Config{FS: mem, Dir: "/d", SegmentBytes: 8 << 10, FlushMode: commitlog.SyncFlush,
		SyncFlushTimeout: 50 * time.Millisecond, CheckpointInterval: time.Hour}
	l := open(t, cfg)
	mem.SetHook(func(op fsx.Op, path string) {
		if op == fsx.OpSync && path == "/d/00000000000000000000" {
			<-block
		}
	})
	start := time.Now()
	res, err := l.Append(t.Context(), record(t, 1, 100), nil)
	require.ErrorIs(t, err, commitlog.ErrFlushTimeout)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, res.End, l.MaxOffset(), "the record is stored")
	assert.Equal(t, int64(0), l.FlushedOffset(), "but not durable")
	close(block)
	require.Eventually(t, func() bool { return l.FlushedOffset() == res.End }, 5*time.Second, time.Millisecond)
	mem.SetHook(nil)
	require.NoError(t, l.Close())
}

func TestOnCommitSignalsEveryAdvance(t *testing.T) {
	for _, mode := range modes() {
		t.Run(mode.name, func(t *testing.T) {
			var last atomic.Int64
			cfg := mode.cfg
			cfg.Dir, cfg.SegmentBytes = t.TempDir(), 8<<10
			cfg.OnCommit = func(end int64) {
				assert.GreaterOrEqual(t, end, last.Load(), "MaxOffset only grows")
				last.Store(end)
			}
			l := open(t, cfg)
			defer l.Close()
			appendN(t, l, 0, 40, 300)
			assert.Equal(t, l.MaxOffset(), last.Load())
		})
	}
}

// WithAppended's callback runs once per Append, once the batch is placed.
func TestWithAppended(t *testing.T) {
	l := open(t, commitlog.Config{Dir: t.TempDir(), FlushMode: commitlog.SyncFlush, SegmentBytes: 1 << 20})
	defer l.Close()
	calls := 0
	ctx := commitlog.WithAppended(t.Context(), func() { calls++ })
	_, err := l.Append(ctx, record(t, 1, 10), nil)
	require.NoError(t, err)
	_, err = l.Append(ctx, []byte("not a record"), nil)
	require.Error(t, err)
	assert.Equal(t, 1, calls, "called for the stored batch only")
}

// AppendV stores pieces exactly as Append stores them joined.
func TestAppendVEqualsAppend(t *testing.T) {
	for _, mode := range []commitlog.FlushMode{commitlog.AsyncFlush, commitlog.SyncFlush} {
		t.Run(mode.String(), func(t *testing.T) {
			var recs [][]byte
			for i := range 7 {
				recs = append(recs, record(t, i, 30+i))
			}
			joined := bytes.Join(recs, nil)
			a := open(t, commitlog.Config{Dir: t.TempDir(), FlushMode: mode, SegmentBytes: 1 << 20})
			defer a.Close()
			b := open(t, commitlog.Config{Dir: t.TempDir(), FlushMode: mode, SegmentBytes: 1 << 20})
			defer b.Close()
			ra, err := a.Append(t.Context(), bytes.Clone(joined), nil)
			require.NoError(t, err)
			rb, err := b.AppendV(t.Context(), [][]byte{bytes.Join(recs[:2], nil), nil, recs[2], bytes.Join(recs[3:], nil)}, nil)
			require.NoError(t, err)
			assert.Equal(t, ra.End, rb.End)
			assert.Equal(t, ra.Records, rb.Records)
			require.NoError(t, a.Flush())
			require.NoError(t, b.Flush())
			for off := int64(0); off < ra.End; {
				x, next, err := a.ReadRecord(off)
				require.NoError(t, err)
				y, _, err := b.ReadRecord(off)
				require.NoError(t, err)
				assert.Equal(t, len(x.B), len(y.B))
				assert.Equal(t, message.QueueOffsetOf(x.B), message.QueueOffsetOf(y.B))
				assert.NoError(t, message.Check(y.B, off, true))
				x.Release()
				y.Release()
				off = next
			}
			_, err = b.AppendV(t.Context(), [][]byte{recs[0][:20]}, nil)
			assert.ErrorIs(t, err, commitlog.ErrInvalidBatch, "a record may not span pieces")
			_, err = b.AppendV(t.Context(), nil, nil)
			assert.ErrorIs(t, err, commitlog.ErrInvalidBatch)
		})
	}
}

// The pre-faulter keeps a window after the append position in the page
// cache, sliding with the writes: an idle log leaves the rest of its
// segment unmapped.
func TestPrefaultWindowSlides(t *testing.T) {
	const page, window, far = 4096, 256 << 10, 4 << 20
	l := open(t, commitlog.Config{Dir: t.TempDir(), SegmentBytes: 64 << 20, PrefaultAhead: window}.Mode(commitlog.WriteMapped))
	defer l.Close()
	require.NoError(t, l.WaitPrefault(t.Context()))
	mapped := pageCount(t, l.MappedPages)
	assert.Equal(t, window/page, mapped(0, window), "the first window")
	assert.Zero(t, mapped(far, 8<<20), "far beyond the window")

	// Append past half the window, three times over: the window follows.
	end := appendUntil(t, l, record(t, 1, 16<<10), 3*window)
	ahead := (end+page-1)/page*page + window/4
	assert.Eventually(t, func() bool { return mapped(ahead, window/2) == window/2/page },
		5*time.Second, 5*time.Millisecond, "the window after %d", end)
	assert.Zero(t, mapped(far, 8<<20), "far beyond the writes")
}

// Appends and the pre-faulter go through a mapping of their own, so that
// writeback, which write-protects the entries of every writable mapping of
// the pages it cleans, leaves the readers' mapping alone: the readers map
// a page only when they first read it, and see what was appended through
// the other mapping (the same page cache), before and after a flush.
func TestReadersHaveAMappingOfTheirOwn(t *testing.T) {
	const page, window = 4096, 256 << 10
	for _, mode := range []commitlog.WriteMode{commitlog.WriteMapped, commitlog.WriteHybrid} {
		t.Run(mode.String(), func(t *testing.T) {
			l := open(t, commitlog.Config{Dir: t.TempDir(), SegmentBytes: 64 << 20, PrefaultAhead: window}.Mode(mode))
			defer l.Close()
			require.NoError(t, l.WaitPrefault(t.Context()))
			readers := pageCount(t, l.ReaderMappedPages)
			assert.Equal(t, window/page, pageCount(t, l.MappedPages)(0, window), "the appends' window")
			assert.Zero(t, readers(0, window), "pre-faulting maps nothing for the readers")

			rec := record(t, 1, 1000)
			res, err := l.Append(t.Context(), rec, nil)
			require.NoError(t, err)
			assert.Zero(t, readers(0, page), "an append maps nothing for the readers")
			for range 2 { // before and after the flush
				r, err := l.Read(res.Offset, len(rec))
				require.NoError(t, err)
				assert.NoError(t, message.Check(r.B, res.Offset, true), "the appended record, read through the readers' mapping")
				r.Release()
				assert.Equal(t, 1, readers(0, page), "the page read")
				require.NoError(t, l.Flush())
			}
		})
	}
}

// Once flushed, whole 2 MiB units of the log leave the appends' mapping,
// so that the process's RSS does not count them twice; the records stay
// readable, and appends go on after them.
func TestFlushDropsTheAppendsMapping(t *testing.T) {
	const page, unit = 4096, 2 << 20
	l := open(t, commitlog.Config{Dir: t.TempDir(), SegmentBytes: 64 << 20, PrefaultAhead: 1 << 20,
		FlushInterval: time.Hour, FlushThoroughInterval: time.Hour}.Mode(commitlog.WriteMapped))
	defer l.Close()
	require.NoError(t, l.WaitPrefault(t.Context()))
	mapped := pageCount(t, l.MappedPages)
	end := appendUntil(t, l, record(t, 1, 16<<10), 5<<20)
	require.Equal(t, 2*unit/page, mapped(0, 2*unit), "written, not yet flushed")
	require.NoError(t, l.Flush())
	assert.Zero(t, mapped(0, 2*unit), "the whole units below the flushed end %d", end)
	assert.Equal(t, 1, mapped(2*unit, page), "the unit the appends are in")

	recs := readAll(t, l)
	require.NotEmpty(t, recs)
	more := appendUntil(t, l, record(t, 2, 16<<10), end+(1<<20))
	require.NoError(t, l.Flush())
	assert.Len(t, readAll(t, l), len(recs)+int((more-end)/int64(len(record(t, 2, 16<<10)))), "every record, before and after the drop")
}

// WriteHybrid writes batches of DirectBytes or more with pwrite, which
// needs no page faulted in. While they bring most of the bytes nothing
// after the appends is brought into the page cache: no pre-fault window
// (it would zero pages that pwrite then overwrites), and no readahead,
// although a window was pre-faulted before and readers fault in what was
// written. Once small appends, copied into the mapping, bring most of the
// bytes, the window follows the writes again.
func TestHybridPrefaultsForSmallAppendsOnly(t *testing.T) {
	const page, window = 4096, 1 << 20
	l := open(t, commitlog.Config{Dir: t.TempDir(), SegmentBytes: 64 << 20, PrefaultAhead: window, DirectBytes: 16 << 10}.Mode(commitlog.WriteHybrid))
	defer l.Close()
	require.NoError(t, l.WaitPrefault(t.Context()))
	resident := pageCount(t, l.ResidentPages)
	require.Equal(t, window/page, resident(0, window), "the first window")

	var batch []byte
	for i := range 32 {
		batch = append(batch, record(t, i, 1000)...)
	}
	appendUntil(t, l, record(t, 0, 1000), window) // small appends: the window follows
	require.Eventually(t, func() bool { return resident(window, window/4) == window/4/page },
		5*time.Second, 5*time.Millisecond, "the window after the first small appends")
	big := appendUntil(t, l, batch, 4*window)
	require.NotEmpty(t, readAll(t, l)) // the readers fault in every written page
	past := (big + page - 1) / page * page
	assert.Zero(t, resident(past, 2*window), "pages in the page cache after the batches' end %d", big)

	small := appendUntil(t, l, record(t, 1, 1000), big+window)
	ahead := (small + page - 1) / page * page // the window reaches at least half a window past the end
	assert.Eventually(t, func() bool { return resident(ahead, window/2-page) == window/2/page-1 },
		5*time.Second, 5*time.Millisecond, "the window after the small appends' end %d", small)
}

// A segment Open creates is pre-faulted in the background; WaitPrefault
// says when that is done, and returns at once for a log that had one.
func TestWaitPrefault(t *testing.T) {
	dir := t.TempDir()
	l := open(t, commitlog.Config{Dir: dir, SegmentBytes: 1 << 20})
	require.NoError(t, l.WaitPrefault(t.Context()))
	_, err := l.Append(t.Context(), record(t, 1, 10), nil)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	l = open(t, commitlog.Config{Dir: dir, SegmentBytes: 1 << 20})
	defer l.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	require.NoError(t, l.WaitPrefault(ctx))
}

// New segments ask for huge pages where their bytes are written in bulk
// and in order (WriteMapped, WriteBuffered through the page cache), and not
// where pwrite is to fill pages that nothing faulted in ahead (WriteDirect,
// WriteHybrid, whose appends' mapping reads nothing ahead), nor where
// WriteBuffered writes around the page cache (O_DIRECT: its readers'
// mapping reads nothing ahead either).
func TestSegmentsAskForHugePages(t *testing.T) {
	for _, tt := range []struct {
		name             string
		mode             commitlog.WriteMode
		flush            commitlog.FlushMode
		noDirect         bool
		readers, appends string // a flag the mapping must have; "" for no huge pages
	}{
		{"mapped", commitlog.WriteMapped, commitlog.AsyncFlush, false, "hg", "hg"},
		{"buffered", commitlog.WriteBuffered, commitlog.SyncFlush, true, "hg", ""},
		{"buffered-direct", commitlog.WriteBuffered, commitlog.SyncFlush, false, "rr", ""},
		{"hybrid", commitlog.WriteHybrid, commitlog.AsyncFlush, false, "", "nh"},
		{"direct", commitlog.WriteDirect, commitlog.AsyncFlush, false, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := open(t, commitlog.Config{Dir: t.TempDir(), SegmentBytes: 8 << 20, PrefaultAhead: 1 << 20,
				FlushMode: tt.flush}.Mode(tt.mode).NoDirect(tt.noDirect))
			defer l.Close()
			_, err := l.Append(t.Context(), record(t, 1, 100), nil)
			require.NoError(t, err)
			require.NoError(t, l.WaitPrefault(t.Context()))

			readers, appends := l.Mappings(0)
			require.NotNil(t, readers)
			check := func(which string, b []byte, want string) {
				flags := testutil.VMFlags(t, b)
				if want != "hg" {
					assert.NotContains(t, flags, "hg", which)
				}
				if want != "" {
					assert.Contains(t, flags, want, which)
				}
			}
			check("readers' mapping", readers, tt.readers)
			if appends != nil {
				check("appends' mapping", appends, tt.appends)
			} else {
				assert.Empty(t, tt.appends, "the appends' own mapping was never made")
			}
		})
	}
}

// ReadCopy reads spans back to back into one buffer, the same bytes Read
// gives, and refuses what Read refuses.
func TestReadCopy(t *testing.T) {
	for _, mode := range []commitlog.WriteMode{commitlog.WriteMapped, commitlog.WriteDirect, commitlog.WriteBuffered} {
		t.Run(mode.String(), func(t *testing.T) {
			l := openMode(t, mode, 64<<10)
			defer l.Close()
			want := appendN(t, l, 0, 120, 900) // rolls: a filler ends each segment
			require.Positive(t, l.Stats().SegmentsRolled)

			// Two runs of records of one segment, apart, and a run in the next.
			var spans []commitlog.Span
			var recs []stored
			for _, r := range [][2]int{{2, 5}, {9, 10}, {70, 73}} {
				first, last := want[r[0]], want[r[1]-1]
				spans = append(spans, commitlog.Span{Off: first.off, End: last.off + int64(len(last.b))})
				recs = append(recs, want[r[0]:r[1]]...)
			}
			cp, err := l.ReadCopy(spans)
			require.NoError(t, err)
			var regions []commitlog.Region
			at, j := 0, 0
			for _, r := range recs {
				for r.off >= spans[j].End {
					at += int(spans[j].End - spans[j].Off)
					j++
				}
				p := at + int(r.off-spans[j].Off)
				regions = append(regions, cp.Region(p, p+len(r.b)))
			}
			cp.Release() // the regions keep the copy
			for i, r := range regions {
				assert.Equal(t, recs[i].b, r.B, "record at %d", recs[i].off)
				r.Release()
			}

			last := want[len(want)-1]
			end := last.off + int64(len(last.b))
			_, err = l.ReadCopy([]commitlog.Span{{Off: last.off, End: end + 1}})
			require.ErrorIs(t, err, commitlog.ErrOffsetTooBig)
			_, err = l.ReadCopy([]commitlog.Span{{Off: -10, End: 10}})
			require.ErrorIs(t, err, commitlog.ErrOffsetTooSmall)
			_, err = l.ReadCopy([]commitlog.Span{{Off: want[0].off, End: want[len(want)-2].off}})
			require.ErrorIs(t, err, commitlog.ErrBadOffset, "across a segment's end")
			_, err = l.ReadCopy(nil)
			require.ErrorIs(t, err, commitlog.ErrBadOffset)
			_, err = l.ReadCopy([]commitlog.Span{{Off: 10, End: 10}})
			require.ErrorIs(t, err, commitlog.ErrBadOffset)
		})
	}
}

// A copy goes back to its pool only when the last region cut from it and
// the copy itself are released: regions released early leave the others
// intact, whatever reads follow.
func TestReadCopyRegionsOutliveTheCopy(t *testing.T) {
	l := open(t, commitlog.Config{Dir: t.TempDir()}.Mode(commitlog.WriteDirect))
	defer l.Close()
	want := appendN(t, l, 0, 40, 1000)
	end := want[len(want)-1].off + int64(len(want[len(want)-1].b))
	cp, err := l.ReadCopy([]commitlog.Span{{Off: 0, End: end}})
	require.NoError(t, err)
	keep := cp.Region(int(want[3].off), int(want[4].off))
	early := cp.Region(0, int(want[1].off))
	cp.Release()
	early.Release()
	for range 50 { // other copies of the same size class, written over if the pool had this one
		other, err := l.ReadCopy([]commitlog.Span{{Off: want[10].off, End: end}})
		require.NoError(t, err)
		other.Release()
	}
	assert.Equal(t, want[3].b, keep.B)
	keep.Release()
}

// openMode opens a log in a new directory with the write mode and segment
// size; WriteBuffered with sync flush, as it is used.
func openMode(t *testing.T, mode commitlog.WriteMode, segmentBytes int64) *commitlog.Log {
	t.Helper()
	cfg := commitlog.Config{Dir: t.TempDir(), SegmentBytes: segmentBytes}.Mode(mode)
	if mode == commitlog.WriteBuffered {
		cfg.FlushMode = commitlog.SyncFlush
	}
	return open(t, cfg)
}
