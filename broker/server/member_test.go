package server_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/replication/controller"
	"github.com/gantrymq/gantry/replication/epoch"
)

const failoverWait = 60 * time.Second

func freeAddr(t *testing.T) string {
	t.Helper()
	l := loopback(t)
	defer l.Close()
	return l.Addr().String()
}

// startController starts a one-member controller with short timeouts and
// returns its gRPC address.
func startController(t *testing.T, unclean bool, edit ...func(*controller.Config)) string {
	t.Helper()
	raftAddr, grpcAddr := freeAddr(t), freeAddr(t)
	cfg := controller.Config{
		ID: "c1", BindAddr: raftAddr, DataDir: t.TempDir(), GRPCAddr: grpcAddr,
		Peers:            []controller.Peer{{ID: "c1", Addr: raftAddr, GRPCAddr: grpcAddr}},
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond,
		BrokerTimeout: 1500 * time.Millisecond, ScanInterval: 50 * time.Millisecond, UncleanElection: unclean,
		Logger: slog.New(slog.DiscardHandler),
	}
	for _, e := range edit {
		e(&cfg)
	}
	c, err := controller.New(cfg)
	require.NoError(t, err)
	svc, err := controller.NewService(c)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", grpcAddr)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- svc.Serve(lis) }()
	t.Cleanup(func() {
		assert.NoError(t, svc.Close(context.Background()))
		assert.NoError(t, <-done)
		assert.NoError(t, c.Close())
	})
	return grpcAddr
}

// memberConfig is broker id's configuration in a controller-mode group.
func memberConfig(t *testing.T, ctl, dir string, id int64, role broker.BrokerRole) server.Config {
	bc := broker.Config{
		BrokerName: "g", StorePathRootDir: dir, BrokerRole: role, BrokerID: id, InSyncReplicas: 2,
		SlaveTimeout: 2 * time.Second, SlaveReadEnable: true,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})).With("id", id),
	}
	bc.EnableControllerMode, bc.ControllerAddr = true, []string{ctl}
	bc.BrokerHeartbeatInterval, bc.MasterLease = 100*time.Millisecond, 600*time.Millisecond
	return server.Config{Broker: bc}
}

type group struct {
	t    *testing.T
	cfgs []server.Config
	ms   []*server.Member // by id-1; nil while down
}

func startMembers(t *testing.T, ctl string, n int, role broker.BrokerRole) *group {
	g := &group{t: t}
	for id := 1; id <= n; id++ {
		g.cfgs = append(g.cfgs, memberConfig(t, ctl, filepath.Join(t.TempDir(), "store"), int64(id), role))
		g.ms = append(g.ms, nil)
		g.start(id)
	}
	t.Cleanup(func() {
		for _, m := range g.ms {
			if m != nil {
				assert.NoError(t, m.Close(context.Background()))
			}
		}
	})
	return g
}

// start starts broker id, on new ports after a restart (its registration
// tells the controller its new HA address).
func (g *group) start(id int) {
	g.t.Helper()
	cfg := g.cfgs[id-1]
	cfg.GRPCListener, cfg.HTTPListener, cfg.RemotingListener = loopback(g.t), loopback(g.t), loopback(g.t)
	m, err := server.StartMember(g.t.Context(), cfg)
	require.NoError(g.t, err)
	g.ms[id-1] = m
}

// master waits for a master in epoch ep at least and returns its id.
func (g *group) master(ep int32) int {
	g.t.Helper()
	id := 0
	require.Eventually(g.t, func() bool {
		for i, m := range g.ms {
			if m != nil && m.IsMaster() && m.Epoch() >= ep {
				id = i + 1
				return true
			}
		}
		return false
	}, failoverWait, 10*time.Millisecond, "no master in epoch %d", ep)
	return id
}

func body(i int) []byte { return fmt.Appendf(nil, "m%04d", i) }

// send sends message i through member id's broker; it retries while the
// group settles (a new master waits for its slaves to join the in-sync
// set).
func (g *group) send(id, i int) {
	g.t.Helper()
	var last error
	require.Eventually(g.t, func() bool {
		srv := g.ms[id-1].Server()
		if srv == nil {
			return false
		}
		_, last = srv.Broker().Send(g.t.Context(), "T", []*message.Message{{Topic: "T", QueueID: int32(i % 2), Body: body(i)}})
		return last == nil
	}, failoverWait, 20*time.Millisecond, "send %d to %d: %v", i, id, &last)
}

// bodies returns what member id's broker holds in T, by queue, once its
// consume queues hold its whole log.
func (g *group) bodies(id int) [2][]string {
	g.t.Helper()
	var out [2][]string
	b := g.ms[id-1].Server().Broker()
	require.Eventually(g.t, func() bool { return b.DispatchedOffset() >= b.ReplicaLog().MaxOffset() }, failoverWait, time.Millisecond)
	for q := range int32(2) {
		for from := int64(0); ; {
			res, err := b.Pull(g.t.Context(), broker.PullRequest{Topic: "T", QueueID: q, Offset: from, MaxMsgs: broker.MaxPullMsgs})
			require.NoError(g.t, err)
			n := len(res.Records)
			for _, r := range res.Records {
				m, _, err := message.Decode(r.B)
				require.NoError(g.t, err)
				out[q] = append(out[q], string(m.Body))
			}
			res.Release()
			if n == 0 {
				break
			}
			from += int64(n)
		}
	}
	return out
}

