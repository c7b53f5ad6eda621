package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is the build's version when set with
// -ldflags "-X main.version=v1.2.3"; else --version shows the module's.
var version = ""

// versionText is what --version prints after "gantry version ": the
// version (main.version, else the module version the binary was built as:
// a tag, a pseudo-version, or "(devel)" for a build in a checkout), the
// VCS commit it was built from (stamped by go build in a git checkout, or
// the one a pseudo-version names), "modified" when the checkout had
// uncommitted changes, and the Go version.
// bi is nil when the binary carries no build information.
func versionText(ldVersion string, bi *debug.BuildInfo) string {
	v, commit, modified, goVersion := ldVersion, "unknown", false, "unknown"
	if bi != nil {
		if v == "" {
			v = bi.Main.Version
		}
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if rev := pseudoVersionRev(v); commit == "unknown" && rev != "" {
		commit = rev
	}
	if modified {
		commit += ", modified"
	}
	return fmt.Sprintf("%s (commit %s; %s)", v, commit, goVersion)
}

// newRootCmd builds the gantry command tree. Each subcommand lives in its
// own file (verify.go, ...).
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "gantry",
		Short: "Gantry message broker",
		Long: `Gantry is a RocketMQ-style message broker: one binary with a subcommand per
role or tool.`,
		Version:       versionText(version, readBuildInfo()),
		SilenceErrors: true, // run prints errors once
		SilenceUsage:  true, // run points at --help instead
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newDevCmd(), newNamesrvCmd(), newControllerCmd(), newBrokerCmd(), newAdminCmd(), newBenchCmd(), newVerifyCmd())
	return root
}

// readBuildInfo is debug.ReadBuildInfo's information, nil without it.
func readBuildInfo() *debug.BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return bi
}

// pseudoVersionRev returns the commit a Go pseudo-version names
// (v0.0.0-20261206120000-0123456789ab: its last part, after a 14-digit
// time), or "".
func pseudoVersionRev(v string) string {
	v, _, _ = strings.Cut(v, "+") // +incompatible
	i := strings.LastIndexByte(v, '-')
	if i < 0 || len(v)-i-1 != 12 || i < 14 {
		return ""
	}
	rev, stamp := v[i+1:], v[i-14:i]
	if strings.Trim(rev, "0123456789abcdef") != "" || strings.Trim(stamp, "0123456789") != "" {
		return ""
	}
	return rev
}
