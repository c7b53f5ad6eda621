// Package testutil holds the test helpers more than one package uses.
package testutil

import (
	"os"
	"strconv"
	"testing"
)

// BenchDir returns an empty directory for a benchmark to write to: a new
// one under GANTRY_BENCH_DIR when that is set (to measure another disk),
// else tb.TempDir(). Either is removed when the benchmark ends.
func BenchDir(tb testing.TB) string {
	root := os.Getenv("GANTRY_BENCH_DIR")
	if root == "" {
		return tb.TempDir()
	}
	dir, err := os.MkdirTemp(root, "bench")
	if err != nil {
		tb.Fatalf("GANTRY_BENCH_DIR: %v", err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// EnvInt returns the integer in the environment variable name, or def when
// it is unset (how the long test tiers are chosen). A value that is not an
// integer fails the test.
func EnvInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		tb.Fatalf("%s=%q: not an integer", name, v)
	}
	return n
}
