package controller

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/internal/faultproxy"
	"github.com/gantrymq/gantry/internal/testutil"
)

// svcCluster is a controller group on raft's in-memory transport whose
// members serve the gRPC service on loopback, with one settable clock for
// the broker timeouts.
type svcCluster struct {
	*cluster
	clock *testutil.Clock
	addrs []string

	smu  sync.Mutex
	svcs []*Service // nil while stopped
	wg   sync.WaitGroup
}

const testBrokerTimeout = 10 * time.Second

func newSvcCluster(t *testing.T, n int, edit func(*Config)) *svcCluster {
	t.Helper()
	var lis []net.Listener
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lis = append(lis, l)
		addrs = append(addrs, l.Addr().String())
	}
	clock := testutil.NewClock(time.Unix(1_700_000_000, 0))
	cl := newClusterWith(t, n, addrs, func(c *Config) {
		c.Now, c.BrokerTimeout, c.ScanInterval = clock.Now, testBrokerTimeout, 10*time.Millisecond
		if edit != nil {
			edit(c)
		}
	})
	sc := &svcCluster{cluster: cl, clock: clock, addrs: addrs, svcs: make([]*Service, n)}
	for i, m := range cl.members {
		s, err := NewService(m.c)
		require.NoError(t, err)
		sc.svcs[i] = s
		sc.wg.Go(func() { assert.NoError(t, s.Serve(lis[i])) })
	}
	t.Cleanup(func() { // before the cluster's own cleanup, which closes the members
		for i := range sc.svcs {
			sc.stop(i)
		}
		sc.wg.Wait()
	})
	return sc
}

// stop closes member i's service, then the member.
func (sc *svcCluster) stop(i int) {
	sc.smu.Lock()
	s := sc.svcs[i]
	sc.svcs[i] = nil
	sc.smu.Unlock()
	if s != nil {
		assert.NoError(sc.t, s.Close(context.Background()))
	}
	sc.cluster.stop(i)
}

func (sc *svcCluster) svc(i int) *Service {
	sc.smu.Lock()
	defer sc.smu.Unlock()
	return sc.svcs[i]
}

// scanned waits until member i's service has run two more scans: one of
// them began after the call.
func (sc *svcCluster) scanned(i int) {
	sc.t.Helper()
	s := sc.svc(i)
	from := s.scans.Load()
	require.Eventually(sc.t, func() bool { return s.scans.Load() >= from+2 }, waitFor, time.Millisecond)
}

func (sc *svcCluster) client(addrs ...string) *Client {
	sc.t.Helper()
	if addrs == nil {
		addrs = sc.addrs
	}
	c, err := NewClient(ClientConfig{Addrs: addrs, Attempts: 100, Backoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	require.NoError(sc.t, err)
	sc.t.Cleanup(func() { assert.NoError(sc.t, c.Close()) })
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return c
}

// beat sends heartbeats of the brokers: id → (last epoch, log end).
func beat(t *testing.T, c *Client, group string, progress map[int64][2]int64) GroupStatus {
	t.Helper()
	var g GroupStatus
	for _, id := range slices.Sorted(func(yield func(int64) bool) {
		for id := range progress {
			if !yield(id) {
				return
			}
		}
	}) {
		p := progress[id]
		var err error
		g, err = c.BrokerHeartbeat(ctx(t), BrokerReport{Group: group, BrokerID: id, LastEpoch: int32(p[0]), LogEnd: p[1]})
		require.NoError(t, err, "heartbeat of %d", id)
	}
	return g
}

// groupWhen polls the group on the leader until cond holds.
func groupWhen(t *testing.T, c *Client, group, what string, cond func(GroupStatus) bool) GroupStatus {
	t.Helper()
	var g GroupStatus
	poll(t, what, func() bool {
		var err error
		g, err = c.GetGroup(ctx(t), group)
		require.NoError(t, err)
		return cond(g)
	})
	return g
}

// awaitFailover keeps the brokers of alive heartbeating while the clock
// moves on a second at a time, until the group satisfies cond. (Should the
// raft leader change meanwhile, the new one gives every broker a full
// timeout again: the clock keeps moving until it runs out.)
func awaitFailover(t *testing.T, sc *svcCluster, c *Client, alive map[int64][2]int64, what string, cond func(GroupStatus) bool) GroupStatus {
	t.Helper()
	return groupWhen(t, c, "g", what, func(g GroupStatus) bool {
		if cond(g) {
			return true
		}
		beat(t, c, "g", alive)
		sc.clock.Advance(time.Second)
		return false
	})
}

// setUpBrokers registers brokers 1..3 of group "g" (1 becomes the master:
// the first to register, and the lowest id), and makes all three in sync.
func setUpBrokers(t *testing.T, c *Client) GroupStatus {
	t.Helper()
	for id := int64(1); id <= 3; id++ {
		_, err := c.RegisterBroker(ctx(t), "g", id, "10.0.0."+string(rune('0'+id))+":10912", "10.0.0."+string(rune('0'+id))+":10911")
		require.NoError(t, err)
	}
	g := groupWhen(t, c, "g", "a first master", func(g GroupStatus) bool { return g.MasterID != 0 })
	require.EqualValues(t, 1, g.MasterID)
	require.EqualValues(t, 1, g.MasterEpoch)
	g, err := c.AlterSyncStateSet(ctx(t), "g", 1, g.MasterEpoch, g.InSyncEpoch, []int64{1, 2, 3})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3}, g.InSync)
	return g
}

