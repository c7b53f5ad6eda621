package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/replication"
	"github.com/gantrymq/gantry/replication/controller"
	"github.com/gantrymq/gantry/replication/epoch"
)

// EpochFile is the epoch file's name under storePathRootDir (RocketMQ's).
const EpochFile = "epochFileCheckpoint"

// Member runs a broker of a group whose master the controllers elect
// (enableControllerMode; docs/REPLICATION.md, "Failover"). It registers
// the broker with the controller and heartbeats every
// brokerHeartbeatInterval; each answer names the group's master:
//
//   - named master in a new epoch, it records the epoch in the epoch file at
//     its log's end and serves as master, acknowledging writes while its
//     lease (masterLeaseMillis from the last answered heartbeat) holds,
//     and keeps the controller's in-sync set to the slaves that keep up:
//     a SYNC_MASTER waits for every one of them;
//   - another broker named, it serves as that master's slave; when its log
//     holds more than the history it shares with the master, it truncates
//     it (recorded in truncations.log) and follows again;
//   - a master that loses its lease stops acknowledging at once and, at
//     its next heartbeat, serves as a slave until the controller names a
//     master.
//
// A change of role restarts the Server on the same listeners and store:
// clients reconnect, as they do to any broker restart. A slave that only
// follows a new master keeps its Server.
type Member struct {
	cfg    Config // without listeners: each Server gets lis, kept
	bc     broker.Config
	lis    []*net.TCPListener // gRPC, HTTP, remoting, HA
	haAddr string
	ctl    *controller.Client
	epochs *epoch.File
	lease  broker.Lease
	inSync atomic.Pointer[[]int64] // the slaves a SYNC_MASTER waits for
	log    *slog.Logger

	stop context.CancelFunc
	done chan struct{}

	mu     sync.Mutex // guards what follows against Server and Close
	srv    *Server    // nil while restarting
	master bool
	epoch  int32  // the master epoch the broker leads or follows
	follow string // the master's HA address a slave follows
	closed bool
}

// StartMember starts a controller-mode broker (cfg.Broker's
// enableControllerMode): it serves as a slave without a master until the
// controller names one, and returns once its Server is up.
func StartMember(ctx context.Context, cfg Config) (*Member, error) {
	bc := cfg.Broker
	if err := bc.Validate(); err != nil {
		closeAll([]net.Listener{cfg.GRPCListener, cfg.HTTPListener, cfg.RemotingListener, cfg.HAListener})
		return nil, err
	}
	if !bc.EnableControllerMode {
		closeAll([]net.Listener{cfg.GRPCListener, cfg.HTTPListener, cfg.RemotingListener, cfg.HAListener})
		return nil, errors.New("broker: a Member needs enableControllerMode=true and controllerAddr")
	}
	bc = bc.WithDefaults()
	signer, err := innerSigner(bc)
	if err == nil {
		err = checkExposure(cfg, bc)
	}
	if err != nil {
		closeAll([]net.Listener{cfg.GRPCListener, cfg.HTTPListener, cfg.RemotingListener, cfg.HAListener})
		return nil, err
	}
	lis, haAddr, err := listenAll(cfg, &bc)
	if err != nil {
		return nil, err
	}
	cfg.GRPCListener, cfg.HTTPListener, cfg.RemotingListener, cfg.HAListener = nil, nil, nil, nil
	cfg.exposureChecked = true
	closeLis := func() {
		for _, l := range lis {
			l.Close()
		}
	}
	if cfg.HAAdvertiseAddr != "" {
		haAddr = cfg.HAAdvertiseAddr
	}
	epochs, err := epoch.Open(bc.StoreConfig().FS, filepath.Join(bc.StorePathRootDir, EpochFile))
	if err != nil {
		closeLis()
		return nil, fmt.Errorf("broker: epoch file: %w", err)
	}
	ccfg := controller.ClientConfig{Addrs: bc.ControllerAddr, AttemptTimeout: bc.MasterLease / 2, Signer: signer}
	dial, err := bc.ClientTLS(bc.Logger) // tls.enable: the controllers are dialed with TLS too
	if err != nil {
		closeLis()
		return nil, fmt.Errorf("%w: %w", broker.ErrInvalidConfig, err)
	}
	if dial != nil {
		ccfg.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(dial.Credentials())}
	}
	ctl, err := controller.NewClient(ccfg)
	if err != nil {
		closeLis()
		return nil, err
	}
	m := &Member{cfg: cfg, bc: bc, lis: lis, haAddr: haAddr, ctl: ctl, epochs: epochs, done: make(chan struct{}),
		log: bc.Logger.With("component", "member", "group", bc.BrokerName, "broker", bc.BrokerID)}
	if last, ok := epochs.Last(); ok {
		m.epoch = last.Epoch
	}
	m.inSync.Store(&[]int64{})
	if err := m.restart(ctx, false, ""); err != nil {
		_ = ctl.Close()
		closeLis()
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	m.stop = stop
	go func() {
		defer close(m.done)
		m.run(runCtx)
	}()
	return m, nil
}

