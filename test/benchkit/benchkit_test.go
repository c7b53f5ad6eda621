package benchkit

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The verifier counts every run's distinct, missing and duplicated
// messages when bodies arrive from many goroutines in any order.
func TestVerifierConcurrent(t *testing.T) {
	const total = 10_000
	run, other := NewRunID(), NewRunID()
	var v Verifier
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for seq := int64(g); seq < total; seq += 8 {
				if seq%1000 == 7 {
					continue // lost
				}
				v.Add(Body(run, seq, total, 64))
				if seq%500 == 3 {
					v.Add(Body(run, seq, total, 64)) // a duplicate
				}
			}
		})
	}
	wg.Go(func() {
		for seq := range int64(100) {
			v.Add(Body(other, seq, 0, 64)) // a run bounded by time
		}
		v.Add([]byte("not a bench body"))
	})
	wg.Wait()
	lines, ok := v.Report()
	assert.False(t, ok, "messages were lost")
	assert.ElementsMatch(t, []string{
		fmt.Sprintf("run %s: %d/%d received, 10 LOST, 20 duplicates", run, total-10, total),
		fmt.Sprintf("run %s: 100 distinct messages, 0 duplicates (run bounded by time: no expected count)", other),
		"1 messages not written by gantry bench",
	}, lines)
	require.Equal(t, int64(total-10+100), v.Received())
}

// ProcCPU reads a process's CPU time, and CPUMeter reports what was spent
// between Start and Stop.
func TestCPUMeter(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	m := StartCPU(os.Getpid()) // this process as the "server" too
	sum := 0
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
		sum++ // spin: user time
	}
	line := m.Stop(1000)
	assert.NotZero(t, sum)
	assert.Greater(t, m.Client, 0.05, line)
	assert.InDelta(t, m.Client, m.Server, 0.05, line)
	assert.Regexp(t, `^cpu: client \d+\.\d\d s, server \d+\.\d\d s; \d+\.\d\d µs a message in all$`, line)

	_, err := ProcCPU(-1)
	assert.Error(t, err)
	assert.Regexp(t, `^cpu: not measured: `, StartCPU(1<<30).Stop(1), "a server that cannot be read")
}
