//go:build race

package embedded_test

const raceEnabled = true
