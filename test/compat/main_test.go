package compat

import (
	"os"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func TestMain(m *testing.M) {
	if raceEnabled {
		withRaceSuppressions() // re-executes this binary, unless GORACE names suppressions already
	}
	// The official client logs every pull, rebalance and heartbeat at info
	// level (logrus, to stdout); errors still show.
	rlog.SetLogLevel("error")
	os.Exit(m.Run())
}
