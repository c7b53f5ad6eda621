package controller

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine raft, its stores and transports start ends once the
// controllers of a test are closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
