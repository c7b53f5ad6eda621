package reliability

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/faultproxy"
	"github.com/gantrymq/gantry/test/reliability/checker"
	"github.com/gantrymq/gantry/test/reliability/workload"
)

// Dropped responses, partitions and a stalled broker (RELIABILITY.md §4):
// the workers reach the broker through a fault proxy that, in turn, holds
// the broker's answers (the requests still arrive and are stored), holds
// both directions, resets and drops the connections and adds latency; then
// the broker process is stopped with SIGSTOP (to its clients, a stalled
// disk and a stalled process look the same) and continued. Sends time out
// during the faults. Pass: every timeout is answered as indeterminate, so
// none of the definite failures is read back (unexpected = 0), nothing
// acknowledged is lost, and the consumer, behind the same proxy, handles
// every acknowledged message.
func TestNetworkFaults(t *testing.T) {
	const group = "reliability-net"
	e := NewEnv(t, "network-faults")
	e.Spec.Flush = "SYNC_FLUSH"
	e.StartNameServer()
	e.StartBroker()
	e.CreateTopic(4)
	e.WaitTopicSaved()
	proxy, err := faultproxy.Start(faultproxy.Config{Target: e.Ready.GRPC})
	require.NoError(t, err)
	defer proxy.Close()
	e.Dial = map[string]string{e.Ready.GRPC: proxy.Addr()}
	prod := e.Producer("p0", func(s *workload.ProducerSpec) {
		s.SendTimeout, s.CallTimeout, s.Rate = time.Second, 3*time.Second, 1000
	})
	cons := e.Consumer("c0", group, nil)

	phases := []struct {
		fault faultproxy.Fault
		stop  bool // SIGSTOP the broker instead
		hold  time.Duration
	}{ // each longer than the 1 s send timeout, but the short ones
		{fault: faultproxy.Fault{Mode: faultproxy.DropResponses}, hold: 1500 * time.Millisecond},
		{fault: faultproxy.Fault{Mode: faultproxy.Blackhole}, hold: 1500 * time.Millisecond},
		{fault: faultproxy.Fault{Mode: faultproxy.Reset}, hold: 200 * time.Millisecond},
		{fault: faultproxy.Fault{Latency: 300 * time.Millisecond}, hold: time.Second},
		{fault: faultproxy.Fault{Mode: faultproxy.Drop}, hold: 500 * time.Millisecond},
		{fault: faultproxy.Fault{Mode: faultproxy.DropRequests}, hold: 1200 * time.Millisecond},
		{stop: true, hold: 1500 * time.Millisecond},
	}
	rounds := Pick(1, 8)
	for round := range rounds {
		for i, ph := range phases {
			if round > 0 { // later rounds: random lengths
				ph.hold = ph.hold/2 + time.Duration(e.Rand.Int64N(int64(ph.hold)))
			}
			e.Sleep(500*time.Millisecond, time.Second) // healthy in between
			if ph.stop {
				e.Fault(fmt.Sprintf("SIGSTOP broker for %s", ph.hold))
				require.NoError(t, e.Broker.Signal(syscall.SIGSTOP))
				time.Sleep(ph.hold)
				require.NoError(t, e.Broker.Signal(syscall.SIGCONT))
				continue
			}
			e.Fault(fmt.Sprintf("proxy %s for %s (phase %d)", ph.fault, ph.hold, i))
			proxy.Set(ph.fault)
			time.Sleep(ph.hold)
			proxy.Set(faultproxy.Fault{})
		}
	}
	e.Sleep(500*time.Millisecond, time.Second)
	e.StopWorkers(prod)
	e.WaitHandled(3*time.Minute, time.Second, "the consumer did not handle every acknowledged message")
	e.StopWorkers(cons)
	r := e.DrainAndCheck(checker.Options{ExpectHandled: true, MinAcked: 200})
	st := proxy.Stats()
	r.Add("proxyConns", st.Accepted)
	if r.Indeterminate+r.Pending == 0 {
		r.Fail("no send ended indeterminate: the faults did not bite")
	}
	e.StopBroker()
	e.Verify(r)
	e.Report(r)
}
