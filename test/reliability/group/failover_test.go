package group

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/test/reliability"
	"github.com/gantrymq/gantry/test/reliability/checker"
)

// groupConsumer is the consumer group of the group tests.
const groupConsumer = "reliability-group"

// Failover under load (issue 40): a SYNC_MASTER group of three brokers
// (inSyncReplicas 2, SYNC_FLUSH) whose master three controllers elect.
// The master is killed with SIGKILL again and again while two producers
// send and a consumer consumes; each time the controllers elect another
// broker, and the killed one is restarted and rejoins as a slave. Pass:
// lost = 0, unexpected = 0 and the checker's other counts zero, every
// acknowledged message handled, no queue position read as two messages,
// the master epoch up by one per failover, and the brokers' commit logs
// byte-identical. The unavailability of each failover (kill to the first
// ack of the new master) is reported, not judged.
//
// Both tiers kill the master every 15-25 s: the short tier 8 times, the
// long tier 40.
func TestGroupFailoverSIGKILL(t *testing.T) {
	t.Parallel() // beside the other group tests (group.go)
	g := reliability.NewGroup(t, "group-failover-sigkill")
	g.Start(8)
	ps := []*reliability.Proc{g.Producer("p0", 100), g.Producer("p1", 100)}
	c := g.Consumer("c0", groupConsumer)
	st := g.WaitHealthy()
	lo, hi := 15*time.Second, 25*time.Second
	last := time.Now()
	for range reliability.Pick(8, 40) {
		next := last.Add(lo + time.Duration(g.Rand.Int64N(int64(hi-lo))))
		time.Sleep(time.Until(next))
		f := g.KillMaster(st)
		last = f.KilledAt
		f = g.WaitElected(f)
		g.StartMember(int(f.Killed - 1))
		st = g.WaitHealthy()
		g.WaitAcked(time.Now(), ps...)
	}
	g.Report(finish(g, ps, c, time.Minute, checker.Options{MinAcked: 500, ExpectHandled: true}, st.MasterID))
}

// finish ends a group run: it stops the producers (after a second for the
// last master's acks), waits up to handled for the consumer to handle what
// was acknowledged, stops it, reads the group's committed offsets, drains
// and checks with opts, then checks the queue positions, the failovers and
// the logs (stopping the brokers) against master.
func finish(g *reliability.Group, ps []*reliability.Proc, c *reliability.Proc, handled time.Duration, opts checker.Options, master int64) *checker.Result {
	g.T.Helper()
	time.Sleep(time.Second)
	g.StopWorkers(ps...)
	g.WaitHandled(handled)
	g.StopWorkers(c)
	g.Committed(groupConsumer)
	r := g.DrainAndCheck(opts)
	reliability.CheckPositions(r, g.Events())
	g.CheckFailovers(r)
	g.StopAndCompareLogs(r, master)
	return r
}

// The controllers are a raft group of three: without one member (its
// leader, killed) a failover still happens; without two, none can, so no
// broker becomes master after the master dies, until a second member is
// back. Nothing acknowledged is lost throughout.
func TestGroupControllerLoss(t *testing.T) {
	t.Parallel() // beside the other group tests (group.go)
	g := reliability.NewGroup(t, "group-controller-loss")
	g.Start(4)
	p := g.Producer("p0", 100)
	st := g.WaitHealthy()
	g.WaitAcked(time.Now(), p)

	first := g.ControllerLeader()
	g.KillController(first)
	time.Sleep(time.Second)
	st = g.Failover(st) // with two controllers of three
	g.WaitAcked(time.Now(), p)

	second := (first + 1) % len(g.Ctls)
	g.KillController(second)
	f := g.KillMaster(st)
	newMaster := reliability.WaitFor(3*reliability.GroupTimeouts.BrokerTimeout, 100*time.Millisecond, func() bool {
		for i, n := range g.Members {
			if n.Up() && g.Serving(int64(i+1)) {
				t.Logf("broker %d serves as master without a controller quorum", i+1)
				return true
			}
		}
		return false
	})
	assert.False(t, newMaster, "a broker became master while two of three controllers were down")

	g.StartController(second) // a quorum again: the controllers elect
	f = g.WaitElected(f)
	g.StartMember(int(f.Killed - 1))
	g.StartController(first)
	st = g.WaitHealthy()
	g.WaitAcked(time.Now(), p)
	require.Len(t, g.Failovers, 2)

	time.Sleep(time.Second)
	g.StopWorkers(p)
	r := g.DrainAndCheck(checker.Options{MinAcked: 100})
	reliability.CheckPositions(r, g.Events())
	g.CheckFailovers(r)
	g.StopAndCompareLogs(r, st.MasterID)
	g.Report(r)
}
