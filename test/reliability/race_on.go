//go:build race

package reliability

// raceEnabled: this binary was built with -race.
const raceEnabled = true
