package reliability

import (
	"testing"
	"time"

	"github.com/gantrymq/gantry/test/reliability/checker"
	"github.com/gantrymq/gantry/test/reliability/workload"
)

// Crash during produce, SYNC_FLUSH (RELIABILITY.md §4): the broker is
// killed with SIGKILL and restarted on the same store, again and again,
// while two producers send; now and then a producer is killed too and
// replaced. Pass: lost = 0, unexpected = 0, no duplicates, no reorder,
// dense offsets, a clean offline verify, and every restart serving within
// seconds.
func TestCrashSyncFlushSIGKILL(t *testing.T) {
	e := NewEnv(t, "sync-flush-sigkill")
	e.Spec.Flush = "SYNC_FLUSH"
	runKillLoop(t, e, Pick(5, 50))
}

// Async flush, SIGKILL only: the page cache survives a process crash, so
// even ASYNC_FLUSH loses nothing (lost = 0).
func TestCrashAsyncFlushSIGKILL(t *testing.T) {
	e := NewEnv(t, "async-flush-sigkill")
	e.Spec.Flush = "ASYNC_FLUSH"
	runKillLoop(t, e, Pick(4, 50))
}

// runKillLoop kills the broker cycles times under load and checks.
func runKillLoop(t *testing.T, e *Env, cycles int) {
	loop := faultLoop{cycles: cycles, maxGap: 900 * time.Millisecond, opts: checker.Options{MinAcked: 200}}
	loop.fault = func(ps []*Proc, producer func(string) *Proc) {
		e.KillBroker()
		if e.Rand.IntN(4) == 0 { // a producer dies too, in the middle of its sends
			i := e.Rand.IntN(len(ps))
			e.Fault("SIGKILL producer " + ps[i].Name)
			ps[i].Kill()
			ps[i] = producer([]string{"p0", "p1"}[i])
		}
	}
	e.Report(loop.run(e))
}

// faultLoop is a run of two producers (8 sends in flight each) against a
// topic of 8 queues, in which fault stops the broker (and may replace
// producers) after 300 ms..maxGap, cycles times, each time followed by a
// restart on the same store; then the drain, the check with opts, the
// offline verify, and a failure if a restart took over 10 s to serve.
type faultLoop struct {
	cycles int
	maxGap time.Duration
	fault  func(ps []*Proc, producer func(name string) *Proc)
	opts   checker.Options
}

func (l faultLoop) run(e *Env) *checker.Result {
	e.StartNameServer()
	e.StartBroker()
	e.CreateTopic(8)
	e.WaitTopicSaved()
	producer := func(name string) *Proc {
		return e.Producer(name, func(s *workload.ProducerSpec) { s.Concurrency = 8 })
	}
	ps := []*Proc{producer("p0"), producer("p1")}
	var maxStartup time.Duration
	for range l.cycles {
		e.Sleep(300*time.Millisecond, l.maxGap)
		l.fault(ps, producer)
		e.Sleep(0, 200*time.Millisecond)
		maxStartup = max(maxStartup, e.StartBroker())
	}
	e.Sleep(500*time.Millisecond, time.Second)
	e.StopWorkers(ps...)
	r := e.DrainAndCheck(l.opts)
	e.StopBroker()
	e.Verify(r)
	if maxStartup > 10*time.Second {
		r.Fail("a restart took %s to serve", maxStartup)
	}
	return r
}

// A topic created through the Admin API (or by the first send, with
// autoCreateTopicEnable), messages acknowledged in it under SYNC_FLUSH,
// then SIGKILL: after the restart the topic and its messages must still
// be there. The broker once kept a new topic in memory until its next
// metadata save (flushConsumerOffsetInterval, 5 s), so a crash inside that
// window lost the topic and made every acknowledged message in it
// unreadable (docs/RELIABILITY.md, "Defects found"); it now saves the
// topic table before it answers.
func TestTopicSurvivesSIGKILL(t *testing.T) {
	for _, auto := range []bool{false, true} {
		name := map[bool]string{false: "admin", true: "auto-create"}[auto]
		t.Run(name, func(t *testing.T) {
			e := NewEnv(t, "topic-"+name+"-sigkill")
			e.Spec.OffsetInterval = 0 // the broker's default, 5 s
			e.Spec.AutoCreate = auto
			e.StartNameServer()
			e.StartBroker()
			if !auto {
				e.CreateTopic(4)
			}
			p := e.Producer("p0", func(s *workload.ProducerSpec) { s.Count = 40; s.Concurrency = 4 })
			if err := p.Wait(time.Minute); err != nil {
				t.Fatalf("producer: %v", err)
			}
			e.KillBroker()
			e.StartBroker()
			r := e.DrainAndCheck(checker.Options{MinAcked: 40})
			e.StopBroker()
			e.Report(r)
		})
	}
}
