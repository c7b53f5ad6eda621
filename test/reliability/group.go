package reliability

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/replication/controller"
	"github.com/gantrymq/gantry/test/reliability/checker"
	"github.com/gantrymq/gantry/test/reliability/history"
	"github.com/gantrymq/gantry/test/reliability/workload"
)

// Group is a run against a broker group whose master three controller
// members elect (docs/REPLICATION.md, "Failover"): a nameserver, three
// controllers and three controller-mode brokers, each a child process,
// with the Env's workers, histories and verdict.
type Group struct {
	*Env
	Ctls    []*node[ControllerSpec]
	Members []*node[MemberSpec]
	ctl     *controller.Client
	// Failovers are the master changes the harness caused, in order.
	Failovers []Failover
}

// node is one child process of the group and its spec, kept for restarts.
type node[S any] struct {
	Name string
	Spec S
	Proc *Proc
}

func (n *node[S]) Up() bool { return n.Proc != nil && !n.Proc.Exited() }

// Failover is one master change: the master killed and what followed.
type Failover struct {
	Killed    int64     // the killed master's broker id
	KilledAt  time.Time // just before the SIGKILL
	Epoch     int32     // the master epoch before
	NewMaster int64
	NewEpoch  int32
	// EpochStart is the commit-log offset the new master's epoch starts
	// at (-1 until known): an ack at or past it came from the new master.
	EpochStart int64
	// Fault says what ended the old master's term when it was not a
	// SIGKILL ("partitioned from controllers"); Killed and KilledAt then
	// name the broker cut off and when.
	Fault string
}

// how says what ended the old master's term.
func (f Failover) how() string { return cmp.Or(f.Fault, "killed") }

// The group tests (TestGroup*) run in parallel with each other (t.Parallel,
// after the suite's other tests, at most GOMAXPROCS at a time): each
// spends most of its time waiting on timers (kill intervals, lease and
// broker timeouts) under a light load, on ports of its own (freePort).

// GroupTimeouts: a broker silent 3 s is dead; its master lease (1.5 s)
// runs out well before, so an old master stops acknowledging before
// another can be elected. Raft keeps its defaults (1 s): shorter ones made
// the controllers change leaders on a loaded host, and each new leader
// gives every broker a full BrokerTimeout before it elects.
var GroupTimeouts = ControllerTimeouts{BrokerTimeout: 3 * time.Second, ScanInterval: 100 * time.Millisecond}

const (
	groupName     = "broker-a"
	memberBeat    = 200 * time.Millisecond
	MemberLease   = 1500 * time.Millisecond
	groupSettling = 90 * time.Second // bound of every wait for the group to settle
)

// NewGroup prepares a group run named name on free loopback ports;
// nothing is started yet.
func NewGroup(t *testing.T, name string) *Group {
	t.Helper()
	g := &Group{Env: NewEnv(t, name)}
	var peers []controller.Peer
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("c%d", i)
		peers = append(peers, controller.Peer{ID: id, Addr: freeAddr(t), GRPCAddr: freeAddr(t)})
	}
	var addrs []string
	for _, p := range peers {
		addrs = append(addrs, p.GRPCAddr)
		g.Ctls = append(g.Ctls, &node[ControllerSpec]{Name: p.ID, Spec: ControllerSpec{ID: p.ID, Raft: p.Addr, GRPC: p.GRPCAddr,
			DataDir: filepath.Join(g.Dir, p.ID), Peers: peers, Timeouts: GroupTimeouts}})
	}
	for id := int64(1); id <= 3; id++ {
		bs := g.Spec // the suite's broker defaults, on new ports
		bs.Name, bs.Store = groupName, filepath.Join(g.Dir, fmt.Sprintf("store-%d", id))
		bs.SegmentBytes = 1 << 20 // the logs roll: replication and the comparison cross segments
		bs.GRPC, bs.HTTP, bs.ListenPort, bs.HAPort = freeAddr(t), freeAddr(t), freePort(t), freePort(t)
		g.Members = append(g.Members, &node[MemberSpec]{Name: fmt.Sprintf("broker-%d", id), Spec: MemberSpec{Broker: bs, ID: id,
			Controllers: addrs, Role: "SYNC_MASTER", InSyncReplicas: 2, Heartbeat: memberBeat, Lease: MemberLease}})
	}
	c, err := controller.NewClient(controller.ClientConfig{Addrs: addrs, AttemptTimeout: time.Second, Attempts: 3})
	require.NoError(t, err)
	g.ctl = c
	t.Cleanup(func() { _ = c.Close() })
	return g
}

