package fsx_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

// faultBackends are the filesystems the fault wrapper is tested over.
func faultBackends() []backend { return backends()[:2] }

func TestFaultsAllocateENOSPC(t *testing.T) {
	for _, b := range faultBackends() {
		t.Run(b.name, func(t *testing.T) {
			inner, dir := b.open(t)
			var faults fsx.Faults
			fsys := fsx.WithFaults(inner, &faults)
			name := filepath.Join(dir, "00000000000000000000")
			f := createFile(t, fsys, name, nil)
			faults.Add(fsx.Fault{Op: fsx.OpAllocate, Err: syscall.ENOSPC})

			err := f.Allocate(0, 1<<20)
			require.ErrorIs(t, err, syscall.ENOSPC)
			assert.Contains(t, err.Error(), name)
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, name, pe.Path)
			assert.Equal(t, string(fsx.OpAllocate), pe.Op)

			size, err := f.Size()
			require.NoError(t, err)
			assert.Equal(t, int64(0), size, "a failed allocation does not reach the filesystem")
		})
	}
}

func TestFaultsPathFilter(t *testing.T) {
	var faults fsx.Faults
	fsys := fsx.WithFaults(fsx.OS, &faults)
	dir := t.TempDir()
	seg1 := createFile(t, fsys, filepath.Join(dir, "seg-1"), nil)
	seg2 := createFile(t, fsys, filepath.Join(dir, "seg-2"), nil)
	faults.Add(fsx.Fault{Op: fsx.OpWrite, Path: "seg-2", Err: syscall.EIO})

	_, err := seg1.WriteAt([]byte("ok"), 0)
	assert.NoError(t, err)
	_, err = seg2.WriteAt([]byte("no"), 0)
	assert.ErrorIs(t, err, syscall.EIO)
	assert.Empty(t, readFile(t, fsys, seg2.Name()), "a failed write writes nothing")
	assert.NoError(t, seg2.Sync(), "only the named op fails")
}

func TestFaultsAfterTimes(t *testing.T) {
	tests := []struct {
		name        string
		after       int
		times       int
		wantPattern string // one char per call: '.' succeeds, 'x' fails
	}{
		{"forever", 0, 0, "xxxxxxxx"},
		{"after 3", 3, 0, "...xxxxx"},
		{"once", 0, 1, "x......."},
		{"twice", 0, 2, "xx......"},
		{"after 2, 3 times", 2, 3, "..xxx..."},
		{"after more than calls", 10, 0, "........"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var faults fsx.Faults
			fsys := fsx.WithFaults(fsx.OS, &faults)
			f := createFile(t, fsys, filepath.Join(t.TempDir(), "f"), []byte("x"))
			faults.Add(fsx.Fault{Op: fsx.OpSync, Err: syscall.EIO, After: tt.after, Times: tt.times})
			var got strings.Builder
			for range len(tt.wantPattern) {
				if err := f.Sync(); err != nil {
					require.ErrorIs(t, err, syscall.EIO)
					got.WriteByte('x')
				} else {
					got.WriteByte('.')
				}
			}
			assert.Equal(t, tt.wantPattern, got.String())
		})
	}
}

func TestFaultsNonMatchingCallsDoNotCount(t *testing.T) {
	var faults fsx.Faults
	faults.Add(fsx.Fault{Op: fsx.OpSync, Path: "b", Err: syscall.EIO, After: 1})
	for range 5 {
		require.NoError(t, faults.Check(fsx.OpSync, "/a"))
		require.NoError(t, faults.Check(fsx.OpWrite, "/b"))
	}
	assert.NoError(t, faults.Check(fsx.OpSync, "/b"), "first matching call is let through")
	assert.Error(t, faults.Check(fsx.OpSync, "/b"))
}

func TestFaultsRulesInOrder(t *testing.T) {
	var faults fsx.Faults
	faults.Add(fsx.Fault{Op: fsx.OpWrite, Err: syscall.EIO, Times: 1})
	faults.Add(fsx.Fault{Op: fsx.OpWrite, Err: syscall.ENOSPC})
	assert.ErrorIs(t, faults.Check(fsx.OpWrite, "/f"), syscall.EIO)
	assert.ErrorIs(t, faults.Check(fsx.OpWrite, "/f"), syscall.ENOSPC, "an exhausted rule falls through to the next")
	assert.ErrorIs(t, faults.Check(fsx.OpWrite, "/f"), syscall.ENOSPC)
}