func TestServiceHeartbeatsAndFailover(t *testing.T) {
	sc := newSvcCluster(t, 3, nil)
	c := sc.client()
	g := setUpBrokers(t, c)
	assert.Equal(t, "10.0.0.1:10912", g.MasterAddr())

	// Heartbeats every 6 s (of the clock) keep all three alive.
	all := map[int64][2]int64{1: {1, 300}, 2: {1, 100}, 3: {1, 200}}
	for range 4 {
		g = beat(t, c, "g", all)
		sc.clock.Advance(testBrokerTimeout * 6 / 10)
		sc.scanned(sc.leader())
	}
	g, err := c.GetGroup(ctx(t), "g")
	require.NoError(t, err)
	for _, r := range g.Replicas {
		assert.True(t, r.Alive, "broker %d", r.ID)
	}
	assert.EqualValues(t, 1, g.MasterID)
	assert.EqualValues(t, 1, g.MasterEpoch)
	require.Contains(t, g.Heartbeats, int64(3))
	assert.EqualValues(t, 200, g.Heartbeats[3].LogEnd)

	// The master falls silent: after the timeout it is dead, and the
	// in-sync broker with the greatest log end (same last epoch) wins.
	delete(all, 1)
	g = awaitFailover(t, sc, c, all, "a new master", func(g GroupStatus) bool { return g.MasterID != 1 && g.MasterID != 0 })
	assert.EqualValues(t, 3, g.MasterID)
	assert.EqualValues(t, 2, g.MasterEpoch)
	assert.Equal(t, []int64{3}, g.InSync)
	assert.Equal(t, "10.0.0.3:10912", g.MasterAddr())
	r1, _ := g.Replica(1)
	assert.False(t, r1.Alive)

	// The followers learn it from their heartbeats' answers, and the old
	// master, heartbeating again, is alive but not the master.
	hb := beat(t, c, "g", map[int64][2]int64{2: {1, 100}})
	assert.EqualValues(t, 3, hb.MasterID)
	hb = beat(t, c, "g", map[int64][2]int64{1: {1, 300}})
	r1, _ = hb.Replica(1)
	assert.True(t, r1.Alive)
	assert.EqualValues(t, 3, hb.MasterID)
	assert.EqualValues(t, 2, hb.MasterEpoch)
}