// listenAll returns the listeners every Server of the member accepts on:
// gRPC, HTTP, remoting and HA, the given ones or new ones on the
// configured addresses. The HA port is haListenPort, else listenPort+1,
// else (an ephemeral listenPort, as in tests) an ephemeral one. It sets
// bc's listen settings to what they got and returns the HA address
// registered with the controller.
func listenAll(cfg Config, bc *broker.Config) ([]*net.TCPListener, string, error) {
	given := []net.Listener{cfg.GRPCListener, cfg.HTTPListener, cfg.RemotingListener, cfg.HAListener}
	g, h, r := bc.ListenAddrs()
	addrs := []string{g, h, r, ""}
	ephemeral := cfg.Broker.ListenPort == 0 && given[2] != nil // bc has the defaults
	out := make([]*net.TCPListener, 0, len(given))
	fail := func(err error) ([]*net.TCPListener, string, error) {
		for _, l := range out {
			l.Close()
		}
		closeAll(given[len(out):])
		return nil, "", err
	}
	for i, l := range given {
		if l == nil {
			addr := addrs[i]
			if i == 3 {
				host, _, _ := net.SplitHostPort(out[2].Addr().String())
				port := bc.HAListenPort
				if port == 0 && !ephemeral {
					port = out[2].Addr().(*net.TCPAddr).Port + 1
				}
				addr = net.JoinHostPort(host, strconv.Itoa(port))
			}
			var err error
			if l, err = net.Listen("tcp", addr); err != nil {
				return fail(fmt.Errorf("broker listen on %s: %w", addr, err))
			}
		}
		tcp, ok := l.(*net.TCPListener)
		if !ok {
			l.Close()
			return fail(fmt.Errorf("broker: a Member needs TCP listeners, got %T", l))
		}
		out = append(out, tcp)
	}
	ra, ha := out[2].Addr().(*net.TCPAddr), out[3].Addr().(*net.TCPAddr)
	bc.ListenPort, bc.HAListenPort = ra.Port, ha.Port
	return out, advertised(ha, bc.BrokerIP1), nil
}

// Server returns the broker's current Server, nil while it restarts for a
// change of role.
func (m *Member) Server() *Server {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.srv
}

// IsMaster reports whether the broker serves as its group's master now.
func (m *Member) IsMaster() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.master && m.srv != nil
}

// Epoch returns the master epoch the broker leads or follows.
func (m *Member) Epoch() int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch
}

// InSync returns the slaves a master's acks (SYNC_MASTER) and its
// consumers' reads wait for: the controller's in-sync set less the master,
// with a slave joining or leaving it meanwhile. Empty on a slave.
func (m *Member) InSync() []int64 { return slices.Clone(*m.inSync.Load()) }

