package testutil

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// VMFlags returns the VmFlags of the mapping that starts at b[0] in
// /proc/self/smaps ("hg": madvise HUGEPAGE, "nh": NOHUGEPAGE, "rr":
// RANDOM), or skips the test where the kernel does not show them or has
// no transparent huge pages.
func VMFlags(tb testing.TB, b []byte) []string {
	tb.Helper()
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err != nil {
		tb.Skip("kernel without transparent huge pages")
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		tb.Skipf("no /proc/self/smaps: %v", err)
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
	tb.Skipf("no VmFlags for the mapping at %s in /proc/self/smaps", start)
	return nil
}
