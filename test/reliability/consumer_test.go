package reliability

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/test/reliability/checker"
	"github.com/gantrymq/gantry/test/reliability/history"
	"github.com/gantrymq/gantry/test/reliability/workload"
)

// Consumer killed mid-batch (RELIABILITY.md §4): a push consumer that
// records each message as it handles it (and syncs before returning the
// batch) is killed with SIGKILL, again and again, while a producer sends;
// right after each kill the group's committed offsets are read. A last
// consumer then runs until every acknowledged message was handled. Pass:
// every acknowledged message handled at least once (unhandled = 0), no
// committed offset past a message not handled by then (commitAhead = 0),
// and the usual lost = unexpected = duplicated = reordered = gaps = 0.
func TestConsumerKilledMidBatch(t *testing.T) {
	const group = "reliability-consumers"
	e := NewEnv(t, "consumer-kill")
	e.Spec.Flush = "ASYNC_FLUSH"
	e.StartNameServer()
	e.StartBroker()
	e.CreateTopic(4)
	count := Pick(3000, 30000)
	prod := e.Producer("p0", func(s *workload.ProducerSpec) { s.Count = count; s.Rate = Pick(1500, 3000) })
	consumer := func() *Proc {
		return e.Consumer("c", group, func(s *workload.ConsumerSpec) {
			s.BatchSize, s.HandleDelay, s.CommitInterval = 8, 2*time.Millisecond, 100*time.Millisecond
		})
	}
	kills, midBatch := Pick(3, 25), 0
	for range kills {
		c := consumer()
		e.Sleep(700*time.Millisecond, 1500*time.Millisecond)
		e.Fault("SIGKILL consumer " + c.Name)
		c.Kill()
		e.Committed(group)
		if lastBatchPartial(e.WorkerEvents(c.Name), c.Name, 8) {
			midBatch++
		}
	}
	require.NoError(t, prod.Wait(3*time.Minute), "producer")
	last := consumer()
	e.WaitHandled(3*time.Minute, time.Second, "the last consumer did not handle every acknowledged message")
	e.StopWorkers(last)
	e.Committed(group)
	r := e.DrainAndCheck(checker.Options{ExpectHandled: true, MinAcked: count / 2})
	r.Add("consumerKills", kills)
	r.Add("midBatchKills", midBatch)
	e.StopBroker()
	e.Report(r)
}

// lastBatchPartial reports whether worker's last handler call recorded
// fewer than batch messages: it was killed in the middle of it (or the
// batch was short).
func lastBatchPartial(evs []history.Event, worker string, batch int) bool {
	var last int64
	n := 0
	for _, e := range evs {
		if e.Kind != history.Recv || e.Worker != worker {
			continue
		}
		if e.Batch != last {
			last, n = e.Batch, 0
		}
		n++
	}
	return last > 0 && n < batch
}

// countAfter counts the events of kind (and outcome, for sends) after t.
func countAfter(evs []history.Event, kind history.Kind, outcome history.Outcome, t int64) int {
	n := 0
	for _, e := range evs {
		if e.Kind == kind && (outcome == "" || e.Outcome == outcome) && e.Time > t {
			n++
		}
	}
	return n
}
