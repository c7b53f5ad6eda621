package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Raft timeouts of the tests: short enough that elections take well under
// a second, long enough that a busy machine under -race does not lose
// leaders to missed heartbeats all the time.
const (
	testHeartbeat = 400 * time.Millisecond
	testElection  = 400 * time.Millisecond
	testLease     = 200 * time.Millisecond
	// waitFor bounds every wait for the cluster; generous on purpose (a
	// busy 2-core machine under -race), never a measure of speed.
	waitFor = 30 * time.Second
	tick    = 20 * time.Millisecond
)

// poll calls cond on the test's goroutine (so cond may use require) until
// it returns true, failing the test after waitFor.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v: %s", waitFor, what)
		}
		time.Sleep(tick)
	}
}

func testConfig(id string, peers []Peer) Config {
	return Config{
		ID:                 id,
		Peers:              peers,
		ApplyTimeout:       waitFor,
		HeartbeatTimeout:   testHeartbeat,
		ElectionTimeout:    testElection,
		LeaderLeaseTimeout: testLease,
		Logger:             slog.New(slog.DiscardHandler),
	}
}

// member is one controller of an in-memory cluster; its stores outlive a
// stop, so a restart finds its raft state.
type member struct {
	cfg   Config
	addr  raft.ServerAddress
	logs  *raft.InmemStore
	snaps *raft.InmemSnapshotStore
	trans *raft.InmemTransport // nil while stopped
	c     *Controller          // nil while stopped
}

// cluster is a controller group on raft's in-memory transport.
type cluster struct {
	t       *testing.T
	mu      sync.Mutex
	members []*member
}

func newCluster(t *testing.T, n int) *cluster { return newClusterWith(t, n, nil, nil) }

// newClusterWith starts n members; grpcAddrs, when not nil, are their
// gRPC addresses, and edit, when not nil, changes each one's Config.
func newClusterWith(t *testing.T, n int, grpcAddrs []string, edit func(*Config)) *cluster {
	t.Helper()
	cl := &cluster{t: t}
	var peers []Peer
	for i := range n {
		id := fmt.Sprintf("c%d", i+1)
		addr := raft.ServerAddress("inmem-" + id)
		peers = append(peers, Peer{ID: id, Addr: string(addr)})
		if grpcAddrs != nil {
			peers[i].GRPCAddr = grpcAddrs[i]
		}
		cl.members = append(cl.members, &member{addr: addr, logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()})
	}
	for i, m := range cl.members {
		m.cfg = testConfig(peers[i].ID, peers)
		m.cfg.GRPCAddr = peers[i].GRPCAddr
		if edit != nil {
			edit(&m.cfg)
		}
	}
	for i := range cl.members {
		cl.start(i)
	}
	t.Cleanup(func() {
		for i := range cl.members {
			cl.stop(i)
		}
	})
	return cl
}

// start runs member i over its stores on a new transport connected to the
// running members.
func (cl *cluster) start(i int) {
	cl.t.Helper()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	m := cl.members[i]
	require.Nil(cl.t, m.c, "member %d already running", i)
	_, trans := raft.NewInmemTransportWithTimeout(m.addr, 5*time.Second)
	for _, o := range cl.members {
		if o != m && o.trans != nil {
			trans.Connect(o.addr, o.trans)
			o.trans.Connect(m.addr, trans)
		}
	}
	cfg := m.cfg
	cfg.setDefaults()
	require.NoError(cl.t, cfg.validate(false))
	c, err := start(cfg, parts{logs: m.logs, stable: m.logs, snaps: m.snaps, trans: trans})
	require.NoError(cl.t, err)
	m.trans, m.c = trans, c
}

// stop closes member i like a crash seen from the others: they can no
// longer reach it.
func (cl *cluster) stop(i int) {
	cl.t.Helper()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	m := cl.members[i]
	if m.c == nil {
		return
	}
	for _, o := range cl.members {
		if o != m && o.trans != nil {
			o.trans.Disconnect(m.addr)
		}
	}
	assert.NoError(cl.t, m.c.Close())
	m.trans, m.c = nil, nil
}

