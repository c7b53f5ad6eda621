package fsx_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

// allocatedBytes returns the disk space held by the file at name.
func allocatedBytes(t *testing.T, name string) int64 {
	t.Helper()
	st, err := os.Stat(name)
	require.NoError(t, err)
	return st.Sys().(*syscall.Stat_t).Blocks * 512
}

func TestOSAllocateReservesBlocks(t *testing.T) {
	tests := []struct {
		name   string
		off, n int64
	}{
		{"one page", 0, fsx.PageSize},
		{"one MiB", 0, 1 << 20},
		{"at an offset", 1 << 20, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "seg")
			f := createFile(t, fsx.OS, name, nil)
			require.NoError(t, f.Allocate(tt.off, tt.n))
			size, err := f.Size()
			require.NoError(t, err)
			assert.Equal(t, tt.off+tt.n, size)
			assert.GreaterOrEqual(t, allocatedBytes(t, name), tt.n, "blocks are reserved, not a sparse hole")
		})
	}
}

func TestOSZeroRangeKeepsBlocks(t *testing.T) {
	name := filepath.Join(t.TempDir(), "seg")
	f := createFile(t, fsx.OS, name, filled(0xAA, 1<<20))
	require.NoError(t, f.Sync())
	before := allocatedBytes(t, name)
	require.NoError(t, f.ZeroRange(fsx.PageSize, 1<<19))
	assert.GreaterOrEqual(t, allocatedBytes(t, name), before, "ZeroRange keeps the blocks allocated")
}

func TestOSMapErrorNamesFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "short")
	f := createFile(t, fsx.OS, name, filled(1, 10))
	_, err := f.Map(fsx.PageSize) // mapping past EOF would SIGBUS on first touch
	require.Error(t, err)
	assert.Contains(t, err.Error(), name)
}

func TestOSDiskUsage(t *testing.T) {
	dir := t.TempDir()
	u, err := fsx.OS.DiskUsage(dir)
	require.NoError(t, err)
	assert.Positive(t, u.Total)
	assert.GreaterOrEqual(t, u.Free, int64(0))
	assert.LessOrEqual(t, u.Free, u.Total)
	assert.GreaterOrEqual(t, u.UsedRatio(), 0.0)
	assert.LessOrEqual(t, u.UsedRatio(), 1.0)

	missing := filepath.Join(dir, "missing")
	_, err = fsx.OS.DiskUsage(missing)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, err.Error(), missing)
}

func TestUsageUsedRatio(t *testing.T) {
	tests := []struct {
		name string
		u    fsx.Usage
		want float64
	}{
		{"empty disk", fsx.Usage{Total: 100, Free: 100}, 0},
		{"full disk", fsx.Usage{Total: 100, Free: 0}, 1},
		{"quarter used", fsx.Usage{Total: 400, Free: 300}, 0.25},
		{"unknown total", fsx.Usage{}, 0},
		{"negative total", fsx.Usage{Total: -1, Free: 5}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.InDelta(t, tt.want, tt.u.UsedRatio(), 1e-12)
		})
	}
}

func TestOSSyncDir(t *testing.T) {
	dir := t.TempDir()
	createFile(t, fsx.OS, filepath.Join(dir, "f"), []byte("x"))
	require.NoError(t, fsx.OS.Rename(filepath.Join(dir, "f"), filepath.Join(dir, "g")))
	assert.NoError(t, fsx.OS.SyncDir(dir))
	assert.Error(t, fsx.OS.SyncDir(filepath.Join(dir, "missing")))
}
