// Package benchproc holds what the measuring programs under test/bench
// (the peer benchmark, scale, consumers) share to run Gantry as processes
// of their own: building the binary, free loopback ports, children that
// die with the program.
package benchproc

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildGantry builds the gantry binary of this repository into dir and
// returns its path. It finds the repository from the test/bench module
// (go env GOMOD), so it works from any directory of that module.
func BuildGantry(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("build gantry: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if filepath.Base(filepath.Dir(mod)) != "bench" {
		return "", fmt.Errorf("build gantry: run from the test/bench module (go.mod here: %q)", mod)
	}
	bin := filepath.Join(dir, "gantry")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/gantry")
	cmd.Dir = filepath.Join(filepath.Dir(mod), "..", "..") // the main module: its go.sum, not this one's
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build gantry: %w\n%s", err, out)
	}
	return bin, nil
}

// FreeAddrs returns n distinct loopback addresses whose ports were free a
// moment ago (all held open until the last is found).
func FreeAddrs(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}