func (cl *cluster) running() []*member {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var out []*member
	for _, m := range cl.members {
		if m.c != nil {
			out = append(out, m)
		}
	}
	return out
}

// leader waits until exactly one running member is the leader and returns
// its index.
func (cl *cluster) leader() int {
	cl.t.Helper()
	idx := -1
	require.Eventually(cl.t, func() bool {
		idx = -1
		n := 0
		for i, m := range cl.members {
			cl.mu.Lock()
			c := m.c
			cl.mu.Unlock()
			if c != nil && c.IsLeader() {
				idx, n = i, n+1
			}
		}
		return n == 1
	}, waitFor, tick, "no single leader")
	return idx
}

// apply runs cmd on whichever member leads, retrying while leadership
// moves. Only for commands that are idempotent (a retry after a lost
// leadership may apply them twice).
func (cl *cluster) apply(cmd any) GroupState {
	cl.t.Helper()
	g, err := cl.try(cmd)
	require.NoError(cl.t, err, "%#v", cmd)
	return g
}

// try is apply returning the FSM's refusal.
func (cl *cluster) try(cmd any) (GroupState, error) {
	cl.t.Helper()
	var (
		g   GroupState
		err error
	)
	poll(cl.t, fmt.Sprintf("apply %#v", cmd), func() bool {
		g, err = cl.members[cl.leader()].c.apply(context.Background(), cmd)
		return !errors.Is(err, ErrNotLeader)
	})
	return g, err
}

// leaderGroup reads a group on whichever member leads.
func (cl *cluster) leaderGroup(name string) GroupState {
	cl.t.Helper()
	var g GroupState
	poll(cl.t, "read "+name+" on the leader", func() bool {
		var (
			ok  bool
			err error
		)
		g, ok, err = cl.members[cl.leader()].c.LeaderGroup(context.Background(), name)
		if errors.Is(err, ErrNotLeader) {
			return false
		}
		require.NoError(cl.t, err)
		require.True(cl.t, ok, "group %q", name)
		return true
	})
	return g
}

// converged waits until every running member holds want.
func (cl *cluster) converged(want []GroupState) {
	cl.t.Helper()
	for _, m := range cl.running() {
		require.Eventually(cl.t, func() bool {
			return assert.ObjectsAreEqual(want, m.c.Groups())
		}, waitFor, tick, "member %s: have %+v, want %+v", m.cfg.ID, m.c.Groups(), want)
	}
}

func regAt(group string, id int64) RegisterReplica {
	return RegisterReplica{Group: group, ID: id, Addr: fmt.Sprintf("10.0.0.%d:10912", id)}
}

// setUpGroup registers replicas 1..3 of group "g", elects 1 and puts all
// three in sync; it returns the group's state.
func (cl *cluster) setUpGroup() GroupState {
	cl.t.Helper()
	for id := int64(1); id <= 3; id++ {
		cl.apply(regAt("g", id))
	}
	g := cl.apply(ElectMaster{Group: "g", Candidate: 1})
	require.EqualValues(cl.t, 1, g.MasterID)
	// AlterInSync bumps the in-sync epoch, so a blind retry would fail
	// with a stale epoch: retry from the state the leader has.
	poll(cl.t, "grow the in-sync set", func() bool {
		g = cl.leaderGroup("g")
		if slices.Equal(g.InSync, []int64{1, 2, 3}) {
			return true
		}
		_, err := cl.try(AlterInSync{Group: "g", MasterID: 1, MasterEpoch: g.MasterEpoch, InSyncEpoch: g.InSyncEpoch, InSync: []int64{1, 2, 3}})
		if !errors.Is(err, ErrStaleEpoch) {
			require.NoError(cl.t, err)
		}
		return false
	})
	return g
}