// Epochs returns the broker's epoch file entries.
func (m *Member) Epochs() []epoch.Entry { return m.epochs.Entries() }

// Close stops heartbeating, then closes the Server (Server.Close).
func (m *Member) Close(ctx context.Context) error {
	return m.shut(func(s *Server) error { return s.Close(ctx) })
}

// Kill stops heartbeating and kills the Server (Server.Kill): for tests
// of a master that dies.
func (m *Member) Kill() error { return m.shut((*Server).Kill) }

func (m *Member) shut(end func(*Server) error) error {
	m.stop()
	<-m.done
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	srv := m.srv
	m.srv = nil
	m.mu.Unlock() // not held while the server closes: Server and IsMaster answer meanwhile
	m.lease.Revoke()
	var err error
	if srv != nil {
		err = end(srv)
	}
	for _, l := range m.lis {
		l.Close()
	}
	return errors.Join(err, m.ctl.Close())
}

// run registers and heartbeats until ctx ends.
func (m *Member) run(ctx context.Context) {
	registered := false
	for {
		m.ensureServer(ctx)
		if !registered {
			registered = m.register(ctx)
		}
		if registered {
			registered = m.beat(ctx)
		}
		wait := m.bc.BrokerHeartbeatInterval
		if m.growing() {
			wait = min(wait, 100*time.Millisecond) // a new master's slaves join the in-sync set sooner
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// register registers the broker with the controller.
func (m *Member) register(ctx context.Context) bool {
	srv := m.Server()
	if srv == nil {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, m.bc.MasterLease)
	defer cancel()
	if _, err := m.ctl.RegisterBroker(cctx, m.bc.BrokerName, m.bc.BrokerID, m.haAddr, srv.GRPCAddr()); err != nil {
		if ctx.Err() == nil {
			m.log.Warn("cannot register with the controller", "controllers", m.bc.ControllerAddr, "err", err)
		}
		return false
	}
	m.log.Info("registered with the controller", "ha_addr", m.haAddr)
	return true
}

// beat sends one heartbeat and follows its answer; false means the
// controller does not know the broker (register again).
func (m *Member) beat(ctx context.Context) bool {
	srv := m.Server()
	if srv == nil {
		return true
	}
	hb := controller.BrokerReport{Group: m.bc.BrokerName, BrokerID: m.bc.BrokerID, MasterEpoch: m.Epoch(), LogEnd: srv.b.ReplicaLog().MaxOffset()}
	if last, ok := m.epochs.Last(); ok {
		hb.LastEpoch, hb.LastEpochStart = last.Epoch, last.StartOffset
	}
	sent := time.Now()
	cctx, cancel := context.WithTimeout(ctx, m.bc.MasterLease/2)
	st, err := m.ctl.BrokerHeartbeat(cctx, hb)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return true
		}
		m.log.Warn("heartbeat to the controller failed", "err", err)
		if m.IsMaster() && !m.lease.Valid(time.Now()) {
			m.log.Warn("master lease expired: no more writes; serving as a slave until the controller names a master")
			m.becomeSlave(ctx, "", m.Epoch())
		}
		return !errors.Is(err, controller.ErrUnknownGroup) && !errors.Is(err, controller.ErrUnknownReplica)
	}
	m.heed(ctx, st.GroupState, sent)
	return true
}

// heed takes one answer of the controller.
func (m *Member) heed(ctx context.Context, g controller.GroupState, sent time.Time) {
	if g.MasterEpoch < m.Epoch() {
		return // an answer older than what the broker knows
	}
	switch {
	case g.MasterID == m.bc.BrokerID:
		if !m.IsMaster() || m.Epoch() != g.MasterEpoch {
			m.promote(ctx, g, sent)
			return
		}
		m.lease.Renew(sent.Add(m.bc.MasterLease))
		m.tendInSync(ctx, g)
	case g.MasterID != 0:
		m.lease.Revoke()
		addr := g.MasterAddr()
		m.mu.Lock()
		srv, slave := m.srv, !m.master && m.srv != nil
		same := slave && m.follow == addr && m.epoch == g.MasterEpoch
		m.mu.Unlock()
		switch {
		case same:
			m.rejoin(ctx, addr)
		case slave: // a new master: follow it, without a restart of the store
			m.log.Info("following the master", "ha_addr", addr, "epoch", g.MasterEpoch)
			if err := srv.followMaster(addr); err != nil {
				m.log.Error("cannot follow the master", "ha_addr", addr, "err", err)
				return
			}
			m.setRole(false, addr, g.MasterEpoch)
		default:
			m.becomeSlave(ctx, addr, g.MasterEpoch)
		}
	default: // no master: the controller elects one, maybe this broker
		if m.IsMaster() {
			m.log.Warn("the controller names no master: no more writes")
			m.becomeSlave(ctx, "", m.Epoch())
		}
	}
}

// promote makes the broker its group's master in g's epoch: the epoch
// starts at its log's end.
func (m *Member) promote(ctx context.Context, g controller.GroupState, sent time.Time) {
	m.mu.Lock()
	srv := m.srv
	m.mu.Unlock()
	if srv != nil {
		srv.stopSlave() // the log's end is final
	}
	end := int64(0)
	if srv != nil {
		end = srv.b.ReplicaLog().MaxOffset()
	}
	if last, ok := m.epochs.Last(); !ok || last.Epoch < g.MasterEpoch {
		if err := m.epochs.Append(g.MasterEpoch, end); err != nil {
			m.log.Error("cannot record the new epoch: not serving as master", "epoch", g.MasterEpoch, "err", err)
			return
		}
	}
	m.inSync.Store(ptr(others(g.InSync, m.bc.BrokerID)))
	m.lease.Renew(sent.Add(m.bc.MasterLease))
	m.log.Info("elected master: serving writes", "epoch", g.MasterEpoch, "log_end", end, "in_sync", g.InSync)
	m.setRole(true, "", g.MasterEpoch)
	if err := m.restart(ctx, true, ""); err != nil {
		m.log.Error("cannot start as master", "err", err)
	}
}

// becomeSlave makes the broker a slave of the master at HA address addr
// ("" none yet) in epoch ep.
func (m *Member) becomeSlave(ctx context.Context, addr string, ep int32) {
	m.lease.Revoke()
	m.inSync.Store(&[]int64{})
	if addr != "" {
		m.log.Info("following the master", "ha_addr", addr, "epoch", ep)
	}
	m.setRole(false, addr, ep)
	if err := m.restart(ctx, false, addr); err != nil {
		m.log.Error("cannot start as slave", "err", err)
	}
}

// rejoin cuts a slave's log that holds more than the history it shares
// with its master (truncated to the common point), or that ends below the
// master's first offset (emptied to start there), after the slave stopped
// for it, then follows again. Either cut is recorded in truncations.log.
func (m *Member) rejoin(ctx context.Context, addr string) {
	srv := m.Server()
	st, ok := srv.SlaveStatus()
	if !ok || !st.Stopped {
		return
	}
	var (
		te *replication.TruncateNeededError
		re *replication.ResyncNeededError
	)
	if !errors.As(st.LastErr, &te) && !errors.As(st.LastErr, &re) {
		m.log.Error("replication stopped", "err", st.LastErr)
		return
	}
	m.mu.Lock()
	m.srv = nil
	m.mu.Unlock()
	if err := srv.Close(ctx); err != nil {
		m.log.Warn("close before cutting the log", "err", err)
	}
	bc := m.roleBroker(false, addr)
	var err error
	if te != nil {
		reason := fmt.Sprintf("rejoining group %s as broker %d: the master (epoch %d) shares the log up to %d", m.bc.BrokerName, m.bc.BrokerID, m.Epoch(), te.To)
		var rep commitlog.TruncateReport
		if rep, err = broker.TruncateLog(ctx, bc, te.To, reason); err == nil {
			err = m.epochs.TruncateAfter(te.To)
			m.log.Warn("log truncated to rejoin the master (recorded in truncations.log)", "to", te.To, "bytes", rep.Bytes, "records", rep.Records)
		}
	} else {
		reason := fmt.Sprintf("rejoining group %s as broker %d: the log ends at %d, below the master's first offset %d", m.bc.BrokerName, m.bc.BrokerID, re.End, re.From)
		var rep commitlog.TruncateReport
		if rep, err = broker.ResetLog(ctx, bc, re.From, reason); err == nil {
			err = m.resetEpochs(re)
			m.log.Warn("log emptied to copy the master's from its first offset (recorded in truncations.log)", "from", re.From, "records", rep.Records)
		}
	}
	if err != nil {
		m.log.Error("cannot cut the log to rejoin the master", "err", err)
	}
	if err := m.restart(ctx, false, addr); err != nil {
		m.log.Error("cannot start as slave", "err", err)
	}
}

// resetEpochs makes the epoch file the master's entries that start at or
// below the replica's new first offset: the history its log starts in.
func (m *Member) resetEpochs(re *replication.ResyncNeededError) error {
	if err := m.epochs.TruncateAfter(0); err != nil {
		return err
	}
	for _, e := range re.Epochs {
		if e.StartOffset > re.From {
			break
		}
		if err := m.epochs.Append(e.Epoch, e.StartOffset); err != nil {
			return err
		}
	}
	return nil
}

// tendInSync keeps the controller's in-sync set to the slaves that keep
// up: one joins once within 1 MiB (at most haMaxGapNotInSync) of the log's
// end, one leaves when disconnected, past haMaxGapNotInSync, or not caught
// up for haMaxTimeSlaveNotCatchup. A joiner is waited for before the
// controller holds it; a leaver until it does.
func (m *Member) tendInSync(ctx context.Context, g controller.GroupState) {
	srv := m.Server()
	if srv == nil {
		return
	}
	end := srv.b.ReplicaLog().MaxOffset()
	gap := m.bc.HAMaxGapNotInSync
	join := min(gap, 1<<20)
	have := others(g.InSync, m.bc.BrokerID)
	now := time.Now()
	var want []int64
	for _, s := range srv.Slaves() {
		in := slices.Contains(have, s.ID)
		fresh := now.Sub(s.CaughtUpAt) <= m.bc.HAMaxTimeSlaveNotCatchup
		if s.Connected && fresh && (s.Acked >= end-join || in && s.Acked >= end-gap) {
			want = append(want, s.ID)
		}
	}
	slices.Sort(want)
	if slices.Equal(want, have) {
		m.inSync.Store(ptr(have))
		return
	}
	union := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(have), want...))))
	m.inSync.Store(ptr(union))
	if err := m.joinersHold(ctx, srv, slices.DeleteFunc(slices.Clone(want), func(id int64) bool { return slices.Contains(have, id) })); err != nil {
		m.inSync.Store(ptr(have))
		srv.b.ConfirmMoved() // reads no longer wait for the joiners
		m.log.Info("a slave joins the in-sync set later: it does not hold what consumers read yet", "err", err)
		return
	}
	ng, err := m.ctl.AlterSyncStateSet(ctx, g.Name, m.bc.BrokerID, g.MasterEpoch, g.InSyncEpoch, append(slices.Clone(want), m.bc.BrokerID))
	if err != nil {
		m.log.Warn("cannot change the in-sync set", "from", g.InSync, "to", want, "err", err)
		return
	}
	m.inSync.Store(ptr(others(ng.InSync, m.bc.BrokerID)))
	srv.b.ConfirmMoved() // reads no longer wait for a leaver
	m.log.Info("in-sync set changed", "from", g.InSync, "to", ng.InSync, "epoch", ng.InSyncEpoch)
}

