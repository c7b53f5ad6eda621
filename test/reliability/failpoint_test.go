//go:build failpoint

package reliability

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/failpoint"
	"github.com/gantrymq/gantry/test/reliability/checker"
	"github.com/gantrymq/gantry/test/reliability/history"
	"github.com/gantrymq/gantry/test/reliability/workload"
)

// These tests need the failpoint build: go test -tags failpoint -run
// TestFailpoint ./test/reliability/ (docs/RELIABILITY.md).

// armed returns the broker environment arming one point.
func armed(point, term string) []string {
	return []string{fmt.Sprintf("%s=%s=%s", failpoint.EnvVar, point, term)}
}

// Crash during produce at each durable step (RELIABILITY.md §4): the
// broker runs with one failpoint armed to kill it (SIGKILL from inside) at
// a random evaluation of that step, is restarted armed again, and so on,
// while a producer sends under SYNC_FLUSH and a consumer commits offsets
// (so metadata is saved all the time). Pass: the usual verdict, with
// lost = 0 and every acknowledged message handled.
func TestFailpointKillAtDurableSteps(t *testing.T) {
	for _, p := range []struct {
		point string
		maxK  int // the kill comes at evaluation 1..maxK
	}{
		{"commitlog/append-before-copy", 300},
		{"commitlog/append-after-copy", 300},
		{"commitlog/flush-before-sync", 200},
		{"commitlog/flush-after-sync", 200},
		{"commitlog/checkpoint-write", 3},
		{"fsx/atomic-before-rename", 8},
		{"fsx/atomic-before-syncdir", 8},
	} {
		t.Run(strings.ReplaceAll(p.point, "/", "-"), func(t *testing.T) {
			const group = "reliability-fp"
			e := NewEnv(t, "failpoint-kill-"+strings.ReplaceAll(p.point, "/", "-"))
			e.Spec.OffsetInterval = 200 * time.Millisecond
			e.StartNameServer()
			e.StartBroker()
			e.CreateTopic(4)
			e.WaitTopicSaved()
			prod := e.Producer("p0", func(s *workload.ProducerSpec) { s.Rate = 1500 })
			cons := e.Consumer("c0", group, func(s *workload.ConsumerSpec) { s.CommitInterval = 100 * time.Millisecond })
			cycles, fired := Pick(3, 12), 0
			for range cycles {
				k := 1 + e.Rand.IntN(p.maxK)
				e.KillBroker()
				e.BrokerEnv = armed(p.point, fmt.Sprintf("1*kill@%d", k))
				if e.TryStartBroker() { // else it died while starting: a crash in recovery
					if err := e.Broker.Wait(15 * time.Second); err == nil || !e.Broker.KilledBySignal() {
						e.KillBroker() // never reached within the wait
						e.BrokerEnv = nil
						e.StartBroker()
						continue
					}
				}
				e.Fault(fmt.Sprintf("failpoint %s kill@%d", p.point, k))
				fired++
				e.BrokerEnv = nil
				e.StartBroker()
				e.Sleep(500*time.Millisecond, time.Second)
			}
			e.StopWorkers(prod)
			e.WaitHandled(3*time.Minute, time.Second, "the consumer did not handle every acknowledged message")
			e.StopWorkers(cons)
			r := e.DrainAndCheck(checker.Options{ExpectHandled: true, MinAcked: 100})
			r.Add("failpointKills", fired)
			if fired == 0 {
				r.Fail("the failpoint %s never fired", p.point)
			}
			e.StopBroker()
			e.Verify(r)
			e.Report(r)
		})
	}
}

// logTime finds the time of the first broker log line matching re.
func logTime(t *testing.T, path string, re *regexp.Regexp) (int64, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	timeRE := regexp.MustCompile(`time=(\S+)`)
	for _, line := range strings.Split(string(b), "\n") {
		if !re.MatchString(line) {
			continue
		}
		if m := timeRE.FindStringSubmatch(line); m != nil {
			if ts, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
				return ts.UnixNano(), true
			}
		}
	}
	return 0, false
}

// EIO on fsync (RELIABILITY.md §4, disk): an injected error at a flush
// makes the commit log fail-stop. Pass: nothing is acknowledged after the
// failure (the broker refuses writes, never retries the flush and then
// acks), the broker restarts on the same store and writes resume, and the
// usual verdict holds (nothing definitely refused is read back).
func TestFailpointFlushErrorFailStop(t *testing.T) {
	e := NewEnv(t, "failpoint-flush-eio")
	e.StartNameServer()
	e.StartBroker()
	e.CreateTopic(4)
	e.WaitTopicSaved()
	prod := e.Producer("p0", func(s *workload.ProducerSpec) { s.Rate = 1500 })
	k := 50 + e.Rand.IntN(200)
	e.KillBroker()
	e.BrokerEnv = armed("commitlog/flush-before-sync", fmt.Sprintf("1*error(EIO)@%d", k))
	e.StartBroker()
	failedRE := regexp.MustCompile(`flush failed; refusing further appends`)
	var failedAt int64
	require.Eventually(t, func() bool {
		var ok bool
		failedAt, ok = logTime(t, e.Broker.Log, failedRE)
		return ok
	}, time.Minute, 50*time.Millisecond, "the flush never failed")
	time.Sleep(time.Second) // writes are refused meanwhile
	refused := history.Now()
	e.KillBroker()
	e.BrokerEnv = nil
	e.StartBroker()
	e.Sleep(time.Second, 1500*time.Millisecond)
	e.StopWorkers(prod)
	r := e.DrainAndCheck(checker.Options{MinAcked: 100})
	const grace = int64(20 * time.Millisecond) // answers already on the wire
	late := 0
	for _, ev := range e.Events() {
		if ev.Kind == history.Send && ev.Outcome == history.OK && ev.Time > failedAt+grace && ev.Time < refused {
			late++
		}
	}
	r.Add("failedAtEvaluation", k)
	r.Add("ackedAfterFailure", late)
	if late > 0 {
		r.Fail("%d sends acknowledged after the flush failed", late)
	}
	e.StopBroker()
	e.Verify(r)
	e.Report(r)
}

// A stalled disk (RELIABILITY.md §4): flushes stall 1.5 s, three times,
// against a 500 ms syncFlushTimeout. Pass: the waiting sends are answered
// FLUSH_DISK_TIMEOUT, i.e. indeterminate (indeterminate > 0), nothing is
// lost, and what was answered definite is never read back.
func TestFailpointStalledFlush(t *testing.T) {
	e := NewEnv(t, "failpoint-stalled-flush")
	e.Spec.SyncFlushTimeout = 500 * time.Millisecond
	e.BrokerEnv = armed("commitlog/flush-before-sync", "3*sleep(1500ms)@100")
	e.StartNameServer()
	e.StartBroker()
	e.CreateTopic(4)
	e.WaitTopicSaved()
	prod := e.Producer("p0", func(s *workload.ProducerSpec) { s.Rate = 1500; s.SendTimeout = 3 * time.Second })
	time.Sleep(Pick(6*time.Second, 20*time.Second))
	e.StopWorkers(prod)
	r := e.DrainAndCheck(checker.Options{MinAcked: 100})
	if r.Indeterminate == 0 {
		r.Fail("no send was answered indeterminate while the flush stalled")
	}
	e.StopBroker()
	e.Verify(r)
	e.Report(r)
}
