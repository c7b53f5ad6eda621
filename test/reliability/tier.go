package reliability

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Environment variables of the suite.
const (
	// TierEnv selects the tier: "long" for the long tier, else short.
	TierEnv = "GANTRY_RELIABILITY"
	// SeedEnv replays a run: its random choices come from this seed.
	SeedEnv = "GANTRY_RELIABILITY_SEED"
	// DirEnv keeps each run's data and histories under this directory
	// instead of a temporary one.
	DirEnv = "GANTRY_RELIABILITY_DIR"
)

// Long reports whether the long tier runs.
func Long() bool { return os.Getenv(TierEnv) == "long" }

// Pick returns short in the short tier and long in the long tier.
func Pick[T any](short, long T) T {
	if Long() {
		return long
	}
	return short
}

// Seed returns the seed of a run: SeedEnv's value when set, else a new one.
func Seed(t testing.TB) uint64 {
	if v := os.Getenv(SeedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: not a seed", SeedEnv, v)
		}
		return s
	}
	return uint64(time.Now().UnixNano())
}

// verdicts counts the verdicts reported in this process.
var verdicts struct {
	sync.Mutex
	passed, failed int
}

func countVerdict(passed bool) {
	verdicts.Lock()
	defer verdicts.Unlock()
	if passed {
		verdicts.passed++
	} else {
		verdicts.failed++
	}
}

// Summary is the suite's last line: "reliability (short tier): N passed,
// N failed".
func Summary() string {
	verdicts.Lock()
	defer verdicts.Unlock()
	return fmt.Sprintf("reliability (%s tier): %d passed, %d failed", Pick("short", "long"), verdicts.passed, verdicts.failed)
}
