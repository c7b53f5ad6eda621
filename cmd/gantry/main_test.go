package main

import (
	"bytes"
	"runtime/debug"
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

// --version prints the module version and the commit of the build, in
// a real process too.
func TestVersion(t *testing.T) {
	code, out, _ := execute(t, "--version")
	assert.Equal(t, exitOK, code)
	assert.Equal(t, "gantry version "+versionText(version, readBuildInfo())+"\n", out)
	code, out, _ = gantryRun(t, "--version")
	assert.Equal(t, exitOK, code)
	assert.Regexp(t, `^gantry version \S+ \(commit \S+; go1\.\d+`, out)

	mod := func(v string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/gantrymq/gantry", Version: v}}
		for i := 0; i < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	for _, tt := range []struct {
		name, ld string
		bi       *debug.BuildInfo
		want     string
	}{
		{"a checkout", "", mod("(devel)", "vcs.revision", "4f1c2d3e4f1c2d3e4f1c2d3e4f1c2d3e4f1c2d3e", "vcs.modified", "true"),
			"(devel) (commit 4f1c2d3e4f1c2d3e4f1c2d3e4f1c2d3e4f1c2d3e, modified; go1.26.8)"},
		{"go install of a tag", "", mod("v1.4.0"), "v1.4.0 (commit unknown; go1.26.8)"},
		{"go install of a commit", "", mod("v0.0.0-20261206120000-0123456789ab"),
			"v0.0.0-20261206120000-0123456789ab (commit 0123456789ab; go1.26.8)"},
		{"a pre-release pseudo-version", "", mod("v1.5.0-rc.1.0.20261206120000-0123456789ab+incompatible"),
			"v1.5.0-rc.1.0.20261206120000-0123456789ab+incompatible (commit 0123456789ab; go1.26.8)"},
		{"-ldflags -X main.version", "v2.0.0", mod("(devel)", "vcs.revision", "abc", "vcs.modified", "false"), "v2.0.0 (commit abc; go1.26.8)"},
		{"no build information", "", nil, "(devel) (commit unknown; unknown)"},
	} {
		assert.Equal(t, tt.want, versionText(tt.ld, tt.bi), tt.name)
	}
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