// joinersHold waits, at most a heartbeat interval, until every slave of
// joiners holds what consumers may have read: once they bound dispatch
// (m.inSync holds them), what is dispatched stops growing past their acks,
// and an elected joiner must hold all of it (docs/REPLICATION.md, "What
// consumers read").
func (m *Member) joinersHold(ctx context.Context, srv *Server, joiners []int64) error {
	if len(joiners) == 0 || srv.ha.master == nil {
		return nil
	}
	read := srv.b.SettledDispatch()
	ctx, cancel := context.WithTimeout(ctx, m.bc.BrokerHeartbeatInterval)
	defer cancel()
	return srv.ha.master.WaitAckedBy(ctx, read, joiners)
}

// growing reports whether a master has more connected slaves than its
// in-sync set holds: tendInSync may add them.
func (m *Member) growing() bool {
	srv := m.Server()
	if srv == nil || !m.IsMaster() {
		return false
	}
	n := 0
	for _, sl := range srv.Slaves() {
		if sl.Connected {
			n++
		}
	}
	return n > len(*m.inSync.Load())
}

// ensureServer starts the Server again in the broker's role after a start
// failed (a port or the disk briefly unavailable).
func (m *Member) ensureServer(ctx context.Context) {
	m.mu.Lock()
	missing, master, follow := m.srv == nil && !m.closed, m.master, m.follow
	m.mu.Unlock()
	if !missing {
		return
	}
	if err := m.restart(ctx, master, follow); err != nil {
		m.log.Error("cannot start the broker; retrying at the next heartbeat", "master", master, "err", err)
	}
}

