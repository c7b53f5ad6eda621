package fsx_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

// Crash semantics: what a crash keeps of data, mappings and the namespace,
// torn writes, and crashes racing writers.

func TestMemFSUnsyncedWritesLostOnCrash(t *testing.T) {
	write := func(t *testing.T, f fsx.File, s string, off int64) {
		t.Helper()
		_, err := f.WriteAt([]byte(s), off)
		require.NoError(t, err)
	}
	tests := []struct {
		name string
		do   func(t *testing.T, m *fsx.MemFS, f fsx.File) // f is /d/f, created and dir-synced, empty
		want string                                       // content of /d/f after Crash(nil)
	}{
		{"never synced", func(t *testing.T, _ *fsx.MemFS, f fsx.File) { write(t, f, "abc", 0) }, ""},
		{"synced", func(t *testing.T, _ *fsx.MemFS, f fsx.File) {
			write(t, f, "abc", 0)
			require.NoError(t, f.Sync())
		}, "abc"},
		{"writes after the sync", func(t *testing.T, _ *fsx.MemFS, f fsx.File) {
			write(t, f, "abc", 0)
			require.NoError(t, f.Sync())
			write(t, f, "XY", 1)
			write(t, f, "def", 3)
		}, "abc"},
		{"second sync", func(t *testing.T, _ *fsx.MemFS, f fsx.File) {
			write(t, f, "abc", 0)
			require.NoError(t, f.Sync())
			write(t, f, "def", 3)
			require.NoError(t, f.Sync())
		}, "abcdef"},
		{"truncate not synced", func(t *testing.T, _ *fsx.MemFS, f fsx.File) {
			write(t, f, "abcdef", 0)
			require.NoError(t, f.Sync())
			require.NoError(t, f.Truncate(2))
		}, "abcdef"},
		{"truncate synced", func(t *testing.T, _ *fsx.MemFS, f fsx.File) {
			write(t, f, "abcdef", 0)
			require.NoError(t, f.Sync())
			require.NoError(t, f.Truncate(2))
			require.NoError(t, f.Sync())
		}, "ab"},
		{"allocate not synced", func(t *testing.T, _ *fsx.MemFS, f fsx.File) {
			write(t, f, "ab", 0)
			require.NoError(t, f.Sync())
			require.NoError(t, f.Allocate(0, 100))
		}, "ab"},
		{"zero range not synced", func(t *testing.T, _ *fsx.MemFS, f fsx.File) {
			write(t, f, "abcd", 0)
			require.NoError(t, f.Sync())
			require.NoError(t, f.ZeroRange(1, 2))
		}, "abcd"},
		{"zero range synced", func(t *testing.T, _ *fsx.MemFS, f fsx.File) {
			write(t, f, "abcd", 0)
			require.NoError(t, f.Sync())
			require.NoError(t, f.ZeroRange(1, 2))
			require.NoError(t, f.Sync())
		}, "a\x00\x00d"},
		{"O_TRUNC not synced", func(t *testing.T, m *fsx.MemFS, f fsx.File) {
			write(t, f, "abcd", 0)
			require.NoError(t, f.Sync())
			g, err := m.OpenFile("/d/f", os.O_RDWR|os.O_TRUNC, 0)
			require.NoError(t, err)
			require.NoError(t, g.Close())
		}, "abcd"},
		{"sync through another handle", func(t *testing.T, m *fsx.MemFS, f fsx.File) {
			write(t, f, "abc", 0)
			g, err := m.OpenFile("/d/f", os.O_RDWR, 0)
			require.NoError(t, err)
			require.NoError(t, g.Sync())
			require.NoError(t, g.Close())
		}, "abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMem(t)
			f := createFile(t, m, "/d/f", nil)
			require.NoError(t, m.SyncDir("/d"))
			tt.do(t, m, f)
			assert.Equal(t, []byte(tt.want), durableContent(t, m, "/d/f"))

			// After Sync, durable equals current, whatever crash happens.
			require.NoError(t, f.Sync())
			cur := memRead(t, m, "/d/f")
			assert.Equal(t, cur, durableContent(t, m, "/d/f"))
			for seed := range uint64(20) {
				assert.Equal(t, cur, memRead(t, m.Crash(seeded(seed)), "/d/f"), "seed=%d", seed)
			}
		})
	}
}

