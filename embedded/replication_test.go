package embedded_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/message"
)

// groupOptions is a broker group of a master of role and n slaves, with
// small files, serving reads on the slaves.
func groupOptions(role broker.BrokerRole, n int) embedded.Options {
	return embedded.Options{
		Slaves: n,
		Broker: func(c *broker.Config) {
			c.BrokerRole = role
			c.MappedFileSizeCommitLog = 4 << 20 // a slave's segments must be its master's size
			c.MaxHashSlotNum, c.MaxIndexNum = 1000, 4000
			c.SlaveTimeout = 10 * time.Second // generous: a busy machine must not time out a healthy slave
		},
		Slave: func(_ int64, c *broker.Config) { c.SlaveReadEnable = true },
	}
}

func startGroup(t *testing.T, opts embedded.Options) *embedded.Cluster {
	t.Helper()
	c, err := embedded.Start(t.Context(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	return c
}

// waitSlaves waits until the master has n slaves connected.
func waitSlaves(t *testing.T, c *embedded.Cluster, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		k := 0
		for _, s := range c.Server().Slaves() {
			if s.Connected {
				k++
			}
		}
		return k >= n
	}, 30*time.Second, 10*time.Millisecond, "the master's slaves: %+v", c.Server().Slaves())
}

// groupTopic creates a topic on the master and waits for the running
// slaves to have it (metadata snapshots, every MetaInterval).
func groupTopic(t *testing.T, c *embedded.Cluster, name string, queues int32) {
	t.Helper()
	require.NoError(t, c.Broker().CreateOrUpdateTopic(metadata.TopicConfig{
		TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: metadata.PermRead | metadata.PermWrite}))
	for id := int64(1); id <= 8; id++ { // nil past Options.Slaves
		s := c.SlaveServer(id)
		if s == nil {
			continue
		}
		require.Eventually(t, func() bool { _, ok := s.Broker().Topic(name); return ok }, 30*time.Second, 10*time.Millisecond,
			"slave %d never learned topic %q from its master's metadata", id, name)
	}
}

func sendOne(ctx context.Context, b *broker.Broker, topic string, i int) ([]broker.SendResult, error) {
	return b.Send(ctx, topic, []*message.Message{{Topic: topic, QueueID: int32(i % 2), Body: fmt.Appendf(nil, "m%03d", i)}})
}

// recordEnd is the log offset after the record at phys in b's log.
func recordEnd(t *testing.T, b *broker.Broker, phys int64) int64 {
	t.Helper()
	r, next, err := b.ReplicaLog().ReadRecord(phys)
	require.NoError(t, err)
	r.Release()
	return next
}

func logEnd(s *server.Server) int64 { return s.Broker().ReplicaLog().MaxOffset() }

// sameLog checks that the slave's log holds the master's bytes over
// [0, master's end).
func sameLog(t *testing.T, master, slave *server.Server) {
	t.Helper()
	end := logEnd(master)
	require.Eventually(t, func() bool { return logEnd(slave) == end }, 30*time.Second, 10*time.Millisecond)
	ml, sl := master.Broker().ReplicaLog(), slave.Broker().ReplicaLog()
	seg := ml.SegmentBytes()
	for off := int64(0); off < end; {
		n := min(end-off, seg-off%seg)
		mr, err := ml.Read(off, int(n))
		require.NoError(t, err)
		sr, err := sl.Read(off, int(n))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(mr.B, sr.B), "bytes differ in [%d, %d)", off, off+n)
		mr.Release()
		sr.Release()
		off += n
	}
}

// pullSlave pulls every message of topic's queue from the slave.
func pullSlave(t *testing.T, s *server.Server, topic string, qid int32) []string {
	t.Helper()
	res, err := s.Broker().Pull(t.Context(), broker.PullRequest{Topic: topic, QueueID: qid, MaxMsgs: broker.MaxPullMsgs})
	require.NoError(t, err)
	defer res.Release()
	var bodies []string
	for _, r := range res.Records {
		m, _, err := message.Decode(r.B)
		require.NoError(t, err)
		bodies = append(bodies, string(m.Body))
	}
	return bodies
}

