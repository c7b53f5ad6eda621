package group

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/internal/faultproxy"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/replication/controller"
	"github.com/gantrymq/gantry/replication/epoch"
	"github.com/gantrymq/gantry/test/reliability"
	"github.com/gantrymq/gantry/test/reliability/checker"
	"github.com/gantrymq/gantry/test/reliability/history"
)

// A partitioned master (issue 40): every link of the group runs through a
// fault proxy (each broker's links to the controllers, its HA address as
// its slaves dial it, its gRPC address as the workers dial it), and the
// master is cut off, one shape at a time, while two producers send and a
// consumer consumes:
//
//   - from the controllers: its lease runs out and it stops
//     acknowledging; the controllers elect another broker; healed, the old
//     master rejoins as a slave;
//   - from everyone (controllers, slaves and clients): the same;
//   - from its slaves: it keeps its role (its heartbeats arrive) and the
//     epoch, acknowledging nothing its in-sync set lacks;
//   - from its clients: it keeps its role and the epoch.
//
// Pass: the checker's verdict (lost = 0, unexpected = 0; SYNC_MASTER,
// SYNC_FLUSH, inSyncReplicas 2), every acknowledged message handled, each
// ack's commit-log offset the one the final log holds its message at; each
// ack falls in one epoch (by its offset against the epochs' start
// offsets) whose master the controllers named, the old master's last ack
// precedes the new master's first and its lease's end; the epoch up by one
// for the first two shapes and unchanged for the others; the brokers'
// epoch files agree and their commit logs are byte-identical.
//
// The short tier cuts the master from the controllers, from everyone and
// from its clients once each; the long tier runs every shape three times,
// in an order drawn from the seed. Cut off from everyone, the old master
// may store sends it never acknowledges (its slaves are cut off too): a
// long poll held open across the cut must not hand them to the consumer,
// since the old master's rejoin truncates them and the new master fills
// their queue offsets with other messages (docs/REPLICATION.md, "What
// consumers read").
func TestGroupPartitionedMaster(t *testing.T) {
	t.Parallel() // beside the other group tests (group.go)
	g := reliability.NewGroup(t, "group-partitioned-master")
	links := proxyLinks(g)
	g.Start(4)
	ps := []*reliability.Proc{g.Producer("p0", 100), g.Producer("p1", 100)}
	c := g.Consumer("c0", groupConsumer)
	st := g.WaitHealthy()
	masters := map[int32]int64{st.MasterEpoch: st.MasterID}

	shapes := []partShape{partShapes[0], partShapes[1], partShapes[3]}
	if reliability.Long() {
		shapes = nil
		for range 3 {
			shapes = append(shapes, partShapes...)
		}
		g.Rand.Shuffle(len(shapes), func(i, j int) { shapes[i], shapes[j] = shapes[j], shapes[i] })
	}
	var cuts []cut
	for _, s := range shapes {
		g.WaitAcked(time.Now(), ps...)
		g.Sleep(500*time.Millisecond, 1500*time.Millisecond) // under load when cut
		ct := links.partition(g, st, s, ps)
		st = g.WaitHealthy()
		ct.after = st
		masters[st.MasterEpoch] = st.MasterID
		cuts = append(cuts, ct)
		g.WaitAcked(time.Now(), ps...)
	}
	r := finish(g, ps, c, time.Minute, checker.Options{MinAcked: 300, ExpectHandled: true}, st.MasterID)
	checkCuts(g, r, cuts, masters, st.MasterID)
	g.Report(r)
}

// partShape is which of the master's links a partition cuts.
type partShape struct {
	name string
	// ctl: its links to the controllers; ha: its HA address (its slaves);
	// clients: its gRPC address as the workers dial it.
	ctl, ha, clients bool
	// elects: the controllers stop hearing it, so they elect another.
	elects bool
}

var partShapes = []partShape{
	{name: "controllers", ctl: true, elects: true},
	{name: "everyone", ctl: true, ha: true, clients: true, elects: true},
	{name: "slaves", ha: true},
	{name: "clients", clients: true},
}

