package benchkit

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSSAnon returns a process's resident anonymous memory in bytes (RssAnon
// in /proc/PID/status: the heap, stacks and other private memory, not the
// mapped commit-log pages, which are file-backed).
func RSSAnon(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "RssAnon:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("RssAnon of %d: %w", pid, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/%d/status has no RssAnon", pid)
}