func TestMemFSCrashIsIndependentAndDurable(t *testing.T) {
	m := newMem(t)
	f := durableFile(t, m, "/d/f", []byte("durable"))
	_, err := f.WriteAt([]byte("XX"), 0)
	require.NoError(t, err)

	c := m.Crash(nil)
	assert.Equal(t, []byte("durable"), memRead(t, c, "/d/f"))
	assert.Equal(t, []byte("XXrable"), memRead(t, m, "/d/f"), "the original keeps its current state")

	// The crashed filesystem is fully durable: crashing it again changes nothing.
	assert.Equal(t, tree(t, c, "/"), tree(t, c.Crash(nil), "/"))
	assert.Equal(t, []byte("durable"), durableContent(t, c, "/d/f"))

	// Writes to one do not reach the other.
	cf, err := c.OpenFile("/d/f", os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = cf.WriteAt([]byte("crash"), 0)
	require.NoError(t, err)
	require.NoError(t, cf.Sync())
	assert.Equal(t, []byte("XXrable"), memRead(t, m, "/d/f"))
	_, err = f.WriteAt([]byte("YY"), 0)
	require.NoError(t, err)
	assert.Equal(t, []byte("crashle"), memRead(t, c, "/d/f"))
}

// MemFS makes exactly the synced range durable (the kernel would round to
// pages; the contract promises only the range).
func TestMemFSMappingSyncExactRange(t *testing.T) {
	const P = fsx.PageSize
	tests := []struct {
		name   string
		size   int
		off, n int
		lo, hi int // the bytes that must be durable afterwards
	}{
		{"first byte", 4 * P, 0, 1, 0, 1},
		{"inside the second page", 4 * P, 5000, 10, 5000, 5010},
		{"straddles a page boundary", 4 * P, P - 1, 2, P - 1, P + 1},
		{"one aligned page", 4 * P, 2 * P, P, 2 * P, 3 * P},
		{"runs past the end", 4 * P, 4*P - 10, 3 * P, 4*P - 10, 4 * P},
		{"partial last page", 10000, 9000, 5, 9000, 9005},
		{"whole mapping", 4 * P, 0, 4 * P, 0, 4 * P},
		{"empty range", 4 * P, 5000, 0, 0, 0},
		{"negative length", 4 * P, 5000, -5, 0, 0},
		{"offset past the end", 4 * P, 5 * P, 10, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMem(t)
			f := durableFile(t, m, "/d/seg", make([]byte, tt.size))
			mp := mapFile(t, f, tt.size)
			for i := range mp.Bytes() {
				mp.Bytes()[i] = 0x11
			}
			require.NoError(t, mp.Sync(tt.off, tt.n))

			want := make([]byte, tt.size)
			copy(want[tt.lo:tt.hi], filled(0x11, tt.hi-tt.lo))
			assert.Equal(t, want, durableContent(t, m, "/d/seg"), "unsynced mapped bytes are lost")
			assert.Equal(t, filled(0x11, tt.size), memRead(t, m, "/d/seg"))
		})
	}
}

func TestMemFSMappingSyncOfUnsyncedAllocation(t *testing.T) {
	const P = fsx.PageSize
	m := newMem(t)
	f := createFile(t, m, "/d/seg", nil)
	require.NoError(t, f.Allocate(0, 3*P)) // allocated but the size never fdatasync'ed
	require.NoError(t, m.SyncDir("/d"))
	assert.Empty(t, durableContent(t, m, "/d/seg"))

	mp := mapFile(t, f, 3*P)
	copy(mp.Bytes(), filled(0x22, 3*P))
	require.NoError(t, mp.Sync(P+1, 1))

	want := append(make([]byte, P+1), 0x22)
	assert.Equal(t, want, durableContent(t, m, "/d/seg"), "durable up to the synced byte, zeros before it")
}

