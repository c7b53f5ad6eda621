package fsx_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/testutil"
)

// A mapping asks for huge pages only when told to; a mapping marked
// random access refuses them, as it reads nothing ahead and a fault would
// fill a 2 MiB folio.
func TestOSHugeAndRandom(t *testing.T) {
	const size = 4 << 20
	f := createFile(t, fsx.OS, filepath.Join(t.TempDir(), "seg"), nil)
	require.NoError(t, f.Allocate(0, size))
	mapping := func() fsx.Mapping {
		m, err := f.Map(size)
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Unmap() })
		return m
	}

	plain := mapping()
	assert.NotContains(t, testutil.VMFlags(t, plain.Bytes()), "hg", "no huge pages unless asked")

	huge := mapping()
	require.NoError(t, huge.Huge(0, size))
	assert.Contains(t, testutil.VMFlags(t, huge.Bytes()), "hg", "Huge: madvise HUGEPAGE")

	random := mapping()
	require.NoError(t, random.Random(0, size))
	flags := testutil.VMFlags(t, random.Bytes())
	assert.Contains(t, flags, "nh", "Random: madvise NOHUGEPAGE")
	assert.Contains(t, flags, "rr", "and RANDOM")
}

// The real filesystem's files make writes and syncs inline; what they
// write reads back, a large write is whole, and a failing call answers a
// PathError naming the file.
func TestOSInline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	f := createFile(t, fsx.OS, path, nil)
	in, ok := f.(fsx.InlineFile)
	require.True(t, ok, "an OS file is an InlineFile")

	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	n, err := in.WriteAtInline(big, 4096)
	require.NoError(t, err)
	assert.Equal(t, len(big), n)
	n, err = in.WriteAtInline([]byte("head"), 0)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	require.NoError(t, in.SyncInline())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, got, 4096+len(big))
	assert.Equal(t, "head", string(got[:4]))
	assert.Equal(t, big, got[4096:])

	ro, err := fsx.OS.OpenFile(path, os.O_RDONLY, 0)
	require.NoError(t, err)
	defer ro.Close()
	_, err = ro.(fsx.InlineFile).WriteAtInline([]byte("x"), 0)
	var pe *os.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "write", pe.Op)
	assert.Equal(t, path, pe.Path)
	assert.ErrorIs(t, err, syscall.EBADF)

	require.NoError(t, ro.Close())
	err = ro.(fsx.InlineFile).SyncInline()
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "fdatasync", pe.Op)
	assert.ErrorIs(t, err, syscall.EBADF, "a closed file")
}

// directFile returns a 64 KiB file of t's directory ready for direct I/O
// and a 16 KiB page-aligned buffer; it skips t where the file system does
// not take O_DIRECT.
func directFile(t *testing.T) (fsx.File, fsx.DirectWriter, []byte) {
	f := createFile(t, fsx.OS, filepath.Join(t.TempDir(), "seg"), nil)
	require.NoError(t, f.Allocate(0, 64<<10))
	d, ok := f.(fsx.DirectWriter)
	require.True(t, ok, "the OS file system's files write directly")
	if err := d.PrepareDirect(); errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("the test directory's file system does not take O_DIRECT: %v", err)
	} else {
		require.NoError(t, err)
	}
	buf, err := unix.Mmap(-1, 0, 16<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Munmap(buf) })
	return f, d, buf
}

// directOp is a direct read or write of b at off.
type directOp struct {
	name string
	b    []byte
	off  int64
}

// misaligned returns direct ops of buf's bytes that break each alignment
// rule in turn.
func misaligned(buf []byte) []directOp {
	return []directOp{
		{"offset", buf[:4096], 100},
		{"length", buf[:100], 0},
		{"address", buf[1 : 1+4096], 0},
	}
}

// A direct write needs its buffer, length and offset aligned (else
// ErrUnsupported, writing nothing); what it writes reads back through the
// page cache, with no stale page left there.
func TestOSWriteAtDirect(t *testing.T) {
	f, d, buf := directFile(t)
	stale := make([]byte, 8<<10)
	_, err := f.ReadAt(stale, 8<<10) // zeros, now in the page cache
	require.NoError(t, err)
	copy(buf, filled('d', len(buf)))
	n, err := d.WriteAtDirect(buf[:8<<10], 8<<10, false)
	require.NoError(t, err)
	assert.Equal(t, 8<<10, n)
	n, err = d.WriteAtDirect(buf[8<<10:], 16<<10, true)
	require.NoError(t, err)
	assert.Equal(t, 8<<10, n)
	require.NoError(t, f.Sync())
	got := make([]byte, 24<<10)
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	assert.Equal(t, append(make([]byte, 8<<10), filled('d', 16<<10)...), got)

	for _, tt := range misaligned(buf) {
		_, err := d.WriteAtDirect(tt.b, tt.off, false)
		assert.ErrorIs(t, err, errors.ErrUnsupported, tt.name)
	}
	require.NoError(t, f.Close())
	_, err = d.WriteAtDirect(buf[:4096], 0, false)
	assert.Error(t, err, "closed")
}

// A direct read needs the same alignment; it reads what was written
// through the page cache and not yet synced (the kernel writes those pages
// first) and reads short at the end of the file.
func TestOSReadAtDirect(t *testing.T) {
	f, d, buf := directFile(t)
	_, err := f.WriteAt(filled('p', 4096), 4096) // dirty in the page cache
	require.NoError(t, err)
	copy(buf, filled('d', 8<<10))
	_, err = d.WriteAtDirect(buf[:8<<10], 16<<10, false)
	require.NoError(t, err)

	n, err := d.ReadAtDirect(buf, 4096)
	require.NoError(t, err)
	assert.Equal(t, 16<<10, n)
	assert.Equal(t, append(append(filled('p', 4096), make([]byte, 8<<10)...), filled('d', 4096)...), buf[:n])

	n, err = d.ReadAtDirect(buf, 56<<10)
	require.NoError(t, err, "short at the end, without io.EOF")
	assert.Equal(t, 8<<10, n)

	for _, tt := range misaligned(buf) {
		_, err := d.ReadAtDirect(tt.b, tt.off)
		assert.ErrorIs(t, err, errors.ErrUnsupported, tt.name)
	}
}
