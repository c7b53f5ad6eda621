//go:build linux

package powercut

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// mount mounts a power-cut file system for the test, or skips the test
// with the reason when this machine cannot (not root, no /dev/fuse).
func mount(t *testing.T) (*FS, string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("powercut: mounting FUSE needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("powercut: %v", err)
	}
	backing, mnt := t.TempDir(), t.TempDir()
	f, err := Mount(backing, mnt)
	if err != nil {
		t.Skipf("powercut: cannot mount here: %v", err)
	}
	t.Cleanup(func() { _ = f.Unmount() })
	return f, backing, mnt
}

func fill(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// Written through write(2): what was fsynced survives a cut, what was
// written after it is reverted, growth after the sync is cut off, and a
// file never synced is empty.
func TestPowerCutWrites(t *testing.T) {
	f, backing, mnt := mount(t)
	name := filepath.Join(mnt, "log")
	fh, err := os.Create(name)
	require.NoError(t, err)
	_, err = fh.Write(fill('a', 10000))
	require.NoError(t, err)
	require.NoError(t, fh.Sync())
	_, err = fh.WriteAt(fill('b', 100), 5000) // overwrite, unsynced
	require.NoError(t, err)
	_, err = fh.WriteAt(fill('c', 3000), 10000) // growth, unsynced
	require.NoError(t, err)
	require.NoError(t, fh.Close())
	other := filepath.Join(mnt, "never-synced")
	require.NoError(t, os.WriteFile(other, fill('x', 500), 0o644))

	s, err := f.PowerCut()
	require.NoError(t, err)
	assert.Equal(t, 2, s.Files)
	assert.Equal(t, int64(3000+500), s.BytesDropped)

	got, err := os.ReadFile(filepath.Join(backing, "log"))
	require.NoError(t, err)
	assert.Equal(t, fill('a', 10000), got)
	got, err = os.ReadFile(name) // through the remounted file system
	require.NoError(t, err)
	assert.Equal(t, fill('a', 10000), got)
	got, err = os.ReadFile(other)
	require.NoError(t, err)
	assert.Empty(t, got)
}

// Written through a shared mapping of a preallocated file, as the commit
// log writes: msync of a range makes it durable, the rest reverts to its
// synced content.
func TestPowerCutMapped(t *testing.T) {
	f, backing, mnt := mount(t)
	name := filepath.Join(mnt, "segment")
	fh, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	const size = 64 << 10
	require.NoError(t, unix.Fallocate(int(fh.Fd()), 0, 0, size))
	m, err := unix.Mmap(int(fh.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err)
	copy(m[:16<<10], fill('s', 16<<10))
	require.NoError(t, unix.Msync(m[:16<<10], unix.MS_SYNC))
	copy(m[16<<10:40<<10], fill('u', 24<<10)) // never synced
	copy(m[:100], fill('v', 100))             // overwrites synced data, never synced
	require.NoError(t, unix.Munmap(m))
	require.NoError(t, fh.Close())

	s, err := f.PowerCut()
	require.NoError(t, err)
	assert.Equal(t, 1, s.Files)
	assert.Positive(t, s.PagesLost)

	got, err := os.ReadFile(filepath.Join(backing, "segment"))
	require.NoError(t, err)
	require.Len(t, got, size)
	assert.Equal(t, fill('s', 16<<10), got[:16<<10])
	assert.Equal(t, make([]byte, size-16<<10), got[16<<10:])
	assert.Equal(t, 1, f.Totals().Cuts)
}

// A write-then-rename-then-sync file (an atomic metadata save) keeps its
// new content; a clean Unmount keeps unsynced data.
func TestAtomicSaveAndCleanUnmount(t *testing.T) {
	f, backing, mnt := mount(t)
	tmp, final := filepath.Join(mnt, "meta.json.tmp"), filepath.Join(mnt, "meta.json")
	fh, err := os.Create(tmp)
	require.NoError(t, err)
	_, err = fh.Write([]byte(`{"v":1}`))
	require.NoError(t, err)
	require.NoError(t, fh.Sync())
	require.NoError(t, fh.Close())
	require.NoError(t, os.Rename(tmp, final))
	_, err = f.PowerCut()
	require.NoError(t, err)
	got, err := os.ReadFile(final)
	require.NoError(t, err)
	assert.Equal(t, `{"v":1}`, string(got))

	require.NoError(t, os.WriteFile(filepath.Join(mnt, "kept"), []byte("unsynced"), 0o644))
	require.NoError(t, f.Unmount())
	got, err = os.ReadFile(filepath.Join(backing, "kept"))
	require.NoError(t, err)
	assert.Equal(t, "unsynced", string(got))
}