// partitionHold is the least time a partition lasts: past the controllers'
// broker timeout (a master they stopped hearing is replaced by then) and
// past a send's 3 s timeout (a response held by a cut link is never read
// as an ack after the heal).
var partitionHold = reliability.GroupTimeouts.BrokerTimeout + time.Second

// groupLinks are the fault proxies in front of each broker's links, by
// broker index.
type groupLinks struct {
	ctl     [][]*faultproxy.Proxy // its links to each controller
	ha      []*faultproxy.Proxy   // its HA address, as its slaves dial it
	clients []*faultproxy.Proxy   // its gRPC address, as the workers dial it
}

// proxyLinks puts each broker's links behind fault proxies in the test
// process; call it before g.Start (it also changes the controllers'
// specs). The workers dial every broker through
// its proxy (the master moves); the harness's own clients and the drain
// connect directly.
func proxyLinks(g *reliability.Group) *groupLinks {
	g.T.Helper()
	start := func(target string) *faultproxy.Proxy {
		p, err := faultproxy.Start(faultproxy.Config{Target: target})
		require.NoError(g.T, err)
		g.T.Cleanup(func() { _ = p.Close() })
		return p
	}
	// A member that does not lead names the leader at the address its
	// Peers give; these name the others where nothing listens (the
	// members' own addresses unreachable from the brokers, as behind NAT),
	// so a broker never reaches a controller past its proxies: its
	// controller client asks its own proxies in turn before it follows
	// that address.
	for i, c := range g.Ctls {
		c.Spec.Peers = slices.Clone(c.Spec.Peers)
		for j := range c.Spec.Peers {
			if j != i {
				c.Spec.Peers[j].GRPCAddr = reliability.FreeAddr(g.T)
			}
		}
	}
	l := &groupLinks{}
	g.Dial = map[string]string{}
	for _, n := range g.Members {
		var ctl []*faultproxy.Proxy
		var addrs []string
		for _, c := range g.Ctls {
			p := start(c.Spec.GRPC)
			ctl, addrs = append(ctl, p), append(addrs, p.Addr())
		}
		ha := start(fmt.Sprintf("127.0.0.1:%d", n.Spec.Broker.HAPort))
		cl := start(n.Spec.Broker.GRPC)
		n.Spec.Controllers, n.Spec.HAAdvertise = addrs, ha.Addr()
		g.Dial[n.Spec.Broker.GRPC] = cl.Addr()
		l.ctl, l.ha, l.clients = append(l.ctl, ctl), append(l.ha, ha), append(l.clients, cl)
	}
	return l
}

// set applies f to the links of broker index i that s cuts.
func (l *groupLinks) set(i int, s partShape, f faultproxy.Fault) {
	if s.ctl {
		for _, p := range l.ctl[i] {
			p.Set(f)
		}
	}
	if s.ha {
		l.ha[i].Set(f)
	}
	if s.clients {
		l.clients[i].Set(f)
	}
}

// cut is one partition of a master and the group's state around it.
type cut struct {
	shape      partShape
	master     int64
	epoch      int32
	at, healed time.Time
	// during is the controllers' view at the end of the partition; after,
	// once the group settled after the heal.
	during, after controller.GroupStatus
}

