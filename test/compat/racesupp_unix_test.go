//go:build unix

package compat

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// withRaceSuppressions re-executes the test binary, built with -race,
// with GORACE naming race.supp (the official client's own data races)
// unless GORACE already names a suppressions file. The race runtime
// reads GORACE when the process starts, so setting it here would be too
// late. It returns when there is nothing to do or the file is missing
// (then the official client's races fail the tests that provoke them).
func withRaceSuppressions() {
	gorace := os.Getenv("GORACE")
	if strings.Contains(gorace, "suppressions=") {
		return
	}
	supp, err := filepath.Abs("race.supp") // go test runs the binary in the package directory
	if err == nil {
		_, err = os.Stat(supp)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "compat: no race suppressions (%v): the official client's data races will be reported\n", err)
		return
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "compat: cannot re-run with race suppressions: %v\n", err)
		return
	}
	env := []string{"GORACE=" + strings.TrimSpace(gorace+" suppressions="+supp)}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	err = syscall.Exec(exe, os.Args, env) // returns only on failure
	fmt.Fprintf(os.Stderr, "compat: cannot re-run with race suppressions: %v\n", err)
}