// Start starts the nameserver, the controllers and the brokers, waits
// for a master with both slaves in sync, and creates the topic.
func (g *Group) Start(queues int32) {
	g.T.Helper()
	g.StartNameServer()
	for i := range g.Ctls {
		g.StartController(i)
	}
	for _, m := range g.Members {
		m.Spec.Broker.NameServers = []string{g.NSAddr}
	}
	for i := range g.Members {
		g.StartMember(i)
	}
	g.WaitHealthy()
	g.CreateTopic(queues)
	g.waitTopicReplicated()
}

// waitTopicReplicated waits until every broker's topics.json names the
// topic: a master acknowledges a topic's creation before its slaves hold
// it, so a failover right after the creation would lose the topic.
func (g *Group) waitTopicReplicated() {
	g.T.Helper()
	for _, n := range g.Members {
		path := filepath.Join(n.Spec.Broker.Store, "config", "topics.json")
		require.Eventually(g.T, func() bool {
			b, err := os.ReadFile(path)
			return err == nil && strings.Contains(string(b), `"`+g.Topic+`"`)
		}, groupSettling, 50*time.Millisecond, "%s does not name topic %s", path, g.Topic)
	}
}

// Producer starts a producer worker (4 sends in flight, at most rate a
// second) with the client's default route refresh: it finds a new master
// by reading the route again when a send fails.
func (g *Group) Producer(name string, rate int) *Proc {
	g.T.Helper()
	return g.Env.Producer(name, func(s *workload.ProducerSpec) { s.Concurrency, s.Rate = 4, rate })
}

// Consumer starts a push consumer in group.
func (g *Group) Consumer(name, group string) *Proc {
	g.T.Helper()
	return g.Env.Consumer(name, group, nil)
}

// StartController starts (or restarts, on its ports and data) controller
// member i.
func (g *Group) StartController(i int) {
	g.T.Helper()
	n := g.Ctls[i]
	p, err := startProc(n.Name, RoleController, n.Spec, filepath.Join(g.Dir, n.Name+".log"))
	require.NoError(g.T, err)
	g.track(p)
	require.NoError(g.T, p.WaitReady(time.Minute, nil))
	n.Proc = p
}

// KillController kills controller member i with SIGKILL.
func (g *Group) KillController(i int) {
	g.T.Helper()
	g.Fault("SIGKILL controller " + g.Ctls[i].Name)
	g.Ctls[i].Proc.Kill()
}

// StartMember starts (or restarts, on its ports and store) broker i
// (id i+1); it serves as a slave until the controller names its role.
func (g *Group) StartMember(i int) {
	g.T.Helper()
	n := g.Members[i]
	g.Record(history.Event{Kind: history.Start, Note: n.Name + " started", Time: history.Now()})
	p, err := startProc(n.Name, RoleMember, n.Spec, filepath.Join(g.Dir, n.Name+".log"))
	require.NoError(g.T, err)
	g.track(p)
	require.NoError(g.T, p.WaitReady(2*time.Minute, nil))
	n.Proc = p
}

// Member returns the node of broker id.
func (g *Group) Member(id int64) *node[MemberSpec] { return g.Members[id-1] }

// GroupState asks the controllers for the group's state.
func (g *Group) GroupState() (controller.GroupStatus, error) {
	ctx, cancel := context.WithTimeout(g.T.Context(), 3*time.Second)
	defer cancel()
	return g.ctl.GetGroup(ctx, groupName)
}

// HAStatus asks broker id for its replication status.
func (g *Group) HAStatus(id int64) (client.HAStatus, error) {
	ctx, cancel := context.WithTimeout(g.T.Context(), 2*time.Second)
	defer cancel()
	return g.Admin().HAStatus(ctx, g.Member(id).Spec.Broker.GRPC)
}

// Serving reports whether broker id serves as master now.
func (g *Group) Serving(id int64) bool {
	st, err := g.HAStatus(id)
	return err == nil && st.Role != "SLAVE"
}

