package consumequeue_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/consumequeue"
	"github.com/gantrymq/gantry/internal/fsx"
)

func openCfg(t *testing.T, cfg consumequeue.Config) *consumequeue.Queue {
	t.Helper()
	cfg.Logger = testLogger(t)
	q, err := consumequeue.Open(t.Context(), cfg)
	require.NoError(t, err)
	return q
}

func diskOf(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Sys().(*syscall.Stat_t).Blocks * 512
}

// A queue file is full-sized but sparse: disk blocks are reserved ahead
// of the entries in steps of at most 64 KiB, never the whole file.
func TestSparseFileReservesAhead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	q := openCfg(t, consumequeue.Config{Dir: dir}) // 6,000,000-byte files
	defer q.Close()
	appendN(t, q, 0, 1)
	path := filepath.Join(dir, fileName(0))
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, int64(6_000_000), st.Size())
	assert.LessOrEqual(t, diskOf(t, path), int64(8<<10), "one entry takes a page or two of disk")

	appendN(t, q, 1, 10_000) // 200,000 bytes
	require.NoError(t, q.Flush())
	disk := diskOf(t, path)
	assert.GreaterOrEqual(t, disk, int64(200_000), "the written entries have blocks")
	assert.LessOrEqual(t, disk, int64(200_000+64<<10+8<<10), "at most one step reserved ahead")
}

// A full disk fails the reservation with ENOSPC before any entry is
// written into unreserved space; the queue is unchanged and takes the
// entry once there is room.
func TestReservationOnFullDisk(t *testing.T) {
	mem := fsx.NewMemFS()
	faults := &fsx.Faults{}
	dir := "/cq/T/0"
	q := openCfg(t, consumequeue.Config{Dir: dir, FS: fsx.WithFaults(mem, faults), EntriesPerFile: 10_000})
	defer q.Close()
	appendN(t, q, 0, 204) // 4,080 bytes: within the first page
	remove := faults.Add(fsx.Fault{Op: fsx.OpAllocate, Path: dir, Err: syscall.ENOSPC})
	err := q.Append(204, entry(204)) // needs the second page
	require.ErrorIs(t, err, syscall.ENOSPC)
	assert.Equal(t, int64(204), q.MaxOffset())
	remove()
	appendN(t, q, 204, 300)
	requireEntries(t, q, 0, 300)

	// CheckRoom refuses a reservation the filesystem has no room for.
	mem.SetUsage(func(int64) fsx.Usage { return fsx.Usage{Total: 1 << 30, Free: 100} })
	for i := int64(300); ; i++ {
		if err := q.Append(i, entry(i)); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
		require.Less(t, i, int64(10_000), "a reservation was refused")
	}
}

// Recovery from a hint reads the entries after it, and checks only the
// parts of the file that hold data after the end: a queue of one entry
// in a 6 MB file reads a few KiB, not the file.
func TestRecoveryReadsLittle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	q := openCfg(t, consumequeue.Config{Dir: dir})
	appendN(t, q, 0, 1)
	require.NoError(t, q.Close())

	q = openCfg(t, consumequeue.Config{Dir: dir})
	requireEntries(t, q, 0, 1)
	assert.Less(t, q.RecoveryScan().Bytes, int64(64<<10), "no hint: the entries and the data after them")
	assert.False(t, q.RecoveryScan().Trusted)
	require.NoError(t, q.Close())

	q = openCfg(t, consumequeue.Config{Dir: dir, Hint: consumequeue.Hint{MaxOffset: 1, Clean: true}})
	requireEntries(t, q, 0, 1)
	assert.True(t, q.RecoveryScan().Trusted)
	assert.LessOrEqual(t, q.RecoveryScan().Bytes, int64(3*consumequeue.EntrySize), "the first entry and those either side of the end")
	require.NoError(t, q.Close())
}

