package group

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gantrymq/gantry/internal/faultproxy"
	"github.com/gantrymq/gantry/test/reliability"
	"github.com/gantrymq/gantry/test/reliability/checker"
	"github.com/gantrymq/gantry/test/reliability/history"
)

// ASYNC replication with failover (issue 40): an ASYNC_MASTER group of
// three acknowledges a send once its own log holds it, so killing the
// master (SIGKILL, every 8-12 s, 3 times; 12 in the long tier) loses what
// its slaves had not copied yet. A master streams each append at once, so
// for a kill to find acknowledged messages not yet copied, the master's
// link to its slaves (its HA address behind a fault proxy) first stalls
// for 300 ms, then is reset, just before the kill. Pass: every loss is a
// per-queue suffix of what the killed master acknowledged just before its
// kill (the checker's LossAllowance: no later ack of that queue before
// the kill survived, the ack at most 2 s before it); every message stored
// handled by the consumer; every lost message in a range the old master's
// rejoin recorded as cut (truncations.log); no queue position read as two
// messages (consumers read only what the in-sync set holds); the epoch up
// by one per failover and the logs byte-identical after healing.
func TestGroupAsyncFailover(t *testing.T) {
	t.Parallel() // beside the other group tests (group.go)
	g := reliability.NewGroup(t, "group-async-failover")
	for _, m := range g.Members {
		m.Spec.Role = "ASYNC_MASTER"
	}
	links := proxyLinks(g)
	g.Start(8)
	ps := []*reliability.Proc{g.Producer("p0", 100), g.Producer("p1", 100)}
	c := g.Consumer("c0", groupConsumer)
	st := g.WaitHealthy()
	last := time.Now()
	for range reliability.Pick(3, 12) {
		next := last.Add(8*time.Second + time.Duration(g.Rand.Int64N(int64(4*time.Second))))
		time.Sleep(time.Until(next))
		ha := links.ha[st.MasterID-1]
		ha.Set(faultproxy.Fault{Mode: faultproxy.Blackhole}) // the master acknowledges what its slaves do not get
		time.Sleep(300 * time.Millisecond)
		ha.Set(faultproxy.Fault{Mode: faultproxy.Reset}) // and what the link held is gone
		f := g.KillMaster(st)
		ha.Set(faultproxy.Fault{})
		last = f.KilledAt
		f = g.WaitElected(f)
		g.StartMember(int(f.Killed - 1))
		st = g.WaitHealthy()
		g.WaitAcked(time.Now(), ps...)
	}
	time.Sleep(time.Second)
	g.StopWorkers(ps...)
	g.WaitHandled(20 * time.Second) // what was lost never is: a shorter wait
	g.StopWorkers(c)
	g.Committed(groupConsumer)
	r := g.DrainAndCheck(checker.Options{MinAcked: 500, LossAllowance: 2 * time.Second, ExpectHandled: true})
	reliability.CheckPositions(r, g.Events())
	g.CheckFailovers(r)
	g.StopAndCompareLogs(r, st.MasterID)
	checkLostWereCut(g, r)
	g.Report(r)
}

// cutRange is a range of a broker's log its truncation record says was
// cut.
type cutRange struct {
	broker     string
	from, upTo int64
}

// checkLostWereCut fails r unless every acknowledged message missing from
// the drain lies in a range some broker's truncations.log records as cut.
func checkLostWereCut(g *reliability.Group, r *checker.Result) {
	g.T.Helper()
	var cuts []cutRange
	for _, m := range g.Members {
		rs, err := truncations(m.Spec.Broker.Store)
		if err != nil {
			r.Fail("read %s's truncation records: %v", m.Name, err)
			return
		}
		for i := range rs {
			rs[i].broker = m.Name
		}
		cuts = append(cuts, rs...)
	}
	stored := map[string]bool{}
	var acked []history.Event
	for _, e := range g.Events() {
		switch {
		case e.Kind == history.Drain && e.ID != "":
			stored[e.ID] = true
		case e.Kind == history.Send && e.Outcome == history.OK:
			acked = append(acked, e)
		}
	}
	lost, uncut := 0, 0
	for _, a := range acked {
		if stored[a.ID] {
			continue
		}
		lost++
		found := false
		for _, c := range cuts {
			found = found || c.from <= a.Phys && a.Phys < c.upTo
		}
		if !found {
			uncut++
			if uncut <= 5 {
				r.Fail("lost %s (acknowledged at log offset %d) is in no truncation record", a.ID, a.Phys)
			}
		}
	}
	r.Add("cutRecords", len(cuts))
	r.Add("lostInTruncations", fmt.Sprintf("%d/%d", lost-uncut, lost))
}

// truncations reads the truncation records of the store in dir (none when
// it never truncated).
func truncations(dir string) ([]cutRange, error) {
	f, err := os.Open(filepath.Join(dir, "truncations.log"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cutRange
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var rec struct {
			Offset int64 `json:"offset"`
			OldEnd int64 `json:"oldEnd"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("truncation record %q: %w", sc.Text(), err)
		}
		out = append(out, cutRange{from: rec.Offset, upTo: rec.OldEnd})
	}
	return out, sc.Err()
}