// WaitHealthy waits until the controllers name a master that serves with
// every other broker connected as its slave and in its in-sync set,
// heartbeats in its epoch, and is the nameserver's master of the group;
// it returns the group's state.
func (g *Group) WaitHealthy() controller.GroupStatus {
	g.T.Helper()
	var st controller.GroupStatus
	var why string
	ok := WaitFor(groupSettling, 50*time.Millisecond, func() bool {
		var err error
		st, err = g.GroupState()
		hb, beat := st.Heartbeats[st.MasterID]
		switch {
		case err != nil:
			why = err.Error()
		case st.MasterID == 0:
			why = "no master"
		case len(st.InSync) != len(g.Members):
			why = fmt.Sprintf("in-sync set %v", st.InSync)
		case !beat || hb.LastEpoch != st.MasterEpoch:
			why = fmt.Sprintf("master %d has not reported epoch %d", st.MasterID, st.MasterEpoch)
		case !g.replicating(st.MasterID):
			why = fmt.Sprintf("broker %d does not serve as master with every slave connected", st.MasterID)
		case !g.routed(st.MasterID):
			why = fmt.Sprintf("the nameserver does not name broker %d master", st.MasterID)
		default:
			return true
		}
		return false
	})
	require.True(g.T, ok, "the group did not settle within %s: %s", groupSettling, why)
	if n := len(g.Failovers); n > 0 && g.Failovers[n-1].EpochStart < 0 && g.Failovers[n-1].NewEpoch == st.MasterEpoch {
		g.Failovers[n-1].EpochStart = st.Heartbeats[st.MasterID].LastEpochStart
	}
	return st
}

// replicating reports whether broker id serves as master with every
// other broker connected as its slave.
func (g *Group) replicating(id int64) bool {
	st, err := g.HAStatus(id)
	if err != nil || st.Role == "SLAVE" {
		return false
	}
	n := 0
	for _, s := range st.Slaves {
		if s.Connected {
			n++
		}
	}
	return n == len(g.Members)-1
}

// WaitAcked waits until one of the producers ps records an ack after
// since: the group takes writes again.
func (g *Group) WaitAcked(since time.Time, ps ...*Proc) {
	g.T.Helper()
	ok := WaitFor(groupSettling, 200*time.Millisecond, func() bool {
		for _, p := range ps {
			evs := g.WorkerEvents(p.Name)
			for i := len(evs) - 1; i >= 0 && evs[i].Time > since.UnixNano(); i-- {
				if evs[i].Kind == history.Send && evs[i].Outcome == history.OK {
					return true
				}
			}
		}
		return false
	})
	require.True(g.T, ok, "no acknowledgement within %s after %s", groupSettling, since.Format("15:04:05.000"))
}

// WaitHandled waits up to timeout until the consumers have handled every
// message acknowledged so far, and logs how many they had not then.
func (g *Group) WaitHandled(timeout time.Duration) {
	g.T.Helper()
	acked := ackedIDs(g.Events())
	var evs []history.Event
	if !WaitFor(timeout, 200*time.Millisecond, func() bool { evs = g.Events(); return handledAll(evs, acked) }) {
		seen := map[string]bool{}
		for _, e := range evs {
			if e.Kind == history.Recv && acked[e.ID] {
				seen[e.ID] = true
			}
		}
		g.T.Logf("after %s the consumers had handled %d of %d acknowledged messages", timeout, len(seen), len(acked))
	}
}

// routed reports whether the nameserver names broker id the group's master.
func (g *Group) routed(id int64) bool {
	ctx, cancel := context.WithTimeout(g.T.Context(), 2*time.Second)
	defer cancel()
	ci, err := g.Admin().ClusterInfo(ctx)
	return err == nil && ci.Brokers[groupName].Addrs[0] == g.Member(id).Spec.Broker.GRPC
}

// WaitFor polls cond every poll until it holds or timeout passes.
func WaitFor(timeout, poll time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(poll)
	}
}

// KillMaster kills the master of st with SIGKILL and returns the failover
// it starts (its new master not yet known).
func (g *Group) KillMaster(st controller.GroupStatus) Failover {
	g.T.Helper()
	f := Failover{Killed: st.MasterID, Epoch: st.MasterEpoch, EpochStart: -1}
	g.Fault(fmt.Sprintf("SIGKILL master broker %d (epoch %d)", st.MasterID, st.MasterEpoch))
	f.KilledAt = time.Now()
	g.Member(st.MasterID).Proc.Kill()
	return f
}

