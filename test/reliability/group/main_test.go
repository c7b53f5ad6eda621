// Package group holds the reliability suite's replication families
// (docs/RELIABILITY.md): a broker group of three controller-mode brokers,
// three controllers and a nameserver, each a process, under faults. It is
// a package of its own so that go test ./... runs it beside the rest of
// the suite, whose families are CPU-bound while these mostly wait on
// timers.
package group

import (
	"fmt"
	"os"
	"testing"

	"github.com/gantrymq/gantry/test/reliability"
)

func TestMain(m *testing.M) {
	if code, ok := reliability.RunChild(); ok {
		os.Exit(code)
	}
	code := m.Run()
	fmt.Println(reliability.Summary())
	os.Exit(code)
}
