package group

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/replication/controller"
	"github.com/gantrymq/gantry/test/reliability"
	"github.com/gantrymq/gantry/test/reliability/checker"
)

// Slaves that fall behind (issue 40): under load, a slave is SIGKILLed
// and kept down 15 s (long: 60 s) while the master goes on with the
// other; restarted, it catches up and rejoins the in-sync set. Then the
// other slave is SIGKILLed, its store deleted, and it is restarted with an
// empty disk: it copies the master's log from its first retained segment
// and rejoins the set. Last, the master is SIGKILLed and the controllers
// elect one of the two. Pass: all counts 0 with the consumer checks, no
// queue position read as two messages, the epoch +1, the logs
// byte-identical; how far behind each slave was and how long it took to
// be in sync again are reported.
func TestGroupSlaveCatchUp(t *testing.T) {
	t.Parallel() // beside the other group tests (group.go)
	g := reliability.NewGroup(t, "group-slave-catch-up")
	g.Start(4)
	ps := []*reliability.Proc{g.Producer("p0", 100), g.Producer("p1", 100)}
	c := g.Consumer("c0", groupConsumer)
	st := g.WaitHealthy()
	g.WaitAcked(time.Now(), ps...)

	var figures [][2]string
	for i, empty := range []bool{false, true} {
		id := slaveOf(st, i)
		g.Fault(fmt.Sprintf("SIGKILL slave broker %d", id))
		g.Member(id).Proc.Kill()
		if empty {
			require.NoError(t, os.RemoveAll(g.Member(id).Spec.Broker.Store))
		}
		time.Sleep(reliability.Pick(15*time.Second, 60*time.Second))
		behind := lagOf(g, st.MasterID, id, empty)
		start := time.Now()
		g.StartMember(int(id - 1))
		st = g.WaitHealthy()
		what := "caughtUp"
		if empty {
			what = "resynced"
		}
		figures = append(figures, [2]string{what, fmt.Sprintf("%dB/%s", behind, time.Since(start).Round(10*time.Millisecond))})
		g.WaitAcked(time.Now(), ps...)
	}
	st = g.Failover(st)
	g.WaitAcked(time.Now(), ps...)

	r := finish(g, ps, c, time.Minute, checker.Options{MinAcked: 500, ExpectHandled: true}, st.MasterID)
	for _, f := range figures {
		r.Add(f[0], f[1])
	}
	g.Report(r)
}

// slaveOf returns the i-th slave of st's group, by id.
func slaveOf(st controller.GroupStatus, i int) int64 {
	for id := int64(1); id <= 3; id++ {
		if id != st.MasterID {
			if i == 0 {
				return id
			}
			i--
		}
	}
	panic("no such slave")
}

// lagOf is how many bytes of the master's log slave id lacks: all of it
// when its disk is empty, else what it acknowledged last.
func lagOf(g *reliability.Group, master, id int64, empty bool) int64 {
	g.T.Helper()
	hs, err := g.HAStatus(master)
	require.NoError(g.T, err)
	if empty {
		return hs.LogEnd
	}
	for _, s := range hs.Slaves {
		if s.BrokerID == id {
			return s.LagBytes
		}
	}
	return hs.LogEnd
}
