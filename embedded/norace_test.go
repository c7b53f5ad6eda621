//go:build !race

package embedded_test

const raceEnabled = false
