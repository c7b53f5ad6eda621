//go:build !failpoint

package failpoint

import "errors"

// Enabled is false: build with -tags failpoint to compile the points in.
const Enabled = false

// EnvVar names the environment variable read at start by failpoint builds.
const EnvVar = "GANTRY_FAILPOINTS"

// errNotBuilt is Enable's answer without the tag.
var errNotBuilt = errors.New("failpoint: not compiled in (build with -tags failpoint)")

// Inject does nothing without the failpoint tag (call sites are behind
// the Enabled constant, so it is not even called).
func Inject(string) error { return nil }

// Enable fails without the failpoint tag.
func Enable(_, _ string) error { return errNotBuilt }

// Disable does nothing without the failpoint tag.
func Disable(string) {}

// Hits is 0 without the failpoint tag.
func Hits(string) int64 { return 0 }
