package fsx_test

import (
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

// newMem returns a MemFS holding a durable, empty directory /d.
func newMem(t *testing.T) *fsx.MemFS {
	t.Helper()
	m := fsx.NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	require.NoError(t, m.SyncDir("/"))
	return m
}

// durableFile creates name holding data, syncs it and its directory.
func durableFile(t *testing.T, m *fsx.MemFS, name string, data []byte) fsx.File {
	t.Helper()
	f := createFile(t, m, name, data)
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir(filepath.Dir(name)))
	return f
}

// memRead returns a file's current content in m.
func memRead(t *testing.T, m *fsx.MemFS, name string) []byte {
	t.Helper()
	b, err := m.ReadAll(name)
	require.NoError(t, err)
	return b
}

// durableContent returns what survives of name in a crash that keeps only
// durable state.
func durableContent(t *testing.T, m *fsx.MemFS, name string) []byte {
	t.Helper()
	return memRead(t, m.Crash(nil), name)
}

// seeded returns a deterministic random source for a crash.
func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1)) }

func TestMemFSSnapshotKeepsUnsynced(t *testing.T) {
	m := newMem(t)
	f := durableFile(t, m, "/d/f", []byte("v1"))
	durableFile(t, m, "/d/old", []byte("renamed"))
	g := durableFile(t, m, "/d/mapped", make([]byte, fsx.PageSize))
	_, err := f.WriteAt([]byte("v2 longer"), 0)
	require.NoError(t, err)
	createFile(t, m, "/d/new", []byte("never synced"))
	require.NoError(t, m.Rename("/d/old", "/d/renamed"))
	require.NoError(t, m.MkdirAll("/d/sub/dir", 0o755))
	mp := mapFile(t, g, fsx.PageSize)
	copy(mp.Bytes()[100:], "mapped, not msynced")

	s := m.Snapshot()
	assert.Equal(t, tree(t, m, "/"), tree(t, s, "/"))
	for _, n := range []string{"/d/f", "/d/new", "/d/renamed", "/d/mapped"} {
		assert.Equal(t, memRead(t, m, n), memRead(t, s, n), n)
	}
	// Everything in a snapshot is durable.
	sc := s.Crash(nil)
	assert.Equal(t, tree(t, s, "/"), tree(t, sc, "/"))
	for _, n := range []string{"/d/f", "/d/new", "/d/renamed", "/d/mapped"} {
		assert.Equal(t, memRead(t, s, n), memRead(t, sc, n), n)
	}

	// The original is unaffected: a crash still loses what was not synced.
	assert.Equal(t, []string{"d/", "d/f", "d/mapped", "d/old"}, tree(t, m.Crash(nil), "/"))
	assert.Equal(t, []byte("v1"), durableContent(t, m, "/d/f"))

	// And the snapshot is a copy.
	sf, err := s.OpenFile("/d/f", os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = sf.WriteAt([]byte("SNAP"), 0)
	require.NoError(t, err)
	assert.Equal(t, []byte("v2 longer"), memRead(t, m, "/d/f"))
	copy(mp.Bytes(), "after")
	assert.Equal(t, make([]byte, 5), memRead(t, s, "/d/mapped")[:5])
}

func TestMemFSMappedFileKeepsItsSize(t *testing.T) {
	const P = fsx.PageSize
	tests := []struct {
		name    string
		do      func(m *fsx.MemFS, f fsx.File) error
		refused bool
	}{
		{"truncate shorter", func(_ *fsx.MemFS, f fsx.File) error { return f.Truncate(P) }, true},
		{"truncate longer", func(_ *fsx.MemFS, f fsx.File) error { return f.Truncate(3 * P) }, true},
		{"write past the end", func(_ *fsx.MemFS, f fsx.File) error {
			_, err := f.WriteAt([]byte("x"), 2*P)
			return err
		}, true},
		{"allocate past the end", func(_ *fsx.MemFS, f fsx.File) error { return f.Allocate(P, 2*P) }, true},
		{"open O_TRUNC", func(m *fsx.MemFS, _ fsx.File) error {
			g, err := m.OpenFile("/d/f", os.O_RDWR|os.O_TRUNC, 0)
			if err == nil {
				g.Close()
			}
			return err
		}, true},
		{"mutate", func(m *fsx.MemFS, _ fsx.File) error {
			return m.Mutate("/d/f", func(b []byte) []byte { return b[:1] })
		}, true},
		{"write inside", func(_ *fsx.MemFS, f fsx.File) error {
			_, err := f.WriteAt([]byte("x"), 2*P-1)
			return err
		}, false},
		{"allocate inside", func(_ *fsx.MemFS, f fsx.File) error { return f.Allocate(0, 2*P) }, false},
		{"truncate to the same size", func(_ *fsx.MemFS, f fsx.File) error { return f.Truncate(2 * P) }, false},
		{"zero range", func(_ *fsx.MemFS, f fsx.File) error { return f.ZeroRange(0, 3*P) }, false},
		{"sync", func(_ *fsx.MemFS, f fsx.File) error { return f.Sync() }, false},
		{"open without O_TRUNC", func(m *fsx.MemFS, _ fsx.File) error {
			g, err := m.OpenFile("/d/f", os.O_RDWR|os.O_CREATE, 0)
			if err == nil {
				g.Close()
			}
			return err
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMem(t)
			f := durableFile(t, m, "/d/f", filled(0xAA, 2*P))
			m1, err := f.Map(P) // a mapping of a prefix pins the whole size
			require.NoError(t, err)
			m2, err := f.Map(2 * P)
			require.NoError(t, err)
			require.NoError(t, m1.Unmap())
			require.NoError(t, m1.Unmap(), "a second Unmap must not release m2's hold")

			err = tt.do(m, f)
			if !tt.refused {
				require.NoError(t, err)
				require.NoError(t, m2.Unmap())
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "/d/f")
			assert.Equal(t, filled(0xAA, 2*P), memRead(t, m, "/d/f"), "a refused change changes nothing")

			require.NoError(t, m2.Unmap())
			assert.NoError(t, tt.do(m, f), "allowed once every mapping is gone")
		})
	}
}

func TestMemFSHook(t *testing.T) {
	type call struct {
		op   fsx.Op
		path string
	}
	type env struct {
		m  *fsx.MemFS
		f  fsx.File    // /d/f, mapped
		mp fsx.Mapping // all of /d/f
		g  fsx.File    // /d/g, not mapped
	}
	tests := []struct {
		name string
		do   func(t *testing.T, e env)
		want []call
	}{
		{"write", func(t *testing.T, e env) {
			_, err := e.f.WriteAt([]byte("x"), 0)
			require.NoError(t, err)
		}, []call{{fsx.OpWrite, "/d/f"}}},
		{"truncate", func(t *testing.T, e env) { require.NoError(t, e.g.Truncate(1)) }, []call{{fsx.OpTruncate, "/d/g"}}},
		{"allocate", func(t *testing.T, e env) { require.NoError(t, e.g.Allocate(0, 9000)) }, []call{{fsx.OpAllocate, "/d/g"}}},
		{"zero range", func(t *testing.T, e env) { require.NoError(t, e.f.ZeroRange(0, 9)) }, []call{{fsx.OpZeroRange, "/d/f"}}},
		{"sync", func(t *testing.T, e env) { require.NoError(t, e.f.Sync()) }, []call{{fsx.OpSync, "/d/f"}}},
		{"msync", func(t *testing.T, e env) { require.NoError(t, e.mp.Sync(0, 1)) }, []call{{fsx.OpMsync, "/d/f"}}},
		{"syncdir", func(t *testing.T, e env) { require.NoError(t, e.m.SyncDir("/d")) }, []call{{fsx.OpSyncDir, "/d"}}},
		{"rename names the target", func(t *testing.T, e env) { require.NoError(t, e.m.Rename("/d/g", "/d/h")) },
			[]call{{fsx.OpRename, "/d/h"}}},
		{"remove", func(t *testing.T, e env) { require.NoError(t, e.m.Remove("/d/g")) }, []call{{fsx.OpRemove, "/d/g"}}},
		{"mkdirall, once", func(t *testing.T, e env) { require.NoError(t, e.m.MkdirAll("/d/x/y", 0o755)) },
			[]call{{fsx.OpMkdir, "/d/x/y"}}},
		{"open create", func(t *testing.T, e env) {
			h, err := e.m.OpenFile("/d/new", os.O_RDWR|os.O_CREATE, 0o644)
			require.NoError(t, err)
			require.NoError(t, h.Close())
		}, []call{{fsx.OpOpen, "/d/new"}}},
		{"open truncate", func(t *testing.T, e env) {
			h, err := e.m.OpenFile("/d/g", os.O_RDWR|os.O_TRUNC, 0)
			require.NoError(t, err)
			require.NoError(t, h.Close())
		}, []call{{fsx.OpOpen, "/d/g"}}},
		{"paths are cleaned", func(t *testing.T, e env) {
			require.NoError(t, e.m.Rename("/d/../d/g", "/d//h/"))
		}, []call{{fsx.OpRename, "/d/h"}}},
		{"called before an op that then fails", func(t *testing.T, e env) {
			require.ErrorIs(t, e.m.Remove("/d/missing"), fs.ErrNotExist)
		}, []call{{fsx.OpRemove, "/d/missing"}}},
		{"atomic write", func(t *testing.T, e env) {
			require.NoError(t, fsx.WriteFileAtomic(e.m, "/d/meta", []byte("m")))
		}, []call{
			{fsx.OpOpen, "/d/meta.tmp"}, {fsx.OpWrite, "/d/meta.tmp"}, {fsx.OpSync, "/d/meta.tmp"},
			{fsx.OpRename, "/d/meta"}, {fsx.OpSyncDir, "/d"},
		}},
		{"reads are not hooked", func(t *testing.T, e env) {
			_, err := e.f.ReadAt(make([]byte, 4), 0)
			require.NoError(t, err)
			_, err = e.f.Size()
			require.NoError(t, err)
			_, err = e.m.Stat("/d/f")
			require.NoError(t, err)
			_, err = e.m.ReadDir("/d")
			require.NoError(t, err)
			_, err = e.m.DiskUsage("/d")
			require.NoError(t, err)
			h, err := e.m.OpenFile("/d/f", os.O_RDONLY, 0)
			require.NoError(t, err)
			require.NoError(t, h.Close())
			_, err = fsx.ReadFile(e.m, "/d/f")
			require.NoError(t, err)
			_, err = e.m.ReadAll("/d/f")
			require.NoError(t, err)
			mp, err := e.g.Map(1)
			require.NoError(t, err)
			require.NoError(t, mp.Populate(0, 1))
			require.NoError(t, mp.Unmap())
			require.NoError(t, e.mp.Populate(0, fsx.PageSize))
			e.m.Crash(seeded(1))
			e.m.Snapshot()
			fsx.Exists(e.m, "/d/f")
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMem(t)
			e := env{m: m}
			e.f = durableFile(t, m, "/d/f", filled(1, 2*fsx.PageSize))
			e.mp = mapFile(t, e.f, 2*fsx.PageSize)
			e.g = durableFile(t, m, "/d/g", filled(2, 10))

			var got []call
			m.SetHook(func(op fsx.Op, path string) { got = append(got, call{op, path}) })
			tt.do(t, e)
			m.SetHook(nil)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestMemFSHookRunsBeforeTheOpOutsideTheLock(t *testing.T) {
	m := newMem(t)
	f := durableFile(t, m, "/d/f", []byte("old"))
	var seenCurrent, seenDurable []byte
	m.SetHook(func(op fsx.Op, path string) {
		// The hook may use the filesystem (commitlog's crash tests take a
		// Crash in it); it sees the state before the op.
		seenCurrent = memRead(t, m, path)
		seenDurable = memRead(t, m.Crash(nil), path)
	})
	_, err := f.WriteAt([]byte("new"), 0)
	require.NoError(t, err)
	assert.Equal(t, []byte("old"), seenCurrent)
	require.NoError(t, f.Sync())
	assert.Equal(t, []byte("new"), seenCurrent)
	assert.Equal(t, []byte("old"), seenDurable, "the hook for Sync runs before it")
}

func TestMemFSDiskUsage(t *testing.T) {
	const total = 1 << 40
	m := newMem(t)
	u, err := m.DiskUsage("/d")
	require.NoError(t, err)
	assert.Equal(t, fsx.Usage{Total: total, Free: total}, u)

	createFile(t, m, "/d/a", make([]byte, 100))           // unsynced bytes count
	durableFile(t, m, "/d/b", make([]byte, fsx.PageSize)) // synced too
	createFile(t, m, "/d/c", make([]byte, 7))
	require.NoError(t, m.Remove("/d/c")) // removed files do not
	u, err = m.DiskUsage("/anything")
	require.NoError(t, err)
	assert.Equal(t, fsx.Usage{Total: total, Free: total - 100 - fsx.PageSize}, u)

	var gotUsed int64
	m.SetUsage(func(used int64) fsx.Usage {
		gotUsed = used
		return fsx.Usage{Total: 10_000, Free: 10_000 - used}
	})
	u, err = fsx.WithFaults(m, nil).DiskUsage("/d")
	require.NoError(t, err)
	assert.Equal(t, int64(100+fsx.PageSize), gotUsed)
	assert.Equal(t, fsx.Usage{Total: 10_000, Free: 10_000 - 100 - fsx.PageSize}, u)
	assert.InDelta(t, float64(100+fsx.PageSize)/10_000, u.UsedRatio(), 1e-12)

	m.SetUsage(nil)
	u, err = m.DiskUsage("/d")
	require.NoError(t, err)
	assert.Equal(t, int64(total), u.Total)
}

func TestMemFSReadDir(t *testing.T) {
	m := newMem(t)
	require.NoError(t, m.MkdirAll("/d/sub/deep", 0o755))
	require.NoError(t, m.MkdirAll("/d/other", 0o755))
	for _, n := range []string{"/d/z", "/d/a", "/d/sub/f", "/d/sub/deep/g", "/top"} {
		createFile(t, m, n, nil)
	}
	tests := []struct {
		dir  string
		want []string
	}{
		{"/", []string{"d", "top"}},
		{"/d", []string{"a", "other", "sub", "z"}},
		{"/d/", []string{"a", "other", "sub", "z"}},
		{"/d/sub", []string{"deep", "f"}},
		{"/d/sub/deep", []string{"g"}},
		{"/d/other", nil},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			got, err := m.ReadDir(tt.dir)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := m.ReadDir("/d/z")
	assert.ErrorIs(t, err, fs.ErrNotExist, "a file is not a directory")
}

func TestMemFSErrors(t *testing.T) {
	tests := []struct {
		name string
		do   func(m *fsx.MemFS, f fsx.File) error
		want error
	}{
		{"read at negative offset", func(_ *fsx.MemFS, f fsx.File) error {
			_, err := f.ReadAt(make([]byte, 1), -1)
			return err
		}, fs.ErrInvalid},
		{"read past the end", func(_ *fsx.MemFS, f fsx.File) error {
			_, err := f.ReadAt(make([]byte, 1), 100)
			return err
		}, io.EOF},
		{"write at negative offset", func(_ *fsx.MemFS, f fsx.File) error {
			_, err := f.WriteAt([]byte("x"), -1)
			return err
		}, fs.ErrInvalid},
		{"truncate to negative size", func(_ *fsx.MemFS, f fsx.File) error { return f.Truncate(-1) }, fs.ErrInvalid},
		{"allocate at negative offset", func(_ *fsx.MemFS, f fsx.File) error { return f.Allocate(-1, 10) }, fs.ErrInvalid},
		{"allocate nothing", func(_ *fsx.MemFS, f fsx.File) error { return f.Allocate(0, 0) }, fs.ErrInvalid},
		{"zero range at negative offset", func(_ *fsx.MemFS, f fsx.File) error { return f.ZeroRange(-1, 2) }, fs.ErrInvalid},
		{"zero range of nothing", func(_ *fsx.MemFS, f fsx.File) error { return f.ZeroRange(0, -2) }, fs.ErrInvalid},
		{"map negative size", func(_ *fsx.MemFS, f fsx.File) error {
			_, err := f.Map(-1)
			return err
		}, fs.ErrInvalid},
		{"read all missing", func(m *fsx.MemFS, _ fsx.File) error {
			_, err := m.ReadAll("/d/missing")
			return err
		}, fs.ErrNotExist},
		{"mutate missing", func(m *fsx.MemFS, _ fsx.File) error {
			return m.Mutate("/d/missing", func(b []byte) []byte { return b })
		}, fs.ErrNotExist},
		{"remove missing dir", func(m *fsx.MemFS, _ fsx.File) error { return m.Remove("/nodir") }, fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMem(t)
			f := durableFile(t, m, "/d/f", []byte("data"))
			assert.ErrorIs(t, tt.do(m, f), tt.want)
			assert.Equal(t, []byte("data"), memRead(t, m, "/d/f"), "a failed call changes nothing")
		})
	}
}

func TestMemFSMutate(t *testing.T) {
	m := newMem(t)
	f := durableFile(t, m, "/d/f", []byte("abcdef"))
	_, err := f.WriteAt([]byte("XY"), 0) // unsynced; Mutate acts on the current content
	require.NoError(t, err)

	require.NoError(t, m.Mutate("/d/f", func(b []byte) []byte {
		b[2] ^= 0xFF // flip a byte
		return b[:4] // and lose the tail
	}))
	want := []byte{'X', 'Y', 'c' ^ 0xFF, 'd'}
	assert.Equal(t, want, memRead(t, m, "/d/f"))
	assert.Equal(t, want, durableContent(t, m, "/d/f"), "disk damage is durable")
	assert.Equal(t, want, contentOf(t, f), "open handles see it")
}