func (g *group) waitTopic(id int) {
	g.t.Helper()
	require.Eventually(g.t, func() bool {
		srv := g.ms[id-1].Server()
		if srv == nil {
			return false
		}
		_, ok := srv.Broker().Topic("T")
		return ok
	}, failoverWait, 10*time.Millisecond, "broker %d never had topic T", id)
}

// sameLogs checks that id's log is byte for byte master's.
func (g *group) sameLogs(master, id int) {
	g.t.Helper()
	var ml, sl interface {
		MaxOffset() int64
	}
	require.Eventually(g.t, func() bool {
		ms, ss := g.ms[master-1].Server(), g.ms[id-1].Server()
		if ms == nil || ss == nil {
			return false
		}
		ml, sl = ms.Broker().ReplicaLog(), ss.Broker().ReplicaLog()
		return ml.MaxOffset() == sl.MaxOffset()
	}, failoverWait, 10*time.Millisecond, "broker %d never caught up with %d", id, master)
	a, b := g.ms[master-1].Server().Broker().ReplicaLog(), g.ms[id-1].Server().Broker().ReplicaLog()
	end, seg := a.MaxOffset(), a.SegmentBytes()
	for off := b.MinOffset(); off < end; {
		n := min(end-off, seg-off%seg)
		ra, err := a.Read(off, int(n))
		require.NoError(g.t, err)
		rb, err := b.Read(off, int(n))
		require.NoError(g.t, err)
		assert.True(g.t, bytes.Equal(ra.B, rb.B), "bytes differ in [%d, %d)", off, off+n)
		ra.Release()
		rb.Release()
		off += n
	}
}

func TestMemberFailoverKeepsEveryAck(t *testing.T) {
	ctl := startController(t, false)
	g := startMembers(t, ctl, 3, broker.SyncMaster)
	m1 := g.master(1)
	require.NoError(t, g.ms[m1-1].Server().Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}))
	for id := 1; id <= 3; id++ {
		g.waitTopic(id)
	}
	var want [2][]string
	for i := range 40 {
		g.send(m1, i)
		want[i%2] = append(want[i%2], string(body(i)))
	}

	require.NoError(t, g.ms[m1-1].Kill())
	g.ms[m1-1] = nil
	m2 := g.master(2)
	assert.NotEqual(t, m1, m2)
	for i := 40; i < 80; i++ {
		g.send(m2, i)
		want[i%2] = append(want[i%2], string(body(i)))
	}
	var got [2][]string
	require.Eventually(t, func() bool { // dispatch follows the acks
		got = g.bodies(m2)
		return len(got[0])+len(got[1]) >= 80
	}, failoverWait, 10*time.Millisecond)
	assert.Equal(t, want, got, "every acknowledged message, once, in order")
	entries := g.ms[m2-1].Epochs()
	require.Len(t, entries, 2)
	assert.Equal(t, []int32{1, 2}, []int32{entries[0].Epoch, entries[1].Epoch})

	// The old master rejoins as a slave of the new one.
	g.start(m1)
	for id := 1; id <= 3; id++ {
		if id != m2 {
			g.sameLogs(m2, id)
		}
	}
	assert.False(t, g.ms[m1-1].IsMaster())
	assert.Equal(t, int32(2), g.ms[m1-1].Epoch())
}

// An ASYNC_MASTER acknowledges what its slaves may not hold: after an
// unclean failover the old master's extra suffix is cut when it rejoins,
// and the cut is on record in truncations.log.
func TestMemberRejoinTruncatesTheOldMastersSuffix(t *testing.T) {
	ctl := startController(t, true)
	g := startMembers(t, ctl, 2, broker.AsyncMaster)
	m1 := g.master(1)
	s := 3 - m1
	require.NoError(t, g.ms[m1-1].Server().Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}))
	g.waitTopic(s)
	for i := range 10 {
		g.send(m1, i)
	}
	g.sameLogs(m1, s)
	require.NoError(t, g.ms[s-1].Close(t.Context())) // the slave goes; the master writes on alone
	g.ms[s-1] = nil
	for i := 10; i < 20; i++ {
		g.send(m1, i)
	}
	require.NoError(t, g.ms[m1-1].Kill())
	g.ms[m1-1] = nil

	g.start(s) // the only broker left: elected uncleanly
	require.Equal(t, s, g.master(2))
	for i := 20; i < 25; i++ {
		g.send(s, i)
	}
	g.start(m1)
	g.sameLogs(s, m1)
	var all []string
	require.Eventually(t, func() bool { // its consume queues follow its log
		bodies := g.bodies(m1)
		all = slices.Concat(bodies[0], bodies[1])
		return len(all) >= 15
	}, failoverWait, 10*time.Millisecond)
	assert.Len(t, all, 15, "m0000..m0009 and m0020..m0024: %v", all)
	for i := 10; i < 20; i++ {
		assert.NotContains(t, all, string(body(i)))
	}
	rec, err := os.ReadFile(filepath.Join(g.cfgs[m1-1].Broker.StorePathRootDir, "truncations.log"))
	require.NoError(t, err)
	assert.Contains(t, string(rec), `"records":10`)
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(string(rec)), "\n")+1, "one truncation: %s", rec)
	ents := g.ms[m1-1].Epochs()
	require.Len(t, ents, 2)
	assert.Equal(t, []epoch.Entry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: ents[1].StartOffset}}, ents)
}