// WaitElected waits until the controllers name a master other than the
// killed one, records the failover, and returns it.
func (g *Group) WaitElected(f Failover) Failover {
	g.T.Helper()
	var st controller.GroupStatus
	ok := WaitFor(groupSettling, 20*time.Millisecond, func() bool {
		var err error
		st, err = g.GroupState()
		return err == nil && st.MasterID != 0 && st.MasterID != f.Killed && st.MasterEpoch > f.Epoch
	})
	require.True(g.T, ok, "no new master within %s after broker %d was %s", groupSettling, f.Killed, f.how())
	f.NewMaster, f.NewEpoch = st.MasterID, st.MasterEpoch
	g.Record(history.Event{Kind: history.Heal, Note: fmt.Sprintf("broker %d elected (epoch %d)", st.MasterID, st.MasterEpoch),
		Time: history.Now()})
	g.Failovers = append(g.Failovers, f)
	return f
}

// Failover kills the master of st, waits for the election, restarts the
// killed broker (it rejoins as a slave) and waits for the group to settle.
func (g *Group) Failover(st controller.GroupStatus) controller.GroupStatus {
	g.T.Helper()
	f := g.WaitElected(g.KillMaster(st))
	g.StartMember(int(f.Killed - 1))
	return g.WaitHealthy()
}

// CheckFailovers adds the failovers' figures to r: each one's master
// epoch must be one above the epoch before it, and the unavailability
// (from the kill to the first ack the new master gave) of each and the
// worst are reported, not judged: they depend on the host's load.
func (g *Group) CheckFailovers(r *checker.Result) {
	g.T.Helper()
	acks := ackTimes(g.Events())
	var worst time.Duration
	var each []string
	for i, f := range g.Failovers {
		if f.NewEpoch != f.Epoch+1 {
			r.Fail("failover %d: the master epoch went from %d to %d, not up by one", i+1, f.Epoch, f.NewEpoch)
		}
		u, ok := unavailability(acks, f)
		if !ok {
			r.Fail("failover %d: no acknowledgement after broker %d was %s", i+1, f.Killed, f.how())
			continue
		}
		worst = max(worst, u)
		each = append(each, u.Round(10*time.Millisecond).String())
		g.T.Logf("failover %d: broker %d (epoch %d) %s, broker %d elected (epoch %d), first ack of the new master after %s",
			i+1, f.Killed, f.Epoch, f.how(), f.NewMaster, f.NewEpoch, u.Round(time.Millisecond))
	}
	r.Add("failovers", len(g.Failovers))
	if len(each) > 0 {
		r.Add("unavailable", strings.Join(each, ","))
		r.Add("maxUnavailable", worst.Round(time.Millisecond))
	}
}

// ack is an acknowledgement's time and commit-log offset.
type ack struct{ at, phys int64 }

// DrainedIDs returns the ids the run's drain found (none before a drain).
func DrainedIDs(evs []history.Event) map[string]bool {
	out := map[string]bool{}
	for _, e := range evs {
		if e.Kind == history.Drain && e.ID != "" {
			out[e.ID] = true
		}
	}
	return out
}

// ackTimes returns the run's acknowledgements by time, less those of
// messages a drain did not find (an ASYNC master's last acks, lost with
// it: their offsets may lie in the next epoch's range).
func ackTimes(evs []history.Event) []ack {
	stored := DrainedIDs(evs)
	var out []ack
	for _, e := range evs {
		if e.Kind == history.Send && e.Outcome == history.OK && (len(stored) == 0 || stored[e.ID]) {
			out = append(out, ack{e.Time, e.Phys})
		}
	}
	slices.SortFunc(out, func(a, b ack) int { return cmp.Compare(a.at, b.at) })
	return out
}

// unavailability is the time from f's kill to the first ack given in the
// new master's epoch (an ack read after the kill may have been given by
// the old master just before it).
func unavailability(acks []ack, f Failover) (time.Duration, bool) {
	kill := f.KilledAt.UnixNano()
	for _, a := range acks {
		if a.at > kill && (f.EpochStart < 0 || a.phys >= f.EpochStart) {
			return time.Duration(a.at - kill), true
		}
	}
	return 0, false
}

