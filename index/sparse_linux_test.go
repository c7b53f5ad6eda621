package index

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gantrymq/gantry/internal/fsx"
)

// A store holding a few entries takes its header, slots and one chunk of
// entries of disk (about 20 MiB with the defaults), not the file's 420 MB.
func TestNewFileIsSparse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "index")
	s := putFew(t, dir)
	defer s.Close()
	disk, size := diskBytes(t, dir)
	cfg := Config{}.WithDefaults()
	assert.Equal(t, cfg.FileBytes(), size)
	want := roundUp(headerSize+int64(cfg.SlotCount)*slotSize+(fewEntries+1)*entrySize, reserveChunk)
	assert.GreaterOrEqual(t, disk, want, "the header, slots and first entries are reserved")
	assert.LessOrEqual(t, disk, want+1<<20, "and nothing more (but the filesystem's own blocks)")
	t.Logf("a default index file holding %d entries: %d bytes, %d on disk", fewEntries, size, disk)
}

// Files created before files were sparse, wholly preallocated, open and
// take entries as before.
func TestPreallocatedFileOpens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "index")
	cfg := testConfig(t, fsx.OS, dir, 1024, 300_000)
	s := openStore(t, cfg)
	keys := benchKeys(20)
	for i := range 1000 {
		require.NoError(t, s.Put(keys[i%len(keys)], int64(i), t0))
	}
	require.NoError(t, s.Close())
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, names, 1)
	path := filepath.Join(dir, names[0].Name())
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, unix.Fallocate(int(f.Fd()), 0, 0, cfg.FileBytes()))
	require.NoError(t, f.Close())
	full, _ := diskBytes(t, dir)
	require.GreaterOrEqual(t, full, cfg.FileBytes())

	s = openStore(t, cfg)
	defer s.Close()
	for i := 1000; i < 250_000; i++ { // past the first chunk
		require.NoError(t, s.Put(keys[i%len(keys)], int64(i), t0))
	}
	for i, k := range keys {
		got, err := s.Lookup(k, 0, math.MaxInt64, math.MaxInt32)
		require.NoError(t, err)
		assert.Equal(t, (250_000-i+len(keys)-1)/len(keys), len(got), "key %q", k)
	}
	disk, _ := diskBytes(t, dir)
	assert.Equal(t, full, disk, "nothing more, nothing less")
}

// Opening a store whose default-sized file holds a few entries touches a
// few pages of it, not its 20 MB slot table (as Open did when it cleared
// the slots through the mapping).
func TestOpenTouchesFewPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "index")
	require.NoError(t, putFew(t, dir).Close())
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	thread := func() int64 {
		var ru unix.Rusage
		require.NoError(t, unix.Getrusage(unix.RUSAGE_THREAD, &ru))
		return ru.Minflt
	}
	f0 := thread()
	s, err := Open(t.Context(), Config{Dir: dir})
	faults := thread() - f0
	require.NoError(t, err)
	defer s.Close()
	assert.Less(t, faults, int64(100), "page faults of Open")
	got, err := s.Lookup("TopicTest#key-3", 0, math.MaxInt64, 10)
	require.NoError(t, err)
	assert.Equal(t, []int64{600}, got)
}

// On a real full filesystem (a small tmpfs), Put fails with ENOSPC and
// the process lives: no write ever reaches a page the filesystem could
// not back (that would be SIGBUS, killing the test binary). Reads go on,
// a restart on the full disk works, and Put resumes once space is freed.
func TestFullTmpfs(t *testing.T) {
	mnt := mountTmpfs(t, 24<<20)
	dir := filepath.Join(mnt, "index")
	cfg := testConfig(t, fsx.OS, dir, 1024, 2_000_000) // a 40 MB file on 24 MiB
	s := openStore(t, cfg)
	keys := benchKeys(50)
	require.NoError(t, s.Put(keys[0], 0, t0))
	ballast := filepath.Join(mnt, "ballast")
	fillBut(t, ballast, 6<<20)

	n := 1
	var err error
	for ; n < 2_000_000; n++ {
		if err = s.Put(keys[n%len(keys)], int64(n), t0); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, syscall.ENOSPC)
	t.Logf("%d entries indexed before: %v", n, err)
	assert.Greater(t, n, chunkEntries, "the disk took more than the first chunk")
	check := func() {
		t.Helper()
		for i, k := range keys {
			got, err := s.Lookup(k, 0, math.MaxInt64, math.MaxInt32)
			require.NoError(t, err)
			require.Equal(t, (n-i+len(keys)-1)/len(keys), len(got), "key %q", k)
		}
	}
	check()
	require.NoError(t, s.Close())

	s = openStore(t, cfg) // on the full disk
	defer func() { s.Close() }()
	check()
	require.ErrorIs(t, s.Put(keys[n%len(keys)], int64(n), t0), syscall.ENOSPC)

	require.NoError(t, os.Remove(ballast))
	for end := n + 2*chunkEntries; n < end; n++ {
		require.NoError(t, s.Put(keys[n%len(keys)], int64(n), t0))
	}
	check()
}

// A crash may lose the reservation of a chunk while the header counting
// its entries reached the disk: Open reserves the chunks of the entries in
// use again before it writes into them (rebuild), skips the entries lost,
// and on a full disk fails with ENOSPC rather than write into the hole
// (SIGBUS).
func TestOpenReservesLostChunks(t *testing.T) {
	for _, full := range []bool{false, true} {
		t.Run(map[bool]string{false: "room", true: "full tmpfs"}[full], func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "index")
			if full {
				dir = filepath.Join(mountTmpfs(t, 24<<20), "index")
			}
			cfg := testConfig(t, fsx.OS, dir, spanSlots, spanEntries)
			s := openStore(t, cfg)
			keys := benchKeys(20)
			n := chunkEntries + 1000 // into the second chunk
			for i := range n {
				require.NoError(t, s.Put(keys[i%len(keys)], int64(i), t0))
			}
			require.NoError(t, s.Close())
			names, err := os.ReadDir(dir)
			require.NoError(t, err)
			path := filepath.Join(dir, names[0].Name())
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			require.NoError(t, err)
			require.NoError(t, unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, reserveChunk, reserveChunk))
			require.NoError(t, f.Close())
			before, _ := diskBytes(t, dir)
			require.Equal(t, int64(reserveChunk), before, "the second chunk is a hole")
			if full {
				fillBut(t, filepath.Join(filepath.Dir(dir), "ballast"), 0)
				_, err := Open(t.Context(), cfg)
				require.ErrorIs(t, err, syscall.ENOSPC)
				return
			}

			s = openStore(t, cfg)
			defer s.Close()
			after, _ := diskBytes(t, dir)
			assert.Equal(t, int64(2*reserveChunk), after, "the second chunk is reserved again")
			got, err := s.Lookup(keys[0], 0, math.MaxInt64, math.MaxInt32)
			require.NoError(t, err)
			assert.Equal(t, (chunkEntries+len(keys)-1)/len(keys), len(got), "the entries of the first chunk, not the lost ones")
			require.NoError(t, s.Put(keys[0], int64(n), t0))
		})
	}
}

// mountTmpfs mounts a tmpfs of size bytes for the test, or skips it.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillBut writes a file at path until the filesystem has about leave bytes
// free.
func fillBut(t *testing.T, path string, leave int64) {
	t.Helper()
	u, err := fsx.OS.DiskUsage(filepath.Dir(path))
	require.NoError(t, err)
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 1<<20)
	for left := u.Free - leave; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
			return
		}
	}
}