func TestControllerReplicatesCommands(t *testing.T) {
	cl := newCluster(t, 3)
	g := cl.setUpGroup()
	assert.EqualValues(t, 1, g.MasterEpoch)
	assert.EqualValues(t, 2, g.InSyncEpoch)
	assert.Equal(t, "10.0.0.1:10912", g.MasterAddr())
	cl.converged([]GroupState{g})

	// A follower refuses commands and names the leader. (Checked again
	// if leadership moves meanwhile; the command is one the FSM refuses,
	// so it changes nothing should the follower have become the leader.)
	var nl *NotLeaderError
	var leader *member
	poll(t, "a follower names the leader", func() bool {
		l := cl.leader()
		leader = cl.members[l]
		f := cl.members[(l+1)%3]
		if id, _ := f.c.Leader(); id != leader.cfg.ID {
			return false
		}
		_, err := f.c.Register(context.Background(), RegisterReplica{Group: "g", ID: 0, Addr: "x:1"})
		if !errors.As(err, &nl) {
			return false
		}
		assert.Contains(t, err.Error(), nl.LeaderID)
		_, _, err = f.c.LeaderGroup(context.Background(), "g")
		assert.ErrorIs(t, err, ErrNotLeader)
		return nl.LeaderID == leader.cfg.ID
	})
	assert.Equal(t, string(leader.addr), nl.LeaderAddr)
	assert.False(t, nl.MayHaveApplied)
	assert.Equal(t, g, cl.leaderGroup("g"))
	poll(t, "read an unknown group on the leader", func() bool {
		_, ok, err := cl.members[cl.leader()].c.LeaderGroup(context.Background(), "nope")
		if errors.Is(err, ErrNotLeader) {
			return false
		}
		require.NoError(t, err)
		assert.False(t, ok)
		return true
	})

	// The FSM's refusals come back typed.
	_, err := cl.try(AlterInSync{Group: "g", MasterID: 2, MasterEpoch: 1, InSyncEpoch: 2, InSync: []int64{2}})
	assert.ErrorIs(t, err, ErrNotMaster)
	_, err = cl.try(ElectMaster{Group: "nope"})
	assert.ErrorIs(t, err, ErrUnknownGroup)
	_, err = cl.try(RegisterReplica{Group: "g", ID: 0, Addr: "x:1"})
	assert.ErrorIs(t, err, ErrBadCommand)
	cl.converged([]GroupState{g}) // refusals changed nothing anywhere

	// The master dies; a new one is elected from the in-sync set.
	cl.apply(ReplicaDead{Group: "g", ID: 1})
	g2 := cl.apply(ElectMaster{Group: "g"})
	assert.EqualValues(t, 2, g2.MasterID)
	assert.EqualValues(t, 2, g2.MasterEpoch)
	assert.Equal(t, []int64{2}, g2.InSync)
	cl.converged([]GroupState{g2})
}

func TestControllerLeaderLossElectsAnotherAndKeepsState(t *testing.T) {
	cl := newCluster(t, 3)
	g := cl.setUpGroup()
	cl.converged([]GroupState{g})

	old := cl.leader()
	cl.stop(old)
	now := cl.leader()
	require.NotEqual(t, old, now)
	cl.converged([]GroupState{g})

	// The new leader applies commands; the old one catches up on return.
	h := cl.apply(regAt("h", 7))
	cl.start(old)
	cl.converged([]GroupState{g, h})
}