func TestServiceElectsOnlyFromInSyncSet(t *testing.T) {
	sc := newSvcCluster(t, 3, nil)
	c := sc.client()
	g := setUpBrokers(t, c)
	g, err := c.AlterSyncStateSet(ctx(t), "g", 1, g.MasterEpoch, g.InSyncEpoch, []int64{1, 2})
	require.NoError(t, err)

	// 3 is ahead on every count but out of sync: 2 wins.
	alive := map[int64][2]int64{2: {1, 100}, 3: {5, 900}}
	g = awaitFailover(t, sc, c, alive, "a new master", func(g GroupStatus) bool { return g.MasterID > 1 })
	assert.EqualValues(t, 2, g.MasterID)
	assert.EqualValues(t, 2, g.MasterEpoch)

	// 2 dies too: no alive in-sync broker, so no master, however long.
	g = awaitFailover(t, sc, c, map[int64][2]int64{3: {5, 900}}, "2 dead", func(g GroupStatus) bool { r, _ := g.Replica(2); return !r.Alive })
	sc.scanned(sc.leader())
	sc.scanned(sc.leader())
	g, err = c.GetGroup(ctx(t), "g")
	require.NoError(t, err)
	assert.Zero(t, g.MasterID)
	assert.EqualValues(t, 2, g.MasterEpoch)

	_, err = c.ElectMaster(ctx(t), "g", 0, false)
	assert.ErrorIs(t, err, ErrNoCandidate)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
	_, err = c.ElectMaster(ctx(t), "g", 3, false)
	assert.ErrorIs(t, err, ErrNotInSync)
	assert.Contains(t, err.Error(), "an unclean election may pick it")

	// An unclean election may.
	g, err = c.ElectMaster(ctx(t), "g", 0, true)
	require.NoError(t, err)
	assert.EqualValues(t, 3, g.MasterID)
	assert.EqualValues(t, 3, g.MasterEpoch)
}

// With UncleanElection the leader's own elections may leave the in-sync set.
func TestServiceUncleanSetting(t *testing.T) {
	sc := newSvcCluster(t, 3, func(c *Config) { c.UncleanElection = true })
	c := sc.client()
	g := setUpBrokers(t, c)
	_, err := c.AlterSyncStateSet(ctx(t), "g", 1, g.MasterEpoch, g.InSyncEpoch, []int64{1})
	require.NoError(t, err)
	alive := map[int64][2]int64{2: {1, 100}, 3: {1, 900}}
	g = awaitFailover(t, sc, c, alive, "an unclean master", func(g GroupStatus) bool { return g.MasterID > 1 })
	assert.EqualValues(t, 3, g.MasterID, "the greatest log end")
}

// notLeaderInfo returns the ErrorInfo of a not-leader answer.
func notLeaderInfo(t *testing.T, err error) *errdetails.ErrorInfo {
	t.Helper()
	st, ok := status.FromError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, codes.Unavailable, st.Code(), "%v", err)
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			return i
		}
	}
	t.Fatalf("no ErrorInfo in %v", err)
	return nil
}