func TestMemFSNamespaceDurability(t *testing.T) {
	write := func(t *testing.T, m *fsx.MemFS, name, data string, sync bool) {
		t.Helper()
		f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte(data), 0)
		require.NoError(t, err)
		if sync {
			require.NoError(t, f.Sync())
		}
		require.NoError(t, f.Close())
	}
	tests := []struct {
		name      string
		do        func(t *testing.T, m *fsx.MemFS) // m holds a durable, empty /d
		wantTree  []string                         // tree of / after Crash(nil)
		wantFiles map[string]string                // their content
	}{
		{"create not dir-synced", func(t *testing.T, m *fsx.MemFS) {
			write(t, m, "/d/f", "v1", true)
		}, []string{"d/"}, nil},
		{"create dir-synced", func(t *testing.T, m *fsx.MemFS) {
			write(t, m, "/d/f", "v1", true)
			require.NoError(t, m.SyncDir("/d"))
		}, []string{"d/", "d/f"}, map[string]string{"/d/f": "v1"}},
		{"create dir-synced, data not synced", func(t *testing.T, m *fsx.MemFS) {
			write(t, m, "/d/f", "v1", false)
			require.NoError(t, m.SyncDir("/d"))
		}, []string{"d/", "d/f"}, map[string]string{"/d/f": ""}},
		{"data synced after the dir", func(t *testing.T, m *fsx.MemFS) {
			write(t, m, "/d/f", "v1", false)
			require.NoError(t, m.SyncDir("/d"))
			write(t, m, "/d/f", "v2", true)
		}, []string{"d/", "d/f"}, map[string]string{"/d/f": "v2"}},
		{"rename not dir-synced", func(t *testing.T, m *fsx.MemFS) {
			durableFile(t, m, "/d/f", []byte("v1"))
			require.NoError(t, m.Rename("/d/f", "/d/g"))
		}, []string{"d/", "d/f"}, map[string]string{"/d/f": "v1"}},
		{"rename dir-synced", func(t *testing.T, m *fsx.MemFS) {
			durableFile(t, m, "/d/f", []byte("v1"))
			require.NoError(t, m.Rename("/d/f", "/d/g"))
			require.NoError(t, m.SyncDir("/d"))
		}, []string{"d/", "d/g"}, map[string]string{"/d/g": "v1"}},
		{"rename over a file not dir-synced", func(t *testing.T, m *fsx.MemFS) {
			durableFile(t, m, "/d/f", []byte("new"))
			durableFile(t, m, "/d/g", []byte("old"))
			require.NoError(t, m.Rename("/d/f", "/d/g"))
		}, []string{"d/", "d/f", "d/g"}, map[string]string{"/d/f": "new", "/d/g": "old"}},
		{"rename over a file dir-synced", func(t *testing.T, m *fsx.MemFS) {
			durableFile(t, m, "/d/f", []byte("new"))
			durableFile(t, m, "/d/g", []byte("old"))
			require.NoError(t, m.Rename("/d/f", "/d/g"))
			require.NoError(t, m.SyncDir("/d"))
		}, []string{"d/", "d/g"}, map[string]string{"/d/g": "new"}},
		{"remove not dir-synced", func(t *testing.T, m *fsx.MemFS) {
			durableFile(t, m, "/d/f", []byte("v1"))
			write(t, m, "/d/f", "v2", false)
			require.NoError(t, m.Remove("/d/f"))
		}, []string{"d/", "d/f"}, map[string]string{"/d/f": "v1"}},
		{"remove dir-synced", func(t *testing.T, m *fsx.MemFS) {
			durableFile(t, m, "/d/f", []byte("v1"))
			require.NoError(t, m.Remove("/d/f"))
			require.NoError(t, m.SyncDir("/d"))
		}, []string{"d/"}, nil},
		{"remove and recreate not dir-synced", func(t *testing.T, m *fsx.MemFS) {
			durableFile(t, m, "/d/f", []byte("old inode"))
			require.NoError(t, m.Remove("/d/f"))
			write(t, m, "/d/f", "new inode", true)
		}, []string{"d/", "d/f"}, map[string]string{"/d/f": "old inode"}},
		{"mkdirall not synced", func(t *testing.T, m *fsx.MemFS) {
			require.NoError(t, m.MkdirAll("/d/a/b", 0o755))
		}, []string{"d/"}, nil},
		{"mkdirall synced", func(t *testing.T, m *fsx.MemFS) {
			require.NoError(t, m.MkdirAll("/d/a/b", 0o755))
			require.NoError(t, m.SyncDir("/d"))
		}, []string{"d/", "d/a/", "d/a/b/"}, nil},
		{"remove dir not synced", func(t *testing.T, m *fsx.MemFS) {
			require.NoError(t, m.MkdirAll("/d/a", 0o755))
			require.NoError(t, m.SyncDir("/d"))
			require.NoError(t, m.Remove("/d/a"))
		}, []string{"d/", "d/a/"}, nil},
		{"syncdir commits every pending change, like a journal", func(t *testing.T, m *fsx.MemFS) {
			require.NoError(t, m.MkdirAll("/e", 0o755))
			write(t, m, "/e/y", "y", true)
			write(t, m, "/d/x", "x", true)
			require.NoError(t, m.SyncDir("/d"))
		}, []string{"d/", "d/x", "e/", "e/y"}, map[string]string{"/d/x": "x", "/e/y": "y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMem(t)
			tt.do(t, m)
			c := m.Crash(nil)
			assert.Equal(t, tt.wantTree, tree(t, c, "/"))
			for name, want := range tt.wantFiles {
				assert.Equal(t, []byte(want), memRead(t, c, name), name)
			}

			// A snapshot (process kill) keeps the namespace as it is now.
			assert.Equal(t, tree(t, m, "/"), tree(t, m.Snapshot(), "/"))
		})
	}
}