// A slave whose disk was emptied while the master's retention deleted its
// first segments copies the master's log from the master's first offset:
// its queues answer at the master's queue offsets.
func TestMemberResyncsFromTheMastersFirstSegment(t *testing.T) {
	ctl := startController(t, false)
	g := &group{t: t}
	hours := make([]string, 24)
	for i := range hours {
		hours[i] = fmt.Sprintf("%02d", i)
	}
	for id := 1; id <= 2; id++ {
		cfg := memberConfig(t, ctl, filepath.Join(t.TempDir(), "store"), int64(id), broker.AsyncMaster)
		cfg.Broker.MappedFileSizeCommitLog = 64 << 10
		cfg.Broker.StoreOverride = func(sc *store.Config) { // every sealed segment is expired, at any hour
			sc.Log.FileReservedTime, sc.Log.DeleteWhen = time.Nanosecond, strings.Join(hours, ";")
		}
		g.cfgs, g.ms = append(g.cfgs, cfg), append(g.ms, nil)
		g.start(id)
	}
	t.Cleanup(func() {
		for _, m := range g.ms {
			if m != nil {
				assert.NoError(t, m.Close(context.Background()))
			}
		}
	})
	m := g.master(1)
	s := 3 - m
	require.NoError(t, g.ms[m-1].Server().Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}))
	g.waitTopic(s)
	require.NoError(t, g.ms[s-1].Close(t.Context()))
	g.ms[s-1] = nil
	require.NoError(t, os.RemoveAll(g.cfgs[s-1].Broker.StorePathRootDir)) // an empty disk

	mb := g.ms[m-1].Server().Broker()
	big := make([]byte, 1000)
	for i := range 400 { // about 6 segments
		_, err := mb.Send(t.Context(), "T", []*message.Message{{Topic: "T", QueueID: int32(i % 2), Body: append(body(i), big...)}})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		_, err := mb.ReplicaLog().Clean()
		require.NoError(t, err)
		return mb.ReplicaLog().MinOffset() > 0
	}, failoverWait, 10*time.Millisecond, "retention deleted the master's first segments")
	from := mb.ReplicaLog().MinOffset()
	for i := 400; i < 500; i++ { // every queue has messages past the deleted ones
		_, err := mb.Send(t.Context(), "T", []*message.Message{{Topic: "T", QueueID: int32(i % 2), Body: append(body(i), big...)}})
		require.NoError(t, err)
	}

	g.start(s)
	g.sameLogs(m, s)
	sb := g.ms[s-1].Server().Broker()
	assert.Equal(t, from, sb.ReplicaLog().MinOffset(), "the slave's log starts where the master's does")
	one := func(b *broker.Broker, q int32, off int64) (broker.PullResult, []byte) {
		res, err := b.Pull(t.Context(), broker.PullRequest{Topic: "T", QueueID: q, Offset: off, MaxMsgs: 1})
		require.NoError(t, err)
		defer res.Release()
		if len(res.Records) == 0 {
			return res, nil
		}
		return res, bytes.Clone(res.Records[0].B)
	}
	for q := range int32(2) {
		mres, _ := one(mb, q, 0)
		var first broker.PullResult
		require.Eventually(t, func() bool {
			first, _ = one(sb, q, 0)
			return first.MaxOffset == mres.MaxOffset
		}, failoverWait, 10*time.Millisecond, "queue %d ends where the master's does", q)
		require.Positive(t, first.MinOffset, "queue %d starts past the messages the master no longer has", q)
		for _, off := range []int64{first.MinOffset, first.MaxOffset - 1} {
			_, want := one(mb, q, off)
			_, got := one(sb, q, off)
			require.NotNil(t, got, "queue %d offset %d", q, off)
			assert.Equal(t, want, got, "queue %d offset %d: the master's message", q, off)
		}
	}
	rec, err := os.ReadFile(filepath.Join(g.cfgs[s-1].Broker.StorePathRootDir, "truncations.log"))
	require.NoError(t, err)
	assert.Contains(t, string(rec), "below the master's first offset")
}
