package fsx_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

// vmFlags returns the VmFlags line of /proc/self/smaps for the mapping
// that starts at b, or skips the test when the kernel does not show them.
func vmFlags(t *testing.T, b []byte) []string {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&b[0])))
	found := false
	for line := range strings.SplitSeq(string(smaps), "\n") {
		if strings.HasPrefix(line, start) {
			found = true
		}
		if found && strings.HasPrefix(line, "VmFlags:") {
			return strings.Fields(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	t.Skipf("no VmFlags for the mapping at %s in /proc/self/smaps", start)
	return nil
}

func TestOSMapAsksForHugePages(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err != nil {
		t.Skip("kernel without transparent huge pages")
	}
	f := createFile(t, fsx.OS, filepath.Join(t.TempDir(), "seg"), nil)
	require.NoError(t, f.Allocate(0, 4<<20))

	m, err := f.Map(4 << 20)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Unmap() })
	assert.Contains(t, vmFlags(t, m.Bytes()), "hg", "a mapping asks for huge pages (MADV_HUGEPAGE)")

	// A mapping marked random access reads nothing ahead, so it must not
	// fill 2 MiB folios either.
	r, err := f.Map(4 << 20)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Unmap() })
	require.NoError(t, r.Random(0, 4<<20))
	flags := vmFlags(t, r.Bytes())
	assert.Contains(t, flags, "nh", "a random mapping refuses huge pages (MADV_NOHUGEPAGE)")
	assert.Contains(t, flags, "rr", "and reads nothing ahead (MADV_RANDOM)")
	assert.NotContains(t, flags, "hg")
}