// torn returns durable overwritten with the first c bytes of cur:
// cur[:c] + durable[c:].
func torn(cur, durable []byte, c int) []byte {
	return append(bytes.Clone(cur[:c]), durable[min(c, len(durable)):]...)
}

// isTorn reports whether got == torn(cur, durable, c) for some cut c in
// [0, len(cur)].
func isTorn(got, cur, durable []byte) bool {
	if len(got) > len(durable) { // the cut is past the durable end
		return len(got) <= len(cur) && bytes.Equal(got, cur[:len(got)])
	}
	if len(got) != len(durable) {
		return false
	}
	// c must be at most p, the common prefix of got and cur, and at least s,
	// where got and durable agree from s on.
	p := 0
	for p < min(len(got), len(cur)) && got[p] == cur[p] {
		p++
	}
	s := len(got)
	for s > 0 && got[s-1] == durable[s-1] {
		s--
	}
	return s <= p
}

func TestIsTorn(t *testing.T) {
	cur, durable := []byte("abXYZfgh12"), []byte("abcdefgh")
	for c := range len(cur) + 1 {
		assert.True(t, isTorn(torn(cur, durable, c), cur, durable), "c=%d", c)
	}
	for _, got := range []string{"abXdZfgh", "abcdefg", "abXYZfgh1x", "xbcdefgh", "abcdefgh12x", "aXcdefgh"} {
		assert.False(t, isTorn([]byte(got), cur, durable), got)
	}
}