// partition cuts the master of st off in shape s, waits (for the new
// master's first ack when the controllers elect), heals it and returns
// what happened; the caller waits for the group to settle.
func (l *groupLinks) partition(g *reliability.Group, st controller.GroupStatus, s partShape, ps []*reliability.Proc) cut {
	g.T.Helper()
	c := cut{shape: s, master: st.MasterID, epoch: st.MasterEpoch}
	i := int(st.MasterID - 1)
	g.Fault(fmt.Sprintf("partition master broker %d (epoch %d) from %s", st.MasterID, st.MasterEpoch, s.name))
	c.at = time.Now()
	l.set(i, s, faultproxy.Fault{Mode: faultproxy.Blackhole})
	if s.elects {
		f := g.WaitElected(reliability.Failover{Killed: st.MasterID, KilledAt: c.at, Epoch: st.MasterEpoch, EpochStart: -1,
			Fault: "partitioned from " + s.name})
		g.T.Logf("%s: broker %d elected (epoch %d) %s after the cut", s.name, f.NewMaster, f.NewEpoch,
			time.Since(c.at).Round(time.Millisecond))
		g.WaitAcked(time.Now(), ps...) // the new master takes writes while the old one is cut off
	}
	time.Sleep(time.Until(c.at.Add(partitionHold)))
	ok := reliability.WaitFor(5*time.Second, 100*time.Millisecond, func() bool {
		var err error
		c.during, err = g.GroupState()
		return err == nil
	})
	require.True(g.T, ok, "%s: the controllers do not answer at the end of the partition", s.name)
	g.Record(history.Event{Kind: history.Heal, Note: fmt.Sprintf("partition of broker %d healed", st.MasterID), Time: history.Now()})
	l.set(i, s, faultproxy.Fault{})
	c.healed = time.Now()
	return c
}

// ackAt is an acknowledgement with the epoch its commit-log offset falls in.
type ackAt struct {
	id    string
	at    int64
	phys  int64
	epoch int32
}

// checkCuts checks the epochs of the run against its acknowledgements and
// partitions (see TestGroupPartitionedMaster); the brokers must be
// stopped. masters names each epoch's master as the controllers did;
// final is the last master.
func checkCuts(g *reliability.Group, r *checker.Result, cuts []cut, masters map[int32]int64, final int64) {
	g.T.Helper()
	entries := epochsAgree(g, r, final)
	evs := g.Events()
	acks, misplaced := epochAcks(evs, entries)
	r.Add("misplacedAcks", misplaced)
	if misplaced > 0 {
		r.Fail("%d acks name a commit-log offset the final log does not hold their message at", misplaced)
	}
	first, last, count := map[int32]int64{}, map[int32]int64{}, map[int32]int{}
	for _, a := range acks {
		if _, ok := masters[a.epoch]; !ok {
			r.Fail("%s acknowledged at offset %d, in epoch %d, whose master the controllers never named to the harness", a.id, a.phys, a.epoch)
		}
		count[a.epoch]++
		if f, ok := first[a.epoch]; !ok || a.at < f {
			first[a.epoch] = a.at
		}
		last[a.epoch] = max(last[a.epoch], a.at)
	}
	var byEpoch []string
	for _, e := range slices.Sorted(maps.Keys(count)) {
		byEpoch = append(byEpoch, fmt.Sprintf("%d:%d", e, count[e]))
	}
	r.Add("acksByEpoch", strings.Join(byEpoch, ","))
	var names []string
	for _, c := range cuts {
		names = append(names, c.shape.name)
		checkCut(g, r, c, acks, first, last)
	}
	r.Add("partitions", strings.Join(names, ","))
}