func TestServiceFollowerNamesLeader(t *testing.T) {
	sc := newSvcCluster(t, 3, nil)
	var leader, follower int
	poll(t, "a follower that knows the leader", func() bool {
		leader = sc.leader()
		follower = (leader + 1) % 3
		id, _ := sc.members[follower].c.Leader()
		return id == sc.members[leader].cfg.ID
	})
	cc, err := grpc.NewClient(sc.addrs[follower], grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	_, err = gantryv1.NewControllerClient(cc).GetGroup(ctx(t), &gantryv1.GetBrokerGroupRequest{Group: "g"})
	info := notLeaderInfo(t, err)
	assert.Equal(t, ReasonNotLeader, info.Reason)
	assert.Equal(t, sc.addrs[leader], info.Metadata["leader_addr"])
	assert.Equal(t, sc.members[leader].cfg.ID, info.Metadata["leader_id"])
	assert.Contains(t, status.Convert(err).Message(), sc.addrs[leader])

	// Any member describes the group.
	md, err := gantryv1.NewControllerClient(cc).GetControllerMetadata(ctx(t), &gantryv1.GetControllerMetadataRequest{})
	require.NoError(t, err)
	assert.Equal(t, "Follower", md.SelfState)
	assert.Equal(t, sc.addrs[leader], md.LeaderGrpcAddr)
	assert.Len(t, md.Members, 3)

	// A client given only the follower reaches the leader.
	c := sc.client(sc.addrs[follower])
	_, err = c.RegisterBroker(ctx(t), "g", 1, "10.0.0.1:10912", "")
	require.NoError(t, err)
	assert.Equal(t, sc.addrs[sc.leader()], c.Leader())

	members, lid, err := c.Metadata(ctx(t))
	require.NoError(t, err)
	require.Len(t, members, 3)
	assert.Equal(t, sc.members[sc.leader()].cfg.ID, lid)
	for i, m := range members {
		assert.Equal(t, sc.addrs[i], m.GRPCAddr)
		assert.NoError(t, m.Err)
		assert.NotEmpty(t, m.State)
	}
}

func TestServiceLeaderLossRestartsLiveness(t *testing.T) {
	sc := newSvcCluster(t, 3, nil)
	c := sc.client()
	setUpBrokers(t, c)
	all := map[int64][2]int64{1: {1, 300}, 2: {1, 100}, 3: {1, 200}}
	beat(t, c, "g", all)

	old := sc.leader()
	sc.stop(old)
	// The client finds the new leader by itself.
	g, err := c.GetGroup(ctx(t), "g")
	require.NoError(t, err)
	assert.EqualValues(t, 1, g.MasterID)
	now := sc.leader()
	require.NotEqual(t, old, now)
	assert.Equal(t, sc.addrs[now], c.Leader())
	sc.scanned(now) // its liveness has started: every broker's timeout runs from here

	// Nine tenths of a timeout without one heartbeat: nobody is dead.
	sc.clock.Advance(testBrokerTimeout * 9 / 10)
	sc.scanned(now)
	g, err = c.GetGroup(ctx(t), "g")
	require.NoError(t, err)
	for _, r := range g.Replicas {
		assert.True(t, r.Alive, "broker %d judged on the old leader's heartbeats", r.ID)
	}
	assert.Empty(t, g.Heartbeats, "the old leader's heartbeats are not carried over")

	// Then the master alone stays silent past its timeout.
	delete(all, 1)
	beat(t, c, "g", all)
	sc.clock.Advance(testBrokerTimeout * 2 / 10)
	g = awaitFailover(t, sc, c, all, "a new master", func(g GroupStatus) bool { return g.MasterID > 1 })
	assert.EqualValues(t, 3, g.MasterID)
	assert.EqualValues(t, 2, g.MasterEpoch)
}

func TestServiceBadInput(t *testing.T) {
	sc := newSvcCluster(t, 1, nil)
	c := sc.client()
	_, err := c.RegisterBroker(ctx(t), "g", 1, "10.0.0.1:10912", "")
	require.NoError(t, err)
	long := strings.Repeat("x", MaxNameLen+1)
	tests := []struct {
		name string
		call func() error
		is   error
		code codes.Code
		want string
	}{
		{"unknown group", func() error { _, err := c.GetGroup(ctx(t), "nope"); return err }, ErrUnknownGroup, codes.NotFound, `"nope"`},
		{"heartbeat of an unknown group", func() error {
			_, err := c.BrokerHeartbeat(ctx(t), BrokerReport{Group: "nope", BrokerID: 1})
			return err
		}, ErrUnknownGroup, codes.NotFound, "register the broker first"},
		{"heartbeat of an unknown broker", func() error {
			_, err := c.BrokerHeartbeat(ctx(t), BrokerReport{Group: "g", BrokerID: 9})
			return err
		}, ErrUnknownReplica, codes.NotFound, "replica 9"},
		{"negative offset", func() error {
			_, err := c.BrokerHeartbeat(ctx(t), BrokerReport{Group: "g", BrokerID: 1, LogEnd: -1})
			return err
		}, ErrInvalidRequest, codes.InvalidArgument, "negative"},
		{"long group name", func() error { _, err := c.RegisterBroker(ctx(t), long, 1, "a:1", ""); return err },
			ErrInvalidRequest, codes.InvalidArgument, "group name of 256 bytes, want 1..255"},
		{"empty group name", func() error { _, err := c.GetSyncStateSet(ctx(t), ""); return err },
			ErrInvalidRequest, codes.InvalidArgument, "group name of 0 bytes"},
		{"long address", func() error { _, err := c.RegisterBroker(ctx(t), "g", 1, "a:1", long); return err },
			ErrInvalidRequest, codes.InvalidArgument, "service_addr of 256 bytes"},
		{"no address", func() error { _, err := c.RegisterBroker(ctx(t), "g", 1, "", ""); return err },
			ErrInvalidRequest, codes.InvalidArgument, "ha_addr of 0 bytes"},
		{"broker id 0", func() error { _, err := c.RegisterBroker(ctx(t), "g", 0, "a:1", ""); return err },
			ErrInvalidRequest, codes.InvalidArgument, "broker id 0, want > 0"},
		{"in-sync set too large", func() error {
			_, err := c.AlterSyncStateSet(ctx(t), "g", 1, 1, 1, make([]int64, MaxReplicas+1))
			return err
		}, ErrInvalidRequest, codes.InvalidArgument, "sync_state_set of 17 ids, want 1..16"},
		{"stale epoch", func() error { _, err := c.AlterSyncStateSet(ctx(t), "g", 1, 1, 0, []int64{1}); return err },
			ErrStaleEpoch, codes.FailedPrecondition, "in-sync epoch 0"},
		{"not the master", func() error { _, err := c.AlterSyncStateSet(ctx(t), "g", 2, 1, 1, []int64{2}); return err },
			ErrNotMaster, codes.FailedPrecondition, "replica 2 asked"},
		{"unknown candidate", func() error { _, err := c.ElectMaster(ctx(t), "g", 7, false); return err },
			ErrUnknownReplica, codes.NotFound, "candidate 7"},
	}
	groupWhen(t, c, "g", "a master", func(g GroupStatus) bool { return g.MasterID == 1 })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.is)
			assert.Equal(t, tt.code, status.Code(err), "%v", err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}

	// A request over the size limit is refused by gRPC before it is read.
	cc, err := grpc.NewClient(sc.addrs[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	_, err = gantryv1.NewControllerClient(cc).RegisterBroker(ctx(t), &gantryv1.ControllerRegisterBrokerRequest{
		Group: "g", BrokerId: 1, HaAddr: strings.Repeat("x", MaxRequestBytes)})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
}

func TestPickMaster(t *testing.T) {
	g := GroupState{Name: "g", MasterEpoch: 3, InSync: []int64{1, 2, 3},
		Replicas: []Replica{{ID: 1}, {ID: 2, Alive: true}, {ID: 3, Alive: true}, {ID: 4, Alive: true}}}
	hb := func(epoch int32, end int64) Heartbeat { return Heartbeat{LastEpoch: epoch, LogEnd: end} }
	tests := []struct {
		name    string
		edit    func(g *GroupState)
		beats   map[int64]Heartbeat
		unclean bool
		want    int64
		outside bool
	}{
		{"highest last epoch first", nil, map[int64]Heartbeat{1: hb(9, 9), 2: hb(3, 10), 3: hb(2, 99), 4: hb(9, 99)}, false, 2, false},
		{"then greatest log end", nil, map[int64]Heartbeat{2: hb(3, 10), 3: hb(3, 11)}, false, 3, false},
		{"then lowest id", nil, map[int64]Heartbeat{2: hb(3, 10), 3: hb(3, 10)}, false, 2, false},
		{"no heartbeat ranks last", nil, map[int64]Heartbeat{3: hb(0, 0)}, false, 3, false},
		{"none in sync alive", func(g *GroupState) { g.InSync = []int64{1} }, map[int64]Heartbeat{4: hb(9, 9)}, false, 0, false},
		{"unclean leaves the set", func(g *GroupState) { g.InSync = []int64{1} }, map[int64]Heartbeat{3: hb(1, 1), 4: hb(9, 9)}, true, 4, true},
		{"unclean prefers the set", nil, map[int64]Heartbeat{4: hb(9, 9)}, true, 2, false},
		{"a fresh group takes any alive", func(g *GroupState) { g.MasterEpoch, g.InSync = 0, nil }, map[int64]Heartbeat{4: hb(0, 5)}, false, 4, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := g.clone()
			if tt.edit != nil {
				tt.edit(&g)
			}
			id, outside := pickMaster(g, tt.beats, tt.unclean)
			assert.Equal(t, tt.want, id)
			assert.Equal(t, tt.outside, outside)
		})
	}
}

func TestClientConfigAndClose(t *testing.T) {
	for _, tt := range []struct {
		cfg  ClientConfig
		want string
	}{
		{ClientConfig{}, "no controller addresses"},
		{ClientConfig{Addrs: []string{""}}, "an empty controller address"},
		{ClientConfig{Addrs: []string{"a:1"}, Attempts: -1}, "Attempts -1"},
		{ClientConfig{Addrs: []string{"a:1"}, Backoff: time.Second, MaxBackoff: time.Millisecond}, "MaxBackoff"},
	} {
		_, err := NewClient(tt.cfg)
		assert.ErrorContains(t, err, tt.want)
	}
	// Nobody listens: the attempts run out, each error named.
	addr := freeAddrs(t, 1)[0]
	c, err := NewClient(ClientConfig{Addrs: []string{addr}, Attempts: 3, Backoff: time.Millisecond, MaxBackoff: time.Millisecond})
	require.NoError(t, err)
	_, err = c.GetGroup(ctx(t), "g")
	assert.ErrorContains(t, err, "no leader answered after 3 attempts")
	assert.ErrorContains(t, err, addr)
	// A context that ends stops the retries.
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.GetGroup(cctx, "g")
	assert.True(t, errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled, "%v", err)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	_, err = c.GetGroup(ctx(t), "g")
	assert.ErrorIs(t, err, ErrClientClosed)
}

func TestConfigValidateGRPC(t *testing.T) {
	ok := Config{ID: "c1", BindAddr: "127.0.0.1:9000", DataDir: "/tmp/x", GRPCAddr: "127.0.0.1:9100",
		Peers: []Peer{{ID: "c1", Addr: "127.0.0.1:9000", GRPCAddr: "127.0.0.1:9100"}, {ID: "c2", Addr: "127.0.0.2:9000", GRPCAddr: "127.0.0.2:9100"}}}
	require.NoError(t, ok.Validate())
	wild := ok
	wild.GRPCAddr = ":9100"
	require.NoError(t, wild.Validate(), "listening on every interface, advertising one")
	tests := []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"peer without", func(c *Config) { c.Peers[1].GRPCAddr = "" }, "peer c2: gRPC address \"\""},
		{"peer unspecified", func(c *Config) { c.Peers[1].GRPCAddr = "0.0.0.0:9100" }, "not an address clients can dial"},
		{"peer port 0", func(c *Config) { c.Peers[1].GRPCAddr = "127.0.0.2:0" }, "not an address clients can dial"},
		{"repeated", func(c *Config) { c.Peers[1].GRPCAddr = "127.0.0.1:9100" }, "repeats gRPC address"},
		{"self elsewhere", func(c *Config) { c.Peers[0].GRPCAddr = "127.0.0.1:9101" }, "GRPCAddr is 127.0.0.1:9100"},
		{"self other port", func(c *Config) { c.GRPCAddr = ":9101" }, "listens on port 9101"},
		{"bad listen", func(c *Config) { c.GRPCAddr = "nowhere" }, "GRPCAddr \"nowhere\""},
		{"no listen", func(c *Config) { c.GRPCAddr = "" }, "GRPCAddr (this member's listen address) is empty"},
		{"negative broker timeout", func(c *Config) { c.BrokerTimeout = -1 }, "BrokerTimeout"},
		{"scan over timeout", func(c *Config) { c.BrokerTimeout, c.ScanInterval = time.Second, 2*time.Second }, "ScanInterval 2s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			c.Peers = slices.Clone(ok.Peers)
			tt.edit(&c)
			assert.ErrorContains(t, c.Validate(), tt.want)
		})
	}
}