func TestMemFSCrashTornWrites(t *testing.T) {
	const P = fsx.PageSize
	m := newMem(t)
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(255) + 1) // never zero, never equal to a durable zero
		}
		return b
	}
	write := func(f fsx.File, b []byte, off int64) {
		_, err := f.WriteAt(b, off)
		require.NoError(t, err)
	}

	f := durableFile(t, m, "/d/overwrite", filled('a', 64))
	write(f, filled('B', 20), 10)
	write(f, filled('C', 2), 40)

	f = durableFile(t, m, "/d/append", filled('a', 30))
	write(f, random(50), 30)

	f = createFile(t, m, "/d/fresh", nil) // in the directory, but no byte synced
	write(f, random(100), 0)

	f = durableFile(t, m, "/d/truncated", filled('t', 50))
	require.NoError(t, f.Truncate(20))

	f = durableFile(t, m, "/d/synced", random(70))
	_ = f

	f = durableFile(t, m, "/d/same-bytes", []byte("xyz"))
	write(f, []byte("xyz"), 0)

	f = durableFile(t, m, "/d/mapped", make([]byte, 3*P))
	mp := mapFile(t, f, 3*P)
	copy(mp.Bytes(), random(3*P))
	require.NoError(t, mp.Sync(P, 1)) // the middle page is durable, the others not

	require.NoError(t, m.SyncDir("/d"))

	names := tree(t, m, "/")
	cur := map[string][]byte{}
	dur := map[string][]byte{}
	for _, n := range names {
		if n == "d/" {
			continue
		}
		cur[n] = memRead(t, m, "/"+n)
		dur[n] = durableContent(t, m, "/"+n)
	}
	// Files whose unsynced bytes differ from their durable content: every
	// kind of outcome must show up over the seeds.
	tornFiles := []string{"d/overwrite", "d/append", "d/fresh", "d/mapped"}
	type outcome struct{ none, all, partial int }
	seen := map[string]*outcome{}
	for _, n := range tornFiles {
		seen[n] = &outcome{}
	}

	for seed := range uint64(300) {
		c := m.Crash(seeded(seed))
		require.Equal(t, names, tree(t, c, "/"), "seed=%d: no namespace change was pending", seed)
		for n := range cur {
			got := memRead(t, c, "/"+n)
			require.True(t, isTorn(got, cur[n], dur[n]), "seed=%d file=%s: %q is not durable %q overwritten with a prefix of %q",
				seed, n, got, dur[n], cur[n])
			o := seen[n]
			if o == nil {
				require.Equal(t, dur[n], got, "seed=%d file=%s has nothing unsynced", seed, n)
				continue
			}
			switch {
			case bytes.Equal(got, dur[n]):
				o.none++
			case bytes.Equal(got, cur[n]) || bytes.Equal(got, torn(cur[n], dur[n], len(cur[n]))):
				o.all++
			default:
				o.partial++
			}
		}
		// The crashed filesystem holds no mappings: the mapped file may change size.
		cf, err := c.OpenFile("/d/mapped", os.O_RDWR, 0)
		require.NoError(t, err)
		require.NoError(t, cf.Truncate(1))
	}
	for _, n := range tornFiles {
		o := seen[n]
		assert.Positive(t, o.none, "%s: some crash keeps no unsynced byte", n)
		assert.Positive(t, o.all, "%s: some crash keeps every unsynced byte", n)
		assert.Positive(t, o.partial, "%s: some crash tears the write", n)
	}
	assert.Equal(t, filled('t', 50), dur["d/truncated"], "an unsynced truncate is not durable")
}

