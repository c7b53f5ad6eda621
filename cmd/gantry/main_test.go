package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// execute runs the command line in-process.
func execute(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestNoArgsPrintsHelp(t *testing.T) {
	code, out, _ := execute(t)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "Usage:")
	assert.Contains(t, out, "verify")
}

func TestVersion(t *testing.T) {
	code, out, _ := execute(t, "--version")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "gantry version "+version)
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"nosuchcommand"},
		{"verify"},
		{"verify", "a", "b"},
		{"verify", "--nosuchflag", "dir"},
		{"verify", "--max-errors", "-2", "dir"},
	} {
		code, _, errOut := execute(t, args...)
		assert.Equal(t, exitUsage, code, "%q", args)
		assert.Contains(t, errOut, "gantry: ", "%q", args)
	}
}
