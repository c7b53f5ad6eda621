package consumequeue_test

import (
	"encoding/binary"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/consumequeue"
	"github.com/gantrymq/gantry/internal/fsx"
)

func TestRecoverTruncatedTail(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			e := be.new(t)
			q := open(t, e, 10)
			appendN(t, q, 0, 25) // files 0, 200, 400; entry 24 at bytes [80, 100) of file 400
			require.NoError(t, q.Close())
			for cut := 80; cut < 100; cut++ {
				d := be.clone(t, e)
				be.mutate(t, d, fileName(400), func(b []byte) []byte { return b[:cut] })
				q := open(t, d, 10)
				requireEntries(t, q, 0, 24)
				require.NoError(t, q.Close())
				st, err := d.fs.Stat(filepath.Join(d.dir, fileName(400)))
				require.NoError(t, err)
				assert.Equal(t, int64(200), st.Size, "cut=%d: file extended back", cut)
				q = open(t, d, 10)
				requireEntries(t, q, 0, 24)
				appendN(t, q, 24, 26)
				require.NoError(t, q.Close())
			}
		})
	}
}

func TestRecoverInvalidEntry(t *testing.T) {
	tests := []struct {
		name      string
		damage    func(b []byte) // b is the 20-byte entry
		truncated int64          // non-zero slots dropped
	}{
		{"size zero", func(b []byte) { binary.BigEndian.PutUint32(b[8:], 0) }, 12},
		{"negative size", func(b []byte) { b[8] |= 0x80 }, 12},
		{"negative offset", func(b []byte) { b[0] |= 0x80 }, 12},
		{"zeroed", func(b []byte) { clear(b) }, 11},
		{"placeholder mid-queue", func(b []byte) {
			clear(b)
			binary.BigEndian.PutUint32(b[8:], 1<<31-1)
		}, 12},
	}
	for _, be := range backends {
		for _, tt := range tests {
			t.Run(be.name+"/"+tt.name, func(t *testing.T) {
				e := be.new(t)
				q := open(t, e, 10)
				appendN(t, q, 0, 25)
				require.NoError(t, q.Close())
				be.mutate(t, e, fileName(200), func(b []byte) []byte { // entry 13
					tt.damage(b[3*consumequeue.EntrySize : 4*consumequeue.EntrySize])
					return b
				})
				q = open(t, e, 10)
				requireEntries(t, q, 0, 13)
				info := q.Recovery()
				assert.Equal(t, consumequeue.RecoveryInfo{Files: 2, MinOffset: 0, MaxOffset: 13, TruncatedEntries: tt.truncated}, info)
				require.NoError(t, q.Close())
				names, err := e.fs.ReadDir(e.dir)
				require.NoError(t, err)
				assert.Equal(t, []string{fileName(0), fileName(200)}, names, "file after the end removed")
				b, err := fsx.ReadFile(e.fs, filepath.Join(e.dir, fileName(200)))
				require.NoError(t, err)
				assert.Equal(t, make([]byte, 200-3*consumequeue.EntrySize), b[3*consumequeue.EntrySize:], "stale entries zeroed")

				q = open(t, e, 10)
				defer q.Close()
				requireEntries(t, q, 0, 13)
				assert.Equal(t, int64(0), q.Recovery().TruncatedEntries)
			})
		}
	}
}

func TestRecoverMissingMiddleFile(t *testing.T) {
	e := backends[1].new(t)
	q := open(t, e, 10)
	appendN(t, q, 0, 45)
	require.NoError(t, q.Close())
	require.NoError(t, e.fs.Remove(filepath.Join(e.dir, fileName(400))))
	q = open(t, e, 10)
	defer q.Close()
	requireEntries(t, q, 0, 20)
	assert.Equal(t, int64(15), q.Recovery().TruncatedEntries) // files 600 and 800
}

func TestRecoverWrongFileSize(t *testing.T) {
	e := backends[1].new(t)
	q := open(t, e, 10)
	appendN(t, q, 0, 5)
	require.NoError(t, q.Close())
	_, err := consumequeue.Open(t.Context(), consumequeue.Config{Dir: e.dir, FS: e.fs, EntriesPerFile: 5})
	require.Error(t, err, "EntriesPerFile changed")
}