// The hint: entries below it are trusted and those after it scanned; a
// torn entry after it ends the queue there; garbage after the end in the
// reserved space is zeroed; a hint the files do not hold is ignored (the
// queue ends where its entries do, and its owner sees it shorter than
// recorded).
func TestRecoverWithHint(t *testing.T) {
	type damage struct {
		name      string
		hint      consumequeue.Hint
		mutate    func(b []byte) // file 0 (100 entries per file), entries 0..59 written
		max       int64
		truncated int64
		trusted   bool
	}
	tests := []damage{
		{"exact hint", consumequeue.Hint{MaxOffset: 60}, nil, 60, 0, false},
		{"entries after the hint", consumequeue.Hint{MaxOffset: 40}, nil, 60, 0, false},
		{"torn entry after the hint", consumequeue.Hint{MaxOffset: 40}, func(b []byte) {
			binary.BigEndian.PutUint32(b[50*20+8:], 0) // entry 50: size 0
		}, 50, 10, false},
		{"garbage in the reserved space", consumequeue.Hint{MaxOffset: 60}, func(b []byte) {
			copy(b[70*20+3:], "GARBAGE")
		}, 60, 1, false},
		{"hint past the entries", consumequeue.Hint{MaxOffset: 80}, nil, 60, 0, false},
		{"hint past the file", consumequeue.Hint{MaxOffset: 1000}, nil, 60, 0, false},
		{"clean hint", consumequeue.Hint{MaxOffset: 60, Clean: true}, nil, 60, 0, true},
		{"clean hint, entries after it", consumequeue.Hint{MaxOffset: 55, Clean: true}, nil, 60, 0, false},
		{"clean hint, its last entry gone", consumequeue.Hint{MaxOffset: 60, Clean: true}, func(b []byte) {
			clear(b[59*20 : 60*20])
		}, 59, 0, false},
		{"clean hint, garbage after it", consumequeue.Hint{MaxOffset: 60, Clean: true}, func(b []byte) {
			b[60*20+5] = 1
		}, 60, 1, false},
	}
	for _, be := range backends {
		for _, tt := range tests {
			t.Run(be.name+"/"+tt.name, func(t *testing.T) {
				e := be.new(t)
				q := open(t, e, 100)
				appendN(t, q, 0, 60)
				require.NoError(t, q.Close())
				if tt.mutate != nil {
					be.mutate(t, e, fileName(0), func(b []byte) []byte { tt.mutate(b); return b })
				}
				q = openCfg(t, consumequeue.Config{Dir: e.dir, FS: e.fs, EntriesPerFile: 100, Hint: tt.hint})
				requireEntries(t, q, 0, tt.max)
				assert.Equal(t, tt.truncated, q.Recovery().TruncatedEntries)
				assert.Equal(t, tt.trusted, q.RecoveryScan().Trusted)
				appendN(t, q, tt.max, 120) // into the next file
				require.NoError(t, q.Close())

				q = openCfg(t, consumequeue.Config{Dir: e.dir, FS: e.fs, EntriesPerFile: 100})
				defer q.Close()
				requireEntries(t, q, 0, 120)
				assert.Zero(t, q.Recovery().TruncatedEntries, "everything after the end was zeroed")
			})
		}
	}
}

