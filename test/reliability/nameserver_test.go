package reliability

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/test/reliability/checker"
	"github.com/gantrymq/gantry/test/reliability/history"
	"github.com/gantrymq/gantry/test/reliability/workload"
)

// Nameserver loss (RELIABILITY.md §4): the only nameserver is killed with
// SIGKILL while a producer and a consumer run; they must keep producing
// and consuming from their cached routes. In the long tier the broker is
// also killed and restarted during the outage (clients find it again at
// its cached address). The nameserver then comes back on its address and
// the run ends with the usual verdict, every acknowledged message handled.
func TestNameServerLoss(t *testing.T) {
	const group = "reliability-ns"
	e := NewEnv(t, "nameserver-loss")
	e.Spec.Flush = "ASYNC_FLUSH"
	e.Spec.RegisterPeriod = time.Second // the restarted nameserver learns the broker again quickly
	e.StartNameServer()
	e.StartBroker()
	e.CreateTopic(4)
	e.WaitTopicSaved()
	prod := e.Producer("p0", func(s *workload.ProducerSpec) { s.Rate = 1000 })
	cons := e.Consumer("c0", group, nil)
	e.Sleep(time.Second, 1500*time.Millisecond)

	e.KillNameServer()
	killed := history.Now()
	outage := Pick(3*time.Second, 30*time.Second)
	if Long() {
		time.Sleep(outage / 2)
		e.KillBroker()
		e.StartBroker() // no nameserver to register with: clients use the cached address
		time.Sleep(outage / 2)
	} else {
		time.Sleep(outage)
	}
	evs := e.Events()
	ackedDuring := countAfter(evs, history.Send, history.OK, killed)
	handledDuring := countAfter(evs, history.Recv, "", killed)

	e.StartNameServer()
	require.True(t, e.waitRegistered(), "the broker did not register with the restarted nameserver")
	e.StopWorkers(prod)
	e.WaitHandled(3*time.Minute, time.Second, "the consumer did not handle every acknowledged message")
	e.StopWorkers(cons)
	r := e.DrainAndCheck(checker.Options{ExpectHandled: true, MinAcked: 200})
	r.Add("outage", outage)
	r.Add("ackedDuringOutage", ackedDuring)
	r.Add("handledDuringOutage", handledDuring)
	if ackedDuring == 0 || handledDuring == 0 {
		r.Fail("clients stopped working without the nameserver: %d acknowledged, %d handled during the outage", ackedDuring, handledDuring)
	}
	e.StopBroker()
	e.Report(r)
}
