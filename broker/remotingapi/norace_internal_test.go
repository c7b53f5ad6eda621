//go:build !race

package remotingapi

const raceEnabled = false