// checkCut checks one partition: the epoch after it, and for an election
// that the old master's acks end before its lease does and before the
// new master's first.
func checkCut(g *reliability.Group, r *checker.Result, c cut, acks []ackAt, first, last map[int32]int64) {
	s := c.shape
	during := 0
	for _, a := range acks {
		if a.at > c.at.UnixNano() && a.at < c.healed.UnixNano() && a.epoch == c.epoch {
			during++
		}
	}
	if !s.elects {
		for _, st := range []controller.GroupStatus{c.during, c.after} {
			if st.MasterID != c.master || st.MasterEpoch != c.epoch {
				r.Fail("%s: broker %d (epoch %d) lost its role: the controllers name broker %d (epoch %d)",
					s.name, c.master, c.epoch, st.MasterID, st.MasterEpoch)
			}
		}
		g.T.Logf("%s: broker %d kept its role (epoch %d); %d acks in its epoch during the %s partition",
			s.name, c.master, c.epoch, during, c.healed.Sub(c.at).Round(time.Millisecond))
		return
	}
	if c.after.MasterEpoch != c.epoch+1 || c.after.MasterID == c.master {
		r.Fail("%s: after the partition of broker %d (epoch %d) the controllers name broker %d (epoch %d), not another broker in epoch %d",
			s.name, c.master, c.epoch, c.after.MasterID, c.after.MasterEpoch, c.epoch+1)
	}
	lastOld, firstNew := last[c.epoch], first[c.epoch+1]
	lease := c.at.Add(2 * reliability.MemberLease).UnixNano() // the lease runs from a heartbeat sent before the cut; the ack is read after it is given
	switch {
	case firstNew == 0:
		r.Fail("%s: no ack in epoch %d", s.name, c.epoch+1)
	case lastOld >= firstNew:
		r.Fail("%s: broker %d acknowledged in epoch %d at %s, after the first ack of epoch %d at %s", s.name, c.master, c.epoch,
			time.Unix(0, lastOld).Format("15:04:05.000"), c.epoch+1, time.Unix(0, firstNew).Format("15:04:05.000"))
	case lastOld > lease:
		r.Fail("%s: broker %d acknowledged %s after it was cut off, past its lease (%s)", s.name, c.master,
			time.Duration(lastOld-c.at.UnixNano()).Round(time.Millisecond), reliability.MemberLease)
	}
	g.T.Logf("%s: broker %d (epoch %d) cut off; its last ack %s after the cut, epoch %d's first %s after it; %d acks in epoch %d during the partition",
		s.name, c.master, c.epoch, time.Duration(lastOld-c.at.UnixNano()).Round(time.Millisecond), c.epoch+1,
		time.Duration(firstNew-c.at.UnixNano()).Round(time.Millisecond), during, c.epoch)
}

// epochAcks returns the acknowledgements of evs, each with the epoch of
// entries its commit-log offset falls in, and how many name an offset
// the drain did not find their message at.
func epochAcks(evs []history.Event, entries []epoch.Entry) ([]ackAt, int) {
	drained := map[string][]int64{}
	for _, e := range evs {
		if e.Kind == history.Drain && e.ID != "" {
			drained[e.ID] = append(drained[e.ID], e.Phys)
		}
	}
	var acks []ackAt
	misplaced := 0
	for _, e := range evs {
		if e.Kind != history.Send || e.Outcome != history.OK {
			continue
		}
		if at, ok := drained[e.ID]; ok && !slices.Contains(at, e.Phys) { // absent: the checker counts it lost
			misplaced++
		}
		a := ackAt{id: e.ID, at: e.Time, phys: e.Phys}
		for _, en := range entries { // the last epoch starting at or before the offset
			if en.StartOffset <= e.Phys {
				a.epoch = en.Epoch
			}
		}
		acks = append(acks, a)
	}
	return acks, misplaced
}

// epochsAgree reads every broker's epoch file and fails r unless they
// agree on the epochs that hold data; it returns the master's entries.
func epochsAgree(g *reliability.Group, r *checker.Result, master int64) []epoch.Entry {
	g.T.Helper()
	files := make([][]epoch.Entry, len(g.Members))
	for i, n := range g.Members {
		f, err := epoch.Open(fsx.OS, filepath.Join(n.Spec.Broker.Store, server.EpochFile))
		require.NoError(g.T, err)
		files[i] = f.Entries()
	}
	ref := dataEpochs(files[master-1])
	for i, f := range files {
		if d := dataEpochs(f); !slices.Equal(d, ref) {
			r.Fail("the epoch files of broker %d (%v) and broker %d (%v) disagree", master, ref, i+1, d)
		}
	}
	r.Add("epochs", len(ref))
	return files[master-1]
}

// dataEpochs drops the entries of epochs that hold no data (the next one
// starts at the same offset): a slave records an epoch with its first
// data.
func dataEpochs(entries []epoch.Entry) []epoch.Entry {
	var out []epoch.Entry
	for i, e := range entries {
		if i+1 < len(entries) && entries[i+1].StartOffset == e.StartOffset {
			continue
		}
		out = append(out, e)
	}
	return out
}