func TestControllerWithoutQuorumAppliesNothing(t *testing.T) {
	cl := newCluster(t, 3)
	g := cl.setUpGroup()
	cl.converged([]GroupState{g})

	// Stop two followers: the leader cannot commit and steps down once
	// its lease runs out without hearing from a majority.
	l := cl.leader()
	a, b := (l+1)%3, (l+2)%3
	cl.stop(a)
	cl.stop(b)
	survivor := cl.members[l].c
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	_, err := survivor.Register(ctx, regAt("g", 9))
	require.ErrorIs(t, err, ErrNotLeader)
	require.Eventually(t, func() bool { id, _ := survivor.Leader(); return id == "" && !survivor.IsLeader() }, waitFor, tick)
	_, err = survivor.Register(context.Background(), regAt("g", 10))
	var nl *NotLeaderError
	require.ErrorAs(t, err, &nl)
	assert.Empty(t, nl.LeaderID)
	assert.False(t, nl.MayHaveApplied)
	assert.Contains(t, err.Error(), "no leader known")
	assert.Equal(t, []GroupState{g}, survivor.Groups(), "nothing applied without a majority")

	// Once they return, nothing is lost. Replica 9 was written to the old
	// leader's log but never committed: a new leader may commit it or
	// drop it, the same way on every member. Replica 10 never reached a log.
	cl.start(a)
	cl.start(b)
	cl.leader()
	h := cl.apply(regAt("h", 1))
	gNow := cl.leaderGroup("g")
	cl.converged([]GroupState{gNow, h})
	_, has10 := gNow.Replica(10)
	assert.False(t, has10)
	if _, has9 := gNow.Replica(9); has9 {
		g.Replicas = append(g.Replicas, Replica{ID: 9, Addr: "10.0.0.9:10912", Alive: true})
	}
	assert.Equal(t, g, gNow)
}

func TestControllerCallsAfterClose(t *testing.T) {
	cl := newCluster(t, 1)
	l := cl.leader()
	c := cl.members[l].c
	cl.apply(regAt("g", 1))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Register(ctx, regAt("g", 2))
	assert.ErrorIs(t, err, context.Canceled)

	_, _, err = c.LeaderGroup(ctx, "g")
	assert.ErrorIs(t, err, context.Canceled)

	cl.stop(l)
	_, err = c.Register(context.Background(), regAt("g", 2))
	assert.ErrorIs(t, err, ErrClosed)
	_, _, err = c.LeaderGroup(context.Background(), "g")
	assert.ErrorIs(t, err, ErrClosed)
	assert.NoError(t, c.Close(), "a second Close")
	g, ok := c.Group("g")
	assert.True(t, ok, "reads of the local copy still work")
	assert.Len(t, g.Replicas, 1)
}

func TestConfigValidate(t *testing.T) {
	ok := Config{ID: "c1", BindAddr: "127.0.0.1:9000", DataDir: "/tmp/x",
		Peers: []Peer{{ID: "c1", Addr: "127.0.0.1:9000"}, {ID: "c2", Addr: "127.0.0.2:9000"}}}
	require.NoError(t, ok.Validate())
	tests := []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"no id", func(c *Config) { c.ID = "" }, "ID is empty"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "DataDir is empty"},
		{"bad bind", func(c *Config) { c.BindAddr = "nowhere" }, "BindAddr"},
		{"unspecified advertise", func(c *Config) {
			c.BindAddr = "0.0.0.0:9000"
			c.Peers[0].Addr = "0.0.0.0:9000"
		}, "not an address peers can dial"},
		{"port 0 advertised", func(c *Config) { c.BindAddr, c.Peers[0].Addr = "127.0.0.1:0", "127.0.0.1:0" }, "not an address peers can dial"},
		{"negative apply timeout", func(c *Config) { c.ApplyTimeout = -1 }, "ApplyTimeout"},
		{"lease over heartbeat", func(c *Config) { c.HeartbeatTimeout, c.LeaderLeaseTimeout = 100*time.Millisecond, 200*time.Millisecond }, "LeaderLeaseTimeout"},
		{"election under heartbeat", func(c *Config) {
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, 500*time.Millisecond, 100*time.Millisecond
		}, "ElectionTimeout"},
		{"tiny heartbeat", func(c *Config) { c.HeartbeatTimeout, c.LeaderLeaseTimeout = time.Millisecond, time.Millisecond }, "too low"},
		{"peer without addr", func(c *Config) { c.Peers[1].Addr = "" }, "needs an ID and an Addr"},
		{"peer twice", func(c *Config) { c.Peers[1].ID = "c1" }, "repeats"},
		{"self missing", func(c *Config) { c.Peers = c.Peers[1:] }, "does not list this member"},
		{"no peers", func(c *Config) { c.Peers = nil }, "does not list this member"},
		{"self elsewhere", func(c *Config) { c.Peers[0].Addr = "127.0.0.1:9001" }, "AdvertiseAddr is"},
		{"negative retain", func(c *Config) { c.SnapshotRetain = -1 }, "SnapshotRetain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			c.Peers = append([]Peer(nil), ok.Peers...)
			tt.edit(&c)
			err := c.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	// New refuses a bad configuration before touching the disk.
	bad := ok
	bad.ID = ""
	bad.DataDir = filepath.Join(t.TempDir(), "never")
	_, err := New(bad)
	require.Error(t, err)
	assert.NoDirExists(t, bad.DataDir)
}

