package reliability

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/benchkit"
	"github.com/gantrymq/gantry/test/reliability/checker"
	"github.com/gantrymq/gantry/test/reliability/workload"
)

// connsPerHolder caps one holder process's connections (each is a file
// descriptor in the holder and one in the broker).
const connsPerHolder = 4000

// Load: thousands of connections (RELIABILITY.md §4). Holder processes
// open N gRPC connections (one grpc.ClientConn each, one GetQueueOffsets
// call on each) and N/5 RocketMQ remoting connections (one producer
// HEART_BEAT each) to one broker and hold them, while a producer sends and
// a push consumer pulls through the usual client. Pass: every held
// connection still answers at the end (a gRPC one without having
// reconnected), the broker holds a descriptor per connection, the usual
// counts are 0 with every acknowledged message handled, and the broker's
// anonymous memory grows by less than 1 MiB per connection. The verdict
// reports the broker's RssAnon before and with the connections held, and
// the difference per connection.
func TestConnections(t *testing.T) {
	const group = "reliability-conns"
	grpcConns := Pick(300, 5000)
	remConns := grpcConns / 5
	total := grpcConns + remConns
	nofile, err := RaiseOpenFiles() // the broker and the holders inherit it
	require.NoError(t, err)
	if need := uint64(total + 1000); nofile < need {
		t.Skipf("skipped: the open-files limit is %d, the broker needs about %d for %d connections", nofile, need, total)
	}
	e := NewEnv(t, "connections")
	e.Spec.Flush = "ASYNC_FLUSH"
	e.StartNameServer()
	e.StartBroker()
	e.CreateTopic(4)
	cons := e.Consumer("c0", group, nil)
	warm := e.Producer("w0", func(s *workload.ProducerSpec) { s.Count = 400 })
	require.NoError(t, warm.Wait(time.Minute), "warm-up producer")
	time.Sleep(500 * time.Millisecond) // the consumer catches up; the heap settles

	pid := e.Broker.Pid()
	rssBefore, err := benchkit.RSSAnon(pid)
	require.NoError(t, err)
	fdsBefore, err := OpenFiles(pid)
	require.NoError(t, err)
	start := time.Now()
	var holders []*Proc
	for i, n := 0, 0; n < total; i++ {
		spec := HolderSpec{Name: fmt.Sprintf("h%d", i), GRPC: e.Ready.GRPC,
			Remoting: fmt.Sprintf("127.0.0.1:%d", e.Spec.ListenPort), Topic: e.Topic}
		spec.GRPCConns = min(connsPerHolder, grpcConns-min(grpcConns, n))
		spec.RemotingConns = min(connsPerHolder-spec.GRPCConns, total-n-spec.GRPCConns)
		n += spec.GRPCConns + spec.RemotingConns
		p, err := startProc(spec.Name, RoleConnHolder, spec, filepath.Join(e.Dir, spec.Name+".log"))
		require.NoError(t, err)
		e.track(p)
		holders = append(holders, p)
	}
	held := 0
	for _, p := range holders {
		var r HolderReady
		require.NoError(t, p.WaitReady(5*time.Minute, &r), "connection holder")
		held += r.GRPC + r.Remoting
	}
	connectTook := time.Since(start)
	time.Sleep(time.Second)
	rssHeld, err := benchkit.RSSAnon(pid)
	require.NoError(t, err)
	fdsHeld, err := OpenFiles(pid)
	require.NoError(t, err)

	// Sends and pulls while they are held.
	count := Pick(600, 5000)
	prod := e.Producer("p0", func(s *workload.ProducerSpec) { s.Count = count })
	require.NoError(t, prod.Wait(3*time.Minute), "producer")
	e.WaitHandled(3*time.Minute, 500*time.Millisecond, "the consumer did not handle every acknowledged message while the connections were held")
	rssLoaded, err := benchkit.RSSAnon(pid)
	require.NoError(t, err)

	for _, p := range holders {
		_ = p.Signal(syscall.SIGTERM)
	}
	var holderErrs []error
	for _, p := range holders {
		if err := p.Stop(2 * time.Minute); err != nil {
			holderErrs = append(holderErrs, fmt.Errorf("holder %s: %w (log %s)", p.Name, err, p.Log))
		}
	}
	e.StopWorkers(cons)
	r := e.DrainAndCheck(checker.Options{ExpectHandled: true, MinAcked: count})
	e.StopBroker()
	for _, err := range holderErrs {
		r.Fail("a held connection no longer answered: %v", err)
	}
	perConn := (rssHeld - rssBefore) / int64(max(held, 1))
	r.Add("grpcConns", grpcConns)
	r.Add("remotingConns", remConns)
	r.Add("holders", len(holders))
	r.Add("connectTook", connectTook.Round(time.Millisecond))
	r.Add("brokerFDs", fmt.Sprintf("%d->%d", fdsBefore, fdsHeld))
	r.Add("rssBefore", MiB(rssBefore))
	r.Add("rssHeld", MiB(rssHeld))
	r.Add("rssHeldLoaded", MiB(rssLoaded))
	r.Add("rssPerConn", fmt.Sprintf("%.1fKiB", float64(perConn)/1024))
	r.Add("race", raceEnabled)
	if held != total {
		r.Fail("the holders opened %d connections, not %d", held, total)
	}
	// A descriptor open at the first count (the warm-up producer's
	// connection, a segment being flushed) may have closed since: allow 1 %.
	if grew := fdsHeld - fdsBefore; grew < total-total/100 {
		r.Fail("the broker's descriptors grew by %d, fewer than the %d connections", grew, total)
	}
	if perConn > 1<<20 {
		r.Fail("%s of anonymous memory per connection", MiB(perConn))
	}
	e.Report(r)
}