func TestFaultsRemoveAndClear(t *testing.T) {
	var faults fsx.Faults
	fsys := fsx.WithFaults(fsx.OS, &faults)
	f := createFile(t, fsys, filepath.Join(t.TempDir(), "f"), nil)

	removeSync := faults.Add(fsx.Fault{Op: fsx.OpSync, Err: syscall.EIO})
	faults.Add(fsx.Fault{Op: fsx.OpTruncate, Err: syscall.EIO})
	require.Error(t, f.Sync())
	require.Error(t, f.Truncate(1))

	removeSync()
	assert.NoError(t, f.Sync())
	assert.Error(t, f.Truncate(1), "removing one fault keeps the others")
	removeSync() // removing twice is harmless
	assert.Error(t, f.Truncate(1))

	faults.Clear()
	assert.NoError(t, f.Truncate(1))
	assert.NoError(t, f.Sync())

	faults.Add(fsx.Fault{Op: fsx.OpSync, Err: syscall.EIO})
	assert.Error(t, f.Sync(), "faults can be added after Clear")
}

func TestFaultsNil(t *testing.T) {
	var nilFaults *fsx.Faults
	assert.NoError(t, nilFaults.Check(fsx.OpWrite, "/x"))

	fsys := fsx.WithFaults(fsx.OS, nil)
	dir := t.TempDir()
	require.NoError(t, fsx.WriteFileAtomic(fsys, filepath.Join(dir, "f"), []byte("v")))
	assert.Equal(t, []byte("v"), readFile(t, fsys, filepath.Join(dir, "f")))
}

// TestFaultsEveryOp fails each operation in turn, checks the error and that
// the operation did not happen, then removes the fault and checks that the
// same call succeeds.
func TestFaultsEveryOp(t *testing.T) {
	type env struct {
		fsys fsx.FS
		dir  string
		f    fsx.File    // dir/f, 2 pages of 0xAA
		m    fsx.Mapping // 2 pages of f
		g    fsx.File    // dir/g, 2 pages of 0xAA, not mapped so that it may change size
	}
	tests := []struct {
		op fsx.Op
		do func(e env) error
		// unchanged checks, after the failed call, that nothing happened.
		unchanged func(t *testing.T, e env)
	}{
		{fsx.OpOpen, func(e env) error {
			g, err := e.fsys.OpenFile(filepath.Join(e.dir, "new"), os.O_RDWR|os.O_CREATE, 0o644)
			if err == nil {
				g.Close()
			}
			return err
		}, func(t *testing.T, e env) { assert.False(t, fsx.Exists(e.fsys, filepath.Join(e.dir, "new"))) }},
		{fsx.OpRead, func(e env) error {
			_, err := e.f.ReadAt(make([]byte, 4), 0)
			return err
		}, nil},
		{fsx.OpWrite, func(e env) error {
			_, err := e.f.WriteAt([]byte("new"), 0)
			return err
		}, func(t *testing.T, e env) { assert.Equal(t, filled(0xAA, 3), e.m.Bytes()[:3]) }},
		{fsx.OpTruncate, func(e env) error { return e.g.Truncate(fsx.PageSize) }, func(t *testing.T, e env) {
			size, err := e.g.Size()
			require.NoError(t, err)
			assert.Equal(t, int64(2*fsx.PageSize), size)
		}},
		{fsx.OpAllocate, func(e env) error { return e.g.Allocate(0, 3*fsx.PageSize) }, func(t *testing.T, e env) {
			size, err := e.g.Size()
			require.NoError(t, err)
			assert.Equal(t, int64(2*fsx.PageSize), size)
		}},
		{fsx.OpZeroRange, func(e env) error { return e.f.ZeroRange(0, 10) }, func(t *testing.T, e env) {
			assert.Equal(t, filled(0xAA, 10), e.m.Bytes()[:10])
		}},
		{fsx.OpSync, func(e env) error { return e.f.Sync() }, nil},
		{fsx.OpMap, func(e env) error {
			m, err := e.f.Map(fsx.PageSize)
			if err == nil {
				m.Unmap()
			}
			return err
		}, nil},
		{fsx.OpMsync, func(e env) error { return e.m.Sync(10, 100) }, nil},
		{fsx.OpPopulate, func(e env) error { return e.m.Populate(0, fsx.PageSize) }, nil},
		{fsx.OpSyncDir, func(e env) error { return e.fsys.SyncDir(e.dir) }, nil},
		{fsx.OpRename, func(e env) error {
			return e.fsys.Rename(filepath.Join(e.dir, "f"), filepath.Join(e.dir, "renamed"))
		}, func(t *testing.T, e env) { assert.True(t, fsx.Exists(e.fsys, filepath.Join(e.dir, "f"))) }},
		{fsx.OpRemove, func(e env) error { return e.fsys.Remove(filepath.Join(e.dir, "f")) }, func(t *testing.T, e env) {
			assert.True(t, fsx.Exists(e.fsys, filepath.Join(e.dir, "f")))
		}},
		{fsx.OpMkdir, func(e env) error { return e.fsys.MkdirAll(filepath.Join(e.dir, "sub"), 0o755) }, func(t *testing.T, e env) {
			assert.False(t, fsx.Exists(e.fsys, filepath.Join(e.dir, "sub")))
		}},
		{fsx.OpUsage, func(e env) error {
			_, err := e.fsys.DiskUsage(e.dir)
			return err
		}, nil},
	}
	for _, b := range faultBackends() {
		t.Run(b.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(string(tt.op), func(t *testing.T) {
					inner, dir := b.open(t)
					var faults fsx.Faults
					e := env{fsys: fsx.WithFaults(inner, &faults), dir: dir}
					e.f = createFile(t, e.fsys, filepath.Join(dir, "f"), filled(0xAA, 2*fsx.PageSize))
					e.m = mapFile(t, e.f, 2*fsx.PageSize)
					e.g = createFile(t, e.fsys, filepath.Join(dir, "g"), filled(0xAA, 2*fsx.PageSize))

					remove := faults.Add(fsx.Fault{Op: tt.op, Err: syscall.EIO})
					err := tt.do(e)
					require.ErrorIs(t, err, syscall.EIO)
					var pe *fs.PathError
					require.ErrorAs(t, err, &pe)
					assert.Equal(t, string(tt.op), pe.Op)
					assert.True(t, strings.HasPrefix(pe.Path, dir), "path %q", pe.Path)
					if tt.unchanged != nil {
						tt.unchanged(t, e)
					}

					remove()
					assert.NoError(t, tt.do(e), "succeeds once the fault is removed")
				})
			}
		})
	}
}