func TestMemFSCrashNamespacePrefix(t *testing.T) {
	m := newMem(t)
	durableFile(t, m, "/d/a", []byte("A"))
	write := func(name, data string) {
		f := createFile(t, m, name, []byte(data))
		require.NoError(t, f.Sync()) // content durable, the entry not
	}

	// states[k] is the tree once the first k pending changes are durable.
	states := [][]string{{"d/", "d/a"}}
	step := func(do func(), want ...string) {
		do()
		require.Equal(t, want, tree(t, m, "/"))
		states = append(states, want)
	}
	step(func() { write("/d/b", "B") }, "d/", "d/a", "d/b")
	step(func() { require.NoError(t, m.Rename("/d/a", "/d/c")) }, "d/", "d/b", "d/c")
	// MkdirAll queues one change per directory it creates.
	require.NoError(t, m.MkdirAll("/d/e/f", 0o755))
	states = append(states, []string{"d/", "d/b", "d/c", "d/e/"})
	states = append(states, []string{"d/", "d/b", "d/c", "d/e/", "d/e/f/"})
	step(func() { write("/d/e/f/g", "G") }, "d/", "d/b", "d/c", "d/e/", "d/e/f/", "d/e/f/g")
	step(func() { require.NoError(t, m.Remove("/d/b")) }, "d/", "d/c", "d/e/", "d/e/f/", "d/e/f/g")
	step(func() { require.NoError(t, m.Rename("/d/c", "/d/e/c")) }, "d/", "d/e/", "d/e/c", "d/e/f/", "d/e/f/g")

	content := map[string]string{"d/a": "A", "d/b": "B", "d/c": "A", "d/e/c": "A", "d/e/f/g": "G"}
	hits := make([]int, len(states))
	for seed := range uint64(400) {
		c := m.Crash(seeded(seed))
		got := tree(t, c, "/")
		k := -1
		for i, s := range states {
			if assert.ObjectsAreEqual(s, got) {
				k = i
				break
			}
		}
		require.NotEqual(t, -1, k, "seed=%d: %v is not a prefix of the pending changes", seed, got)
		hits[k]++
		for _, n := range got {
			if n[len(n)-1] != '/' {
				assert.Equal(t, []byte(content[n]), memRead(t, c, "/"+n), "seed=%d file=%s", seed, n)
			}
		}
	}
	for k, h := range hits {
		assert.Positive(t, h, "no crash kept exactly %d pending changes", k)
	}
	assert.Equal(t, states[0], tree(t, m.Crash(nil), "/"), "Crash(nil) keeps none")
}

// TestMemFSConcurrentCrash runs writers on distinct files while another
// goroutine crashes and snapshots the filesystem; run it under -race.
func TestMemFSConcurrentCrash(t *testing.T) {
	const writers, rounds = 6, 200
	m := newMem(t)
	var wg sync.WaitGroup
	var stop atomic.Bool
	var crashes atomic.Int64
	wg.Go(func() {
		rng := seeded(7)
		for !stop.Load() || crashes.Load() == 0 {
			var c *fsx.MemFS
			if crashes.Add(1)%2 == 0 {
				c = m.Crash(nil)
			} else {
				c = m.Crash(rng)
			}
			if _, err := c.ReadDir("/d"); err != nil {
				t.Errorf("readdir of a crash: %v", err)
				return
			}
			m.Snapshot()
			if _, err := m.DiskUsage("/d"); err != nil {
				t.Errorf("disk usage: %v", err)
				return
			}
			if _, err := m.ReadDir("/d"); err != nil {
				t.Errorf("readdir: %v", err)
				return
			}
		}
	})
	var writersWG sync.WaitGroup
	for w := range writers {
		writersWG.Go(func() {
			name := fmt.Sprintf("/d/w%d", w)
			f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Errorf("open %s: %v", name, err)
				return
			}
			defer f.Close()
			for i := range rounds {
				rec := fmt.Appendf(nil, "%d:%04d;", w, i)
				if _, err := f.WriteAt(rec, int64(i*len(rec))); err != nil {
					t.Errorf("write %s: %v", name, err)
					return
				}
				switch {
				case i%50 == 0:
					err = m.SyncDir("/d")
				case i%10 == 0:
					err = f.Sync()
				}
				if err != nil {
					t.Errorf("sync %s: %v", name, err)
					return
				}
			}
			if err := f.Sync(); err != nil {
				t.Errorf("sync %s: %v", name, err)
			}
		})
	}
	writersWG.Wait()
	stop.Store(true)
	wg.Wait()
	require.NoError(t, m.SyncDir("/d"))

	c := m.Crash(nil)
	for w := range writers {
		var want []byte
		for i := range rounds {
			want = fmt.Appendf(want, "%d:%04d;", w, i)
		}
		name := fmt.Sprintf("/d/w%d", w)
		assert.Equal(t, want, memRead(t, m, name))
		assert.Equal(t, want, memRead(t, c, name), "everything was synced at the end")
	}
	assert.Positive(t, crashes.Load())
}
