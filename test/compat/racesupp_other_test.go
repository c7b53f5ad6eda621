//go:build !unix

package compat

// withRaceSuppressions does nothing here: set GORACE=suppressions=<path
// of race.supp> by hand (see racesupp_unix_test.go).
func withRaceSuppressions() {}