// TestCrash appends with occasional flushes and takes crash images at
// every filesystem step (and after appends). Each image must recover to a
// prefix of what was appended that includes everything flushed.
func TestCrash(t *testing.T) {
	for seed := range uint64(4) {
		t.Run("", func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 42))
			mem := fsx.NewMemFS()
			e := env{fs: mem, dir: "/cq/T/3"}
			type image struct {
				fs                *fsx.MemFS
				flushed, appended int64
			}
			var (
				images            []image
				flushed, appended int64
				inHook            sync.Mutex
			)
			take := func() {
				images = append(images, image{fs: mem.Crash(r), flushed: flushed, appended: appended})
			}
			mem.SetHook(func(fsx.Op, string) {
				if inHook.TryLock() { // Crash itself does not call the hook; guard anyway
					take()
					inHook.Unlock()
				}
			})
			q := open(t, e, 16)
			for i := range int64(150) {
				require.NoError(t, q.Append(i, entry(i)))
				appended = i + 1
				if r.IntN(10) == 0 {
					require.NoError(t, q.Flush())
					flushed = appended
				}
				if r.IntN(3) == 0 {
					take()
				}
			}
			mem.SetHook(nil)
			require.NoError(t, q.Close())
			require.Greater(t, len(images), 50)
			for k, img := range images {
				checkCrashImage(t, env{fs: img.fs, dir: e.dir}, img.flushed, img.appended, k)
			}
		})
	}
}

func checkCrashImage(t *testing.T, e env, flushed, appended int64, k int) {
	t.Helper()
	q, err := consumequeue.Open(t.Context(), consumequeue.Config{Dir: e.dir, FS: e.fs, EntriesPerFile: 16})
	require.NoError(t, err, "image %d", k)
	defer q.Close()
	max := q.MaxOffset()
	require.Equal(t, int64(0), q.MinOffset(), "image %d", k)
	require.GreaterOrEqual(t, max, flushed, "image %d: flushed entries lost", k)
	require.LessOrEqual(t, max, appended, "image %d: more entries than appended", k)
	for i := range max {
		got, err := q.Get(i)
		require.NoError(t, err)
		if i < max-1 {
			require.Equal(t, entry(i), got, "image %d entry %d", k, i)
			continue
		}
		// The last entry may be torn: the appended entry with a zeroed suffix.
		var want, have [consumequeue.EntrySize]byte
		encode(want[:], entry(i))
		encode(have[:], got)
		n := 0
		for n < len(want) && want[n] == have[n] {
			n++
		}
		require.True(t, isZeroBytes(have[n:]), "image %d: last entry %d = %+v, appended %+v", k, i, got, entry(i))
	}
	// Re-dispatching everything must work: idempotent below, append above,
	// except a torn last entry, which the store repairs by truncation.
	for i := range appended {
		if err := q.Append(i, entry(i)); err != nil {
			require.ErrorIs(t, err, consumequeue.ErrConflict)
			require.Equal(t, max-1, i)
			_, err := q.TruncatePhysical(entry(i).Offset)
			require.NoError(t, err)
			require.NoError(t, q.Append(i, entry(i)))
		}
	}
	requireEntries(t, q, 0, appended)
}

func encode(b []byte, e consumequeue.Entry) {
	binary.BigEndian.PutUint64(b, uint64(e.Offset))
	binary.BigEndian.PutUint32(b[8:], uint32(e.Size))
	binary.BigEndian.PutUint64(b[12:], uint64(e.TagsCode))
}

func isZeroBytes(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestConcurrentReaders reads while the writer appends, rolls, truncates
// and deletes; run with -race.
func TestConcurrentReaders(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			q := open(t, be.new(t), 8)
			defer q.Close()
			const n = 2000
			var wg sync.WaitGroup
			done := make(chan struct{})
			for range 4 {
				wg.Go(func() {
					var buf []consumequeue.Entry
					for {
						select {
						case <-done:
							return
						default:
						}
						min, max := q.MinOffset(), q.MaxOffset()
						if max > min {
							from := min + rand.Int64N(max-min)
							var err error
							buf, err = q.Read(from, 32, buf[:0])
							if err != nil {
								assert.ErrorIs(t, err, consumequeue.ErrOffsetTooSmall) // deleted meanwhile
								continue
							}
							for i, g := range buf {
								if !assert.Equal(t, entry(from+int64(i)), g) {
									return
								}
							}
							if _, le, ok := q.LastEntry(); ok {
								assert.Positive(t, le.Size)
							}
						}
					}
				})
			}
			for i := int64(0); i < n; i++ {
				require.NoError(t, q.Append(i, entry(i)))
				if i%300 == 299 {
					_, err := q.DeleteBelow(entry(i - 100).Offset)
					require.NoError(t, err)
					_, err = q.TruncatePhysical(entry(i).Offset) // drops entry i
					require.NoError(t, err)
					require.NoError(t, q.Append(i, entry(i)))
				}
				if i%100 == 0 && be.name == "os" { // MemFS msync reads mapped memory the writer writes
					require.NoError(t, q.Flush())
				}
			}
			close(done)
			wg.Wait()
			assert.Equal(t, int64(n), q.MaxOffset())
		})
	}
}
