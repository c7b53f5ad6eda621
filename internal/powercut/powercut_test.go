//go:build linux

package powercut

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
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

// mappedChildEnv names the file TestMain writes through a mapping when
// the test binary runs as TestPowerCutMapped's child.
const mappedChildEnv = "POWERCUT_TEST_MAPPED"

const mappedSize = 64 << 10

func TestMain(m *testing.M) {
	if name := os.Getenv(mappedChildEnv); name != "" {
		if err := writeMapped(name); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writeMapped writes a preallocated file through a shared mapping, as the
// commit log does: 16 KiB of 's' synced by msync, then 24 KiB of 'u' and
// an overwrite of the first 100 bytes with 'v', never synced.
func writeMapped(name string) error {
	fh, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer fh.Close()
	if err := unix.Fallocate(int(fh.Fd()), 0, 0, mappedSize); err != nil {
		return err
	}
	m, err := unix.Mmap(int(fh.Fd()), 0, mappedSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	defer unix.Munmap(m)
	copy(m[:16<<10], fill('s', 16<<10))
	if err := unix.Msync(m[:16<<10], unix.MS_SYNC); err != nil {
		return err
	}
	copy(m[16<<10:40<<10], fill('u', 24<<10))
	copy(m[:100], fill('v', 100))
	return nil
}

// Written through a shared mapping by another process (a process must not
// fault on mappings of a FUSE file system it serves itself: a thread
// blocked in the fault cannot stop for the garbage collector): msync of a
// range makes it durable, the rest reverts to its synced content.
func TestPowerCutMapped(t *testing.T) {
	f, backing, mnt := mount(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mappedChildEnv+"="+filepath.Join(mnt, "segment"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child: %s", out)

	s, err := f.PowerCut()
	require.NoError(t, err)
	assert.Equal(t, 1, s.Files)
	assert.Positive(t, s.PagesLost)

	got, err := os.ReadFile(filepath.Join(backing, "segment"))
	require.NoError(t, err)
	require.Len(t, got, mappedSize)
	assert.Equal(t, fill('s', 16<<10), got[:16<<10])
	assert.Equal(t, make([]byte, mappedSize-16<<10), got[16<<10:])
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
