//go:build race

package remotingapi

const raceEnabled = true