func TestParsePeers(t *testing.T) {
	p, err := ParsePeers("c1=127.0.0.1:9878=127.0.0.1:9879, c2=h2:9878=h2:9879;c3=h3:9878")
	require.NoError(t, err)
	assert.Equal(t, []Peer{{"c1", "127.0.0.1:9878", "127.0.0.1:9879"}, {"c2", "h2:9878", "h2:9879"}, {"c3", "h3:9878", ""}}, p)
	for _, bad := range []string{"", "c1", "c1=", "=a:1", "c1=a:1=", "c1=a:1=b:1=c:1"} {
		_, err := ParsePeers(bad)
		assert.ErrorContains(t, err, "id=raftAddr=grpcAddr", "%q", bad)
	}
}

// pointer is a member that always says another is the leader.
type pointer struct {
	gantryv1.UnimplementedControllerServer
	to    string
	calls atomic.Int64
}

func (p *pointer) GetGroup(context.Context, *gantryv1.GetBrokerGroupRequest) (*gantryv1.BrokerGroupResponse, error) {
	p.calls.Add(1)
	st, err := status.New(codes.Unavailable, "not the leader").WithDetails(&errdetails.ErrorInfo{
		Domain: ErrorDomain, Reason: ReasonNotLeader, Metadata: map[string]string{"leader_id": "x", "leader_addr": p.to}})
	if err != nil {
		return nil, err
	}
	return nil, st.Err()
}