// CheckPositions fails r when a queue position was read (by a consumer
// or the drain) holding two different messages: a consumer then saw a
// message that a failover replaced.
func CheckPositions(r *checker.Result, evs []history.Event) {
	type pos struct {
		broker string
		queue  int32
		off    int64
	}
	at := map[pos]string{}
	conflicts := 0
	for _, e := range evs {
		if (e.Kind != history.Recv && e.Kind != history.Drain) || e.ID == "" {
			continue
		}
		p := pos{e.Broker, e.Queue, e.Offset}
		switch id, ok := at[p]; {
		case !ok:
			at[p] = e.ID
		case id != e.ID:
			conflicts++
			if conflicts <= 5 {
				r.Fail("%s/q%d@%d read as %s and as %s", p.broker, p.queue, p.off, id, e.ID)
			}
		}
	}
	r.Add("positionConflicts", conflicts)
}

// StopAndCompareLogs waits until every broker's commit log ends where the
// master's does, stops the brokers (slaves first), and fails r unless
// their commit logs are byte-identical over their common range.
func (g *Group) StopAndCompareLogs(r *checker.Result, master int64) {
	g.T.Helper()
	ends := make([]int64, len(g.Members))
	caughtUp := WaitFor(groupSettling, 50*time.Millisecond, func() bool {
		for i := range g.Members {
			st, err := g.HAStatus(int64(i + 1))
			if err != nil {
				return false
			}
			ends[i] = st.LogEnd
		}
		return ends[0] == ends[1] && ends[1] == ends[2]
	})
	if !caughtUp {
		r.Fail("the slaves did not catch up with the master: log ends %v", ends)
	}
	for i, n := range g.Members {
		if int64(i+1) != master {
			require.NoError(g.T, n.Proc.Stop(30*time.Second), "%s shutdown (log %s)", n.Name, n.Proc.Log)
		}
	}
	m := g.Member(master)
	require.NoError(g.T, m.Proc.Stop(30*time.Second), "%s shutdown (log %s)", m.Name, m.Proc.Log)
	common := slices.Min(ends)
	ref := filepath.Join(m.Spec.Broker.Store, "commitlog")
	for i, n := range g.Members {
		if int64(i+1) == master {
			continue
		}
		off, err := firstDifference(ref, filepath.Join(n.Spec.Broker.Store, "commitlog"), common, m.Spec.Broker.SegmentBytes)
		switch {
		case err != nil:
			r.Fail("compare the commit logs of broker %d and broker %d: %v", master, i+1, err)
		case off >= 0:
			r.Fail("the commit logs of broker %d and broker %d differ at offset %d (common range [0, %d))", master, i+1, off, common)
		}
	}
	r.Add("logEnd", common)
	truncations := 0
	for _, n := range g.Members {
		b, err := os.ReadFile(filepath.Join(n.Spec.Broker.Store, "truncations.log"))
		if err == nil {
			truncations += bytes.Count(b, []byte("\n"))
		}
	}
	r.Add("truncations", truncations) // rejoins that cut an old master's unreplicated suffix
}

// firstDifference returns the first offset below end at which the commit
// logs in dirs a and b (segments of segBytes, named by their start
// offset) differ, or -1.
func firstDifference(a, b string, end, segBytes int64) (int64, error) {
	if segBytes == 0 {
		segBytes = 8 << 20
	}
	for seg := int64(0); seg < end; seg += segBytes {
		n := min(segBytes, end-seg)
		ba, err := readPrefix(filepath.Join(a, fsx.OffsetName(seg)), n)
		if err != nil {
			return -1, err
		}
		bb, err := readPrefix(filepath.Join(b, fsx.OffsetName(seg)), n)
		if err != nil {
			return -1, err
		}
		if !bytes.Equal(ba, bb) {
			i := 0
			for i < len(ba) && ba[i] == bb[i] {
				i++
			}
			return seg + int64(i), nil
		}
	}
	return -1, nil
}

// readPrefix reads the first n bytes of a file.
func readPrefix(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// ControllerLeader returns the index of the controllers' raft leader.
func (g *Group) ControllerLeader() int {
	g.T.Helper()
	var leader string
	ok := WaitFor(groupSettling, 50*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(g.T.Context(), 3*time.Second)
		defer cancel()
		var err error
		_, leader, err = g.ctl.Metadata(ctx)
		return err == nil && leader != ""
	})
	require.True(g.T, ok, "the controllers name no leader")
	i := slices.IndexFunc(g.Ctls, func(n *node[ControllerSpec]) bool { return n.Name == leader })
	require.GreaterOrEqual(g.T, i, 0, "leader %q is not a member", leader)
	return i
}