func TestSyncMasterAcksOnceTheSlaveHoldsIt(t *testing.T) {
	c := startGroup(t, groupOptions(broker.SyncMaster, 1))
	waitSlaves(t, c, 1)
	groupTopic(t, c, "T", 2)
	master, slave := c.Server(), c.SlaveServer(1)

	const n = 40
	for i := range n {
		res, err := sendOne(t.Context(), c.Broker(), "T", i)
		require.NoError(t, err)
		held := logEnd(slave) // right when Send returned
		end := recordEnd(t, c.Broker(), res[0].PhysicalOffset)
		require.GreaterOrEqual(t, held, end, "send %d answered before the slave held it", i)
	}
	sameLog(t, master, slave)

	// The slave built its consume queues from the replicated records.
	var want [2][]string
	for i := range n {
		want[i%2] = append(want[i%2], fmt.Sprintf("m%03d", i))
	}
	for q := range int32(2) {
		require.Eventually(t, func() bool { return len(pullSlave(t, slave, "T", q)) == n/2 }, 30*time.Second, 10*time.Millisecond)
		assert.Equal(t, want[q], pullSlave(t, slave, "T", q))
	}

	// A slave takes no writes.
	_, err := sendOne(t.Context(), slave.Broker(), "T", 0)
	require.ErrorIs(t, err, broker.ErrNotMaster)
	assert.ErrorContains(t, err, "not master")
	assert.ErrorContains(t, err, "the master is at "+c.BrokerAddr(), "learned from the nameserver")
	assert.Equal(t, logEnd(master), logEnd(slave), "nothing appended")

	// Over gRPC: FAILED_PRECONDITION, "not master", naming the master.
	cc, err := grpc.NewClient(slave.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	_, err = gantryv1.NewMessagingClient(cc).Send(t.Context(), &gantryv1.SendRequest{Topic: "T", Messages: []*gantryv1.Message{{Body: []byte("x")}}})
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	assert.ErrorContains(t, err, "not master")
	assert.ErrorContains(t, err, c.BrokerAddr())
	assert.Equal(t, logEnd(master), logEnd(slave), "nothing appended")
}

func TestAsyncMasterSlaveCatchesUpAndResumes(t *testing.T) {
	c := startGroup(t, groupOptions(broker.AsyncMaster, 1))
	groupTopic(t, c, "T", 2)
	// An ASYNC_MASTER acks without its slave: stopped, it holds nothing.
	require.NoError(t, c.StopSlave(t.Context(), 1))
	for i := range 20 {
		_, err := sendOne(t.Context(), c.Broker(), "T", i)
		require.NoError(t, err)
	}
	require.NoError(t, c.StartSlave(t.Context(), 1))
	slave := c.SlaveServer(1)
	sameLog(t, c.Server(), slave)

	// A restarted slave resumes from its log end (a replica append is
	// taken only there): its log is kept, and the rest follows.
	held := logEnd(slave)
	require.Positive(t, held)
	require.NoError(t, c.StopSlave(t.Context(), 1))
	for i := 20; i < 30; i++ {
		_, err := sendOne(t.Context(), c.Broker(), "T", i)
		require.NoError(t, err)
	}
	stopped := logEnd(c.Server()) // what the master has
	require.NoError(t, c.StartSlave(t.Context(), 1))
	slave = c.SlaveServer(1)
	assert.GreaterOrEqual(t, logEnd(slave), held, "the slave's log survived its restart")
	sameLog(t, c.Server(), slave)
	assert.Equal(t, stopped, logEnd(slave))
	require.Eventually(t, func() bool { return len(pullSlave(t, slave, "T", 0)) == 15 }, 30*time.Second, 10*time.Millisecond)
}

func TestSyncMasterWithoutItsSlave(t *testing.T) {
	c := startGroup(t, groupOptions(broker.SyncMaster, 1))
	waitSlaves(t, c, 1)
	groupTopic(t, c, "T", 2)
	_, err := sendOne(t.Context(), c.Broker(), "T", 0)
	require.NoError(t, err)

	require.NoError(t, c.StopSlave(t.Context(), 1))
	// Once the master sees the slave gone, sends are refused before the
	// append; until then one may time out (indeterminate).
	require.Eventually(t, func() bool {
		before := logEnd(c.Server())
		_, err := sendOne(t.Context(), c.Broker(), "T", 1)
		if !assert.Error(t, err) {
			return true
		}
		if errors.Is(err, broker.ErrNotEnoughReplicas) {
			assert.False(t, broker.IsIndeterminate(err))
			assert.Equal(t, before, logEnd(c.Server()), "nothing stored")
			return true
		}
		assert.ErrorIs(t, err, broker.ErrReplicaTimeout)
		return false
	}, 60*time.Second, 10*time.Millisecond)
}

func TestSyncMasterSendInFlightWhenTheSlaveStops(t *testing.T) {
	p := startFreezeProxy(t)
	opts := groupOptions(broker.SyncMaster, 1)
	broker0 := opts.Broker
	opts.Broker = func(c *broker.Config) { broker0(c); c.SlaveTimeout = 500 * time.Millisecond }
	opts.Slave = func(_ int64, c *broker.Config) { c.HAMasterAddress = p.addr() }
	c := startGroup(t, opts)
	p.target.Store(c.Server().HAAddr())
	waitSlaves(t, c, 1)
	groupTopic(t, c, "T", 2)
	_, err := sendOne(t.Context(), c.Broker(), "T", 0)
	require.NoError(t, err)

	p.frozen.Store(true) // the slave stops acking; the master still sees it connected and in sync
	before := logEnd(c.Server())
	res, err := sendOne(t.Context(), c.Broker(), "T", 1)
	require.ErrorIs(t, err, broker.ErrReplicaTimeout)
	assert.True(t, broker.IsIndeterminate(err))
	require.Len(t, res, 1, "stored on the master")
	assert.Greater(t, logEnd(c.Server()), before)
	p.frozen.Store(false)
}

// freezeProxy relays TCP connections to target; while frozen it passes
// nothing either way and keeps the connections open, as a slave that
// stopped answering.
type freezeProxy struct {
	lis    net.Listener
	target atomic.Value // string; connections before it is set are closed
	frozen atomic.Bool
	done   chan struct{}
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startFreezeProxy(t *testing.T) *freezeProxy {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &freezeProxy{lis: lis, done: make(chan struct{})}
	p.target.Store("")
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

func (p *freezeProxy) addr() string { return p.lis.Addr().String() }

func (p *freezeProxy) serve() {
	for {
		cl, err := p.lis.Accept()
		if err != nil {
			return
		}
		target := p.target.Load().(string)
		var srv net.Conn
		if target != "" {
			srv, err = net.Dial("tcp", target)
		}
		if target == "" || err != nil {
			cl.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, cl, srv)
		p.mu.Unlock()
		p.wg.Go(func() { p.relay(srv, cl) })
		p.wg.Go(func() { p.relay(cl, srv) })
	}
}

func (p *freezeProxy) relay(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		for p.frozen.Load() {
			select {
			case <-p.done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *freezeProxy) close() {
	close(p.done)
	p.lis.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// A restarted master listens on the HA port it had: its slave reconnects
// and copies what came after.
func TestSlaveFollowsARestartedMaster(t *testing.T) {
	c := startGroup(t, groupOptions(broker.SyncMaster, 1))
	waitSlaves(t, c, 1)
	groupTopic(t, c, "T", 2)
	ha := c.Server().HAAddr()
	for i := range 5 {
		_, err := sendOne(t.Context(), c.Broker(), "T", i)
		require.NoError(t, err)
	}
	require.NoError(t, c.RestartBroker(t.Context()))
	assert.Equal(t, ha, c.Server().HAAddr())
	waitSlaves(t, c, 1)
	for i := 5; i < 10; i++ {
		_, err := sendOne(t.Context(), c.Broker(), "T", i)
		require.NoError(t, err)
	}
	sameLog(t, c.Server(), c.SlaveServer(1))
	st, ok := c.SlaveServer(1).SlaveStatus()
	require.True(t, ok)
	assert.GreaterOrEqual(t, st.Sessions, 2, "a new session with the restarted master")
}

// A slave copies its master's metadata through the replication stream:
// topics, groups and consumer offsets, as they change, and keeps them
// across its restart.
func TestSlaveCopiesTheMastersMetadata(t *testing.T) {
	c := startGroup(t, groupOptions(broker.AsyncMaster, 1))
	waitSlaves(t, c, 1)
	groupTopic(t, c, "T", 2)
	require.NoError(t, c.Broker().PutGroup(metadata.DefaultSubscriptionGroup("G")))
	for i := range 4 {
		_, err := sendOne(t.Context(), c.Broker(), "T", i)
		require.NoError(t, err)
	}
	require.NoError(t, c.Broker().CommitOffset("G", "T", 0, 2))
	slave := c.SlaveServer(1).Broker()
	require.Eventually(t, func() bool {
		off, ok := slave.QueryOffset("G", "T", 0)
		return ok && off == 2
	}, 30*time.Second, 10*time.Millisecond, "the slave's offset of G in T/0")
	tc, ok := slave.Topic("T")
	require.True(t, ok)
	assert.Equal(t, int32(2), tc.WriteQueueNums)
	_, ok = slave.Group("G")
	assert.True(t, ok)

	require.NoError(t, c.Broker().CommitOffset("G", "T", 0, 3))
	require.Eventually(t, func() bool {
		off, _ := slave.QueryOffset("G", "T", 0)
		return off == 3
	}, 30*time.Second, 10*time.Millisecond, "a later commit")

	require.NoError(t, c.StopSlave(t.Context(), 1))
	require.NoError(t, c.StartSlave(t.Context(), 1))
	off, ok := c.SlaveServer(1).Broker().QueryOffset("G", "T", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(3), off, "kept across the slave's restart")
}