// Files from versions that preallocated them whole open and take entries.
func TestPreallocatedFileOpens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	f, err := fsx.OS.OpenFile(filepath.Join(dir, fileName(0)), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.NoError(t, f.Allocate(0, 2000))
	b := make([]byte, 30*consumequeue.EntrySize)
	for i := range int64(30) {
		encode(b[i*consumequeue.EntrySize:], entry(i))
	}
	_, err = f.WriteAt(b, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	for _, hint := range []consumequeue.Hint{{}, {MaxOffset: 30}, {MaxOffset: 30, Clean: true}} {
		q := openCfg(t, consumequeue.Config{Dir: dir, EntriesPerFile: 100, Hint: hint})
		requireEntries(t, q, 0, 30)
		require.NoError(t, q.Close())
	}
	q := openCfg(t, consumequeue.Config{Dir: dir, EntriesPerFile: 100})
	appendN(t, q, 30, 250)
	require.NoError(t, q.Close())
	q = openCfg(t, consumequeue.Config{Dir: dir, EntriesPerFile: 100})
	defer q.Close()
	requireEntries(t, q, 0, 250)
}

// With DeferCreate, an empty queue's entries wait in memory, readable,
// until Materialize (or Flush, or Close) creates its first file; one that
// gathers a file's worth creates it on Append.
func TestDeferCreate(t *testing.T) {
	mem := fsx.NewMemFS()
	dir := "/cq/T/1"
	cfg := consumequeue.Config{Dir: dir, FS: mem, EntriesPerFile: 50, DeferCreate: true}
	q := openCfg(t, cfg)
	appendN(t, q, 0, 10)
	assert.True(t, q.Deferred())
	assert.False(t, fsx.Exists(mem, dir), "no directory yet")
	requireEntries(t, q, 0, 10)
	qo, last, ok := q.LastEntry()
	require.True(t, ok)
	assert.Equal(t, int64(9), qo)
	assert.Equal(t, entry(9), last)
	require.NoError(t, q.Append(5, entry(5)), "re-dispatch of a held entry")
	require.ErrorIs(t, q.Append(5, entry(6)), consumequeue.ErrConflict)
	n, err := q.TruncatePhysical(entry(8).Offset)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	requireEntries(t, q, 0, 8)
	first, ok := q.PendingStart()
	require.True(t, ok)
	assert.Equal(t, entry(0), first)

	require.NoError(t, q.Materialize())
	assert.False(t, q.Deferred())
	requireEntries(t, q, 0, 8)
	appendN(t, q, 8, 60) // rolls to a second file
	require.NoError(t, q.Flush())
	requireEntries(t, q, 0, 60)
	require.NoError(t, q.Close())
	q = open(t, env{fs: mem.Crash(nil), dir: dir}, 50)
	requireEntries(t, q, 0, 60)
	require.NoError(t, q.Close())

	// A file's worth of entries creates the file on Append; Close creates
	// that of a queue still held in memory.
	for _, n := range []int64{50, 51, 3} {
		d := filepath.Join("/cq/U", string(rune('a'+n%26)))
		q := openCfg(t, consumequeue.Config{Dir: d, FS: mem, EntriesPerFile: 50, DeferCreate: true})
		appendN(t, q, 0, n)
		assert.Equal(t, n <= 50, q.Deferred(), "n=%d: a file's worth is held", n)
		require.NoError(t, q.Close())
		q = open(t, env{fs: mem.Crash(nil), dir: d}, 50)
		requireEntries(t, q, 0, n)
		require.NoError(t, q.Close())
	}
}

// A crash while Materialize creates the file leaves a file under a
// temporary name, which Open removes; the held entries were never
// durable.
func TestDeferCreateCrash(t *testing.T) {
	mem := fsx.NewMemFS()
	dir := "/cq/T/2"
	var images []*fsx.MemFS
	q := openCfg(t, consumequeue.Config{Dir: dir, FS: mem, EntriesPerFile: 50, DeferCreate: true})
	appendN(t, q, 0, 20)
	var mu sync.Mutex
	mem.SetHook(func(fsx.Op, string) {
		if mu.TryLock() {
			images = append(images, mem.Crash(nil))
			mu.Unlock()
		}
	})
	require.NoError(t, q.Flush())
	mem.SetHook(nil)
	require.NoError(t, q.Close())
	require.NotEmpty(t, images)
	for k, img := range images {
		q := open(t, env{fs: img, dir: dir}, 50)
		max := q.MaxOffset()
		assert.True(t, max == 0 || max == 20, "image %d: max %d", k, max)
		requireEntries(t, q, 0, max)
		appendN(t, q, max, 30)
		require.NoError(t, q.Close())
		names, err := img.ReadDir(dir)
		require.NoError(t, err)
		assert.Equal(t, []string{fileName(0)}, names, "image %d", k)
	}
}

// Readers see a held queue's entries while Materialize moves them into
// the file and the writer appends (run with -race).
func TestDeferCreateConcurrentReaders(t *testing.T) {
	q := openCfg(t, consumequeue.Config{Dir: filepath.Join(t.TempDir(), "q"), EntriesPerFile: 1000, DeferCreate: true})
	defer q.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				max := q.MaxOffset()
				got, err := q.Read(0, int(max), nil)
				if !assert.NoError(t, err) {
					return
				}
				for i, e := range got {
					if !assert.Equal(t, entry(int64(i)), e) {
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for range 3 {
			assert.NoError(t, q.Materialize())
		}
	})
	appendN(t, q, 0, 500)
	require.NoError(t, q.Materialize())
	appendN(t, q, 500, 900)
	close(stop)
	wg.Wait()
	requireEntries(t, q, 0, 900)
}
