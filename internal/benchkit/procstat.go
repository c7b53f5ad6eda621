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

// ProcCPU returns the user and system CPU time a process has used so far
// (utime and stime in /proc/PID/stat), in seconds.
func ProcCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after it are plain.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks float64
	for _, v := range f[11:13] { // utime, stime: fields 14 and 15
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += float64(n)
	}
	return ticks / 100, nil // USER_HZ is 100 on Linux
}

// CPUMeter measures the CPU the benchmark process and a server process
// spend between Start and Stop.
type CPUMeter struct {
	server         int
	self0, srv0    float64
	err            error
	Client, Server float64 // seconds, after Stop
}

// StartCPU starts measuring; server is the server's pid (0: none).
func StartCPU(server int) *CPUMeter {
	m := &CPUMeter{server: server}
	m.self0, m.err = ProcCPU(os.Getpid())
	if server > 0 && m.err == nil {
		m.srv0, m.err = ProcCPU(server)
	}
	return m
}

// Stop ends the measurement and returns a line for the report.
func (m *CPUMeter) Stop(msgs int64) string {
	self, err := ProcCPU(os.Getpid())
	if m.err == nil {
		m.err = err
	}
	m.Client = self - m.self0
	if m.server > 0 && m.err == nil {
		srv, err := ProcCPU(m.server)
		m.Server, m.err = srv-m.srv0, err
	}
	if m.err != nil {
		return fmt.Sprintf("cpu: not measured: %v", m.err)
	}
	line := fmt.Sprintf("cpu: client %.2f s", m.Client)
	if m.server > 0 {
		line += fmt.Sprintf(", server %.2f s", m.Server)
	}
	if msgs > 0 {
		line += fmt.Sprintf("; %.2f µs a message in all", (m.Client+m.Server)/float64(msgs)*1e6)
	}
	return line
}