// freeAddrs reserves n loopback addresses for members that must know each
// other's address before they start.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		require.NoError(t, l.Close())
	}
	return out
}

// TestControllerOnDiskRestart runs three members with the boltdb store,
// file snapshots and the TCP transport on loopback, restarts a follower
// (which reloads its log and snapshot from disk and catches up on what it
// missed), then restarts the whole group.
func TestControllerOnDiskRestart(t *testing.T) {
	addrs := freeAddrs(t, 3)
	dir := t.TempDir()
	var peers []Peer
	for i, a := range addrs {
		peers = append(peers, Peer{ID: fmt.Sprintf("c%d", i+1), Addr: a})
	}
	cfgs := make([]Config, 3)
	cs := make([]*Controller, 3)
	for i := range cs {
		cfgs[i] = testConfig(peers[i].ID, peers)
		cfgs[i].BindAddr = addrs[i]
		cfgs[i].DataDir = filepath.Join(dir, peers[i].ID)
	}
	startAll := func() {
		for i := range cs {
			c, err := New(cfgs[i])
			require.NoError(t, err)
			cs[i] = c
		}
	}
	closeAll := func() {
		for i, c := range cs {
			if c != nil {
				assert.NoError(t, c.Close())
				cs[i] = nil
			}
		}
	}
	t.Cleanup(closeAll)
	leader := func() *Controller {
		var l *Controller
		require.Eventually(t, func() bool {
			l = nil
			for _, c := range cs {
				if c != nil && c.IsLeader() {
					l = c
				}
			}
			return l != nil
		}, waitFor, tick, "no leader")
		return l
	}
	apply := func(cmd any) GroupState { // idempotent commands only
		var g GroupState
		poll(t, fmt.Sprintf("apply %#v", cmd), func() bool {
			var err error
			g, err = leader().apply(context.Background(), cmd)
			if errors.Is(err, ErrNotLeader) {
				return false
			}
			require.NoError(t, err)
			return true
		})
		return g
	}
	converged := func(want []GroupState) {
		for _, c := range cs {
			if c != nil {
				require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, c.Groups()) },
					waitFor, tick, "member %s: have %+v, want %+v", c.ID(), c.Groups(), want)
			}
		}
	}

	startAll()
	// A second process on a member's DataDir is refused, not left waiting.
	dup := cfgs[0]
	dup.BindAddr, dup.AdvertiseAddr = "127.0.0.1:0", addrs[0]
	_, err := New(dup)
	require.ErrorContains(t, err, "in use by another process")

	for id := int64(1); id <= 3; id++ {
		apply(regAt("g", id))
	}
	g := apply(ElectMaster{Group: "g", Candidate: 2})
	converged([]GroupState{g})

	// Restart a follower that took a snapshot: it restores the snapshot
	// from disk, then receives what it missed while down.
	var fi int
	l := leader()
	for i, c := range cs {
		if c != l {
			fi = i
			break
		}
	}
	var c *Controller
	require.NoError(t, cs[fi].Snapshot())
	require.NoError(t, cs[fi].Close())
	cs[fi] = nil
	h := apply(regAt("h", 5))
	c, err = New(cfgs[fi])
	require.NoError(t, err)
	cs[fi] = c
	converged([]GroupState{g, h})

	// Restart every member: the state comes back from their disks alone.
	closeAll()
	startAll()
	leader()
	converged([]GroupState{g, h})
	g2 := apply(ReplicaDead{Group: "g", ID: 2})
	assert.Zero(t, g2.MasterID)
	converged([]GroupState{g2, h})
}