// Two members naming each other as the leader (a stale view during an
// election) cost the client its bounded attempts, not a loop.
func TestClientRedirectsAreBounded(t *testing.T) {
	var lis [2]net.Listener
	var ps [2]*pointer
	for i := range lis {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lis[i] = l
	}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // cleanups run last first: after both Stops
	for i := range lis {
		ps[i] = &pointer{to: lis[1-i].Addr().String()}
		gs := grpc.NewServer()
		gantryv1.RegisterControllerServer(gs, ps[i])
		wg.Go(func() { _ = gs.Serve(lis[i]) })
		t.Cleanup(gs.Stop)
	}
	c, err := NewClient(ClientConfig{Addrs: []string{lis[0].Addr().String()}, Attempts: 6, Backoff: time.Millisecond, MaxBackoff: time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.GetGroup(ctx(t), "g")
	var nl *NotLeaderError
	require.ErrorAs(t, err, &nl)
	assert.ErrorContains(t, err, "after 6 attempts")
	assert.EqualValues(t, 3, ps[0].calls.Load())
	assert.EqualValues(t, 3, ps[1].calls.Load())
	assert.Empty(t, c.Leader())
}

// Behind a proxy or NAT (the addresses a client is given are not the
// members' own), a client asks each given address before it follows a
// not-leader answer to the leader's own address: it reaches the leader
// through its proxy.
func TestClientPrefersTheGivenAddresses(t *testing.T) {
	sc := newSvcCluster(t, 3, nil)
	var proxies []string
	for _, a := range sc.addrs {
		p, err := faultproxy.Start(faultproxy.Config{Target: a})
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		proxies = append(proxies, p.Addr())
	}
	leader := sc.leader()
	follower := (leader + 1) % 3
	poll(t, "a follower that knows the leader", func() bool {
		id, _ := sc.members[follower].c.Leader()
		return id == sc.members[leader].cfg.ID
	})
	for range 4 { // a client starts at a random address: most start at a follower
		c := sc.client(proxies[follower], proxies[(leader+2)%3], proxies[leader])
		_, err := c.RegisterBroker(ctx(t), "g", 1, "10.0.0.1:10912", "")
		require.NoError(t, err)
		assert.Equal(t, proxies[leader], c.Leader(), "the leader is reached through its proxy")
	}

	// Given only a follower's proxy, the client follows the named address.
	c := sc.client(proxies[follower])
	_, err := c.GetGroup(ctx(t), "g")
	require.NoError(t, err)
	assert.Equal(t, sc.addrs[leader], c.Leader())
}
