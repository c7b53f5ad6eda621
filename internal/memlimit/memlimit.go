// Package memlimit sizes the Go runtime's soft memory limit
// (debug.SetMemoryLimit) for a server process from the machine: a fraction
// of the memory the process may use, the cgroup's limit when one is set,
// else the physical memory. A limit below what the process really needs
// makes the collector run without pause (docs/decisions/0005-memory-limit-sized-from-machine.md),
// so the default is a backstop against an OOM kill, not a throttle.
package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// Fraction is the share of the machine's memory the default limit is:
// half leaves the other half to the page cache the broker's mapped
// commit log and queues live in, and to memory outside the Go heap.
const Fraction = 0.5

// Off as a setting turns the limit off.
const Off int64 = -1

// Machine returns the memory this process may use and where that figure
// comes from: the cgroup (v2 memory.max, else v1 memory.limit_in_bytes)
// when it sets a limit below the physical memory, else MemTotal of
// /proc/meminfo. fsys is the root filesystem (os.DirFS("/")).
func Machine(fsys fs.FS) (int64, string, error) {
	total, err := memTotal(fsys)
	if err != nil {
		return 0, "", err
	}
	for _, p := range []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			break
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil && n > 0 && n < total {
			return n, "cgroup limit", nil
		}
		break // v1 reports "no limit" as a huge number
	}
	return total, "physical memory", nil
}

func memTotal(fsys fs.FS) (int64, error) {
	b, err := fs.ReadFile(fsys, "proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("memlimit: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil || kb <= 0 {
			return 0, fmt.Errorf("memlimit: /proc/meminfo: MemTotal %q", v)
		}
		return kb << 10, nil
	}
	return 0, errors.New("memlimit: /proc/meminfo has no MemTotal")
}

// Default returns Fraction of Machine, and a note of how it was sized.
func Default(fsys fs.FS) (int64, string, error) {
	m, src, err := Machine(fsys)
	if err != nil {
		return 0, "", err
	}
	return int64(float64(m) * Fraction), fmt.Sprintf("%.0f%% of %s (%s)", Fraction*100, src, Format(m)), nil
}

// Parse reads a limit written as bytes or with a unit, as GOMEMLIMIT is
// (B, KiB, MiB, GiB, TiB; also k, m, g, t for those), or "off" (Off).
// "0" means the default (sized from the machine).
func Parse(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "off") {
		return Off, nil
	}
	num := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit := strings.TrimSpace(s[len(num):])
	shift := map[string]uint{"": 0, "B": 0, "KiB": 10, "k": 10, "K": 10, "MiB": 20, "m": 20, "M": 20,
		"GiB": 30, "g": 30, "G": 30, "TiB": 40, "t": 40, "T": 40}
	sh, ok := shift[unit]
	n, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || n < 0 || n > (1<<62)>>sh {
		return 0, fmt.Errorf("memory limit %q: want bytes, a size like 2GiB or 512MiB, 0 (sized from the machine) or off", s)
	}
	return n << sh, nil
}

// Format prints n bytes in the largest binary unit that divides it to one
// decimal.
func Format(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d B", n)
}