func TestFaultsMsyncKeepsDataVolatile(t *testing.T) {
	mem := fsx.NewMemFS()
	require.NoError(t, mem.MkdirAll("/d", 0o755))
	var faults fsx.Faults
	fsys := fsx.WithFaults(mem, &faults)
	f := createFile(t, fsys, "/d/seg", nil)
	require.NoError(t, f.Allocate(0, fsx.PageSize))
	require.NoError(t, f.Sync())
	require.NoError(t, fsys.SyncDir("/d"))
	m := mapFile(t, f, fsx.PageSize)
	copy(m.Bytes(), "data")

	faults.Add(fsx.Fault{Op: fsx.OpMsync, Path: "/d/seg", Err: syscall.EIO, Times: 1})
	require.ErrorIs(t, m.Sync(0, 4), syscall.EIO)
	got, err := mem.Crash(nil).ReadAll("/d/seg")
	require.NoError(t, err)
	assert.Equal(t, filled(0, 4), got[:4], "a failed msync made nothing durable")

	require.NoError(t, m.Sync(0, 4))
	got, err = mem.Crash(nil).ReadAll("/d/seg")
	require.NoError(t, err)
	assert.Equal(t, []byte("data"), got[:4])
}

func TestFaultsConcurrent(t *testing.T) {
	var faults fsx.Faults
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 200 {
				remove := faults.Add(fsx.Fault{Op: fsx.OpWrite, Path: "x", Err: syscall.EIO, Times: 1})
				err := faults.Check(fsx.OpWrite, "/x")
				if err != nil && !errors.Is(err, syscall.EIO) {
					t.Errorf("goroutine %d, call %d: %v", i, j, err)
				}
				remove()
				if j%50 == 0 {
					faults.Clear()
				}
			}
		})
	}
	wg.Wait()
}

func TestOffsetName(t *testing.T) {
	assert.Equal(t, "00000000001073741824", fsx.OffsetName(1<<30))
	for _, tt := range []struct {
		name string
		off  int64
		ok   bool
	}{
		{"00000000001073741824", 1 << 30, true},
		{"00000000000000000000", 0, true},
		{"0000000000000000000", 0, false},
		{"commitlog.checkpoint", 0, false},
		{"-0000000000000000001", 0, false},
	} {
		off, ok := fsx.ParseOffsetName(tt.name)
		assert.Equal(t, tt.ok, ok, tt.name)
		assert.Equal(t, tt.off, off, tt.name)
	}
}