func (m *Member) setRole(master bool, follow string, ep int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.master, m.follow, m.epoch = master, follow, ep
}

// restart closes the current Server, if any, and starts one in the role.
func (m *Member) restart(ctx context.Context, master bool, follow string) error {
	m.mu.Lock()
	old := m.srv
	m.srv = nil
	m.mu.Unlock()
	if old != nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := old.Close(cctx)
		cancel()
		if err != nil {
			m.log.Warn("close for a change of role", "err", err)
		}
	}
	srv, err := Start(ctx, m.roleConfig(master, follow))
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed { // Close came meanwhile
		return srv.Close(ctx)
	}
	m.srv = srv
	return nil
}

// roleConfig is the Server configuration of the role, on the member's
// listeners.
func (m *Member) roleConfig(master bool, follow string) Config {
	c := m.cfg
	c.Broker, c.Epochs = m.roleBroker(master, follow), m.epochs
	if master {
		c.ConfirmBy = func() []int64 { return *m.inSync.Load() }
		if c.Broker.BrokerRole == broker.SyncMaster {
			c.WaitFor = c.ConfirmBy
		}
	}
	c.GRPCListener, c.HTTPListener, c.RemotingListener, c.HAListener = keep(m.lis[0]), keep(m.lis[1]), keep(m.lis[2]), keep(m.lis[3])
	return c
}

// roleBroker is the broker configuration of the role: a master registers
// as brokerId 0 and takes writes under the lease, a slave as its own id.
func (m *Member) roleBroker(master bool, follow string) broker.Config {
	bc := m.bc
	bc.EnableControllerMode = false
	if master {
		bc.BrokerID, bc.Lease = 0, &m.lease
	} else {
		bc.BrokerRole, bc.HAMasterAddress, bc.Lease = broker.Slave, follow, nil
	}
	return bc
}

// others returns ids less id, sorted.
func others(ids []int64, id int64) []int64 {
	out := slices.DeleteFunc(slices.Clone(ids), func(x int64) bool { return x == id })
	slices.Sort(out)
	return out
}

func ptr[T any](v T) *T { return &v }
