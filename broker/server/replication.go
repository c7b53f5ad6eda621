package server

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/grpcapi"
	"github.com/gantrymq/gantry/internal/muxlisten"
	"github.com/gantrymq/gantry/replication"
	"github.com/gantrymq/gantry/replication/epoch"
)

// A broker's part in replication (docs/REPLICATION.md, "Running a master
// and slaves"): a master serves its commit log to its slaves on the HA
// port (replication.Master), a slave copies its master's into its own
// (replication.Slave), from haMasterAddress or from the address the
// nameserver's registration answer names, and with it the master's
// metadata (broker.MetaSnapshot, RestoreMeta).

// haState is the server's replication: the master's listener, or the
// slave's follower.
type haState struct {
	master *replication.Master // nil on a slave
	addr   string              // the master's advertised HA address
	mux    *muxlisten.Mux      // the master's HA port with TLS; nil without

	epochs  *epoch.File   // controller mode: the epoch file a slave checks its history with
	confirm *confirmState // controller mode: what consumers may read up to; nil otherwise
	signer  *auth.Signer  // the inner credentials a slave signs its hello with; nil: none

	mu     sync.Mutex
	slave  *replication.Slave // nil on a master, or while the master's HA address is unknown
	follow string             // the HA address slave follows
	closed bool
}

// confirmState bounds what a controller-mode broker's consumers read
// (docs/REPLICATION.md, "What consumers read"): on a master, what every
// slave of its in-sync set acknowledged; on a slave, what its master
// confirmed (replication's confirm frames).
type confirmState struct {
	by     func() []int64 // a master's in-sync slaves; nil on a slave
	master atomic.Pointer[replication.Master]
	heard  atomic.Int64 // a slave's: its master's last confirm
}

// newConfirmState returns the bound of a controller-mode broker, nil for
// a broker of static role.
func newConfirmState(cfg Config) *confirmState {
	switch {
	case cfg.ConfirmBy != nil && cfg.Broker.BrokerRole != broker.Slave:
		return &confirmState{by: cfg.ConfirmBy}
	case cfg.Epochs != nil && cfg.Broker.BrokerRole == broker.Slave:
		return &confirmState{}
	}
	return nil
}

// limit is the broker's store's DispatchLimit.
func (c *confirmState) limit() int64 {
	if c.by == nil {
		return c.heard.Load()
	}
	m := c.master.Load()
	if m == nil {
		return 0 // until the HA port is up
	}
	return m.MinAcked(c.by())
}

// masterGate adapts a replication.Master to broker.Replication.
type masterGate struct {
	m       *replication.Master
	maxGap  int64
	waitFor func() []int64 // controller mode: the slaves of the in-sync set
}

// InSync counts the connected slaves whose last ack is within maxGap of
// end; in controller mode, the slaves of the in-sync set (a send then
// waits for each of them).
func (g masterGate) InSync(end int64) int {
	if g.waitFor != nil {
		return len(g.waitFor())
	}
	n := 0
	for _, s := range g.m.Slaves() {
		if s.Connected && s.Acked >= end-g.maxGap {
			n++
		}
	}
	return n
}

func (g masterGate) WaitAcked(ctx context.Context, off int64, n int) error {
	if g.waitFor != nil {
		return g.m.WaitAckedBy(ctx, off, g.waitFor())
	}
	return g.m.WaitAcked(ctx, off, n)
}

func (g masterGate) Notify() { g.m.Notify() }

func (g masterGate) NotifyMeta() { g.m.NotifyMeta() }

// haListenAddr is where a master's HA port listens: haListenPort, else
// listenPort+1. When a remoting listener is given and listenPort is unset
// (tests, embedded), it listens on the remoting listener's host, on
// haListenPort or else an ephemeral port.
func haListenAddr(cfg Config) string {
	bc := cfg.Broker
	if cfg.RemotingListener != nil && bc.ListenPort == 0 {
		host := ""
		if tcp, ok := cfg.RemotingListener.Addr().(*net.TCPAddr); ok && !tcp.IP.IsUnspecified() {
			host = tcp.IP.String()
		}
		return net.JoinHostPort(host, strconv.Itoa(bc.HAListenPort))
	}
	return bc.HAListenAddr()
}

// startReplication starts the master's HA port, or the slave's follower
// when its master's HA address is configured.
func (s *Server) startReplication(cfg Config) error {
	c := s.b.Config()
	s.ha.epochs = cfg.Epochs
	if c.BrokerRole == broker.Slave {
		if c.HAMasterAddress != "" {
			return s.followMaster(c.HAMasterAddress)
		}
		return nil
	}
	mc := replication.MasterConfig{Addr: haListenAddr(cfg), Listener: cfg.HAListener, Meta: s.b, Logger: c.Logger}
	if g := s.b.Guard(); g != nil { // only cluster users replicate (docs/SECURITY.md, "Cluster")
		mc.Authenticate, mc.ReplayWindow = haAuthenticator(g), c.AuthWindow
	}
	if s.tls != nil {
		lis, err := s.haTLS(mc.Addr, mc.Listener)
		if err != nil {
			return err
		}
		mc.Listener = lis
	}
	if cfg.Epochs != nil {
		mc.Epochs = cfg.Epochs.Entries()
	}
	if s.ha.confirm != nil {
		mc.Confirmed, mc.OnAck = s.ha.confirm.limit, s.b.ConfirmMoved
	}
	m, err := replication.NewMaster(mc, s.b.ReplicaLog())
	if err != nil {
		if s.ha.mux != nil {
			_ = s.ha.mux.Close()
		}
		return fmt.Errorf("broker HA port (haListenPort): %w", err)
	}
	if s.ha.confirm != nil {
		s.ha.confirm.master.Store(m)
		s.b.ConfirmMoved()
	}
	s.ha.master, s.ha.addr = m, advertised(m.Addr(), c.BrokerIP1)
	s.b.SetReplication(masterGate{m: m, maxGap: c.HAMaxGapNotInSync, waitFor: cfg.WaitFor})
	return nil
}

// haTLS serves TLS on the HA port (lis, or a new listener on addr) and
// returns the listener of the master's connections, plaintext ones too
// unless TLS is required, when they are refused with a reason the slave
// logs.
func (s *Server) haTLS(addr string, lis net.Listener) (net.Listener, error) {
	if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("broker HA port (haListenPort): listen on %s: %w", addr, err)
		}
	}
	m := muxlisten.New(lis, s.muxConfig("broker HA "+lis.Addr().String()))
	s.ha.mux = m
	s.ports.muxes = append(s.ports.muxes, m) // closed before the server waits for its goroutines
	master := m.Listener(muxlisten.AllProtocols()...)
	if s.tls.Required() {
		refused := m.Refused(muxlisten.AllProtocols()...)
		s.serve("HA TLS refusal", func() error {
			return replication.ServeRefusals(refused, "this master's HA port requires TLS (tls.server.mode=enforcing): set tls.enable=true", 10*time.Second)
		})
	}
	s.serve("HA port", m.Serve)
	return master, nil
}

// followMaster makes the slave replicate from the master's HA address
// addr, replacing a follower of another address.
func (s *Server) followMaster(addr string) error {
	s.ha.mu.Lock()
	defer s.ha.mu.Unlock()
	if s.ha.closed || (s.ha.slave != nil && s.ha.follow == addr) {
		return nil
	}
	if s.ha.slave != nil {
		s.log.Warn("the master's HA address changed: following the new one", "from", s.ha.follow, "to", addr)
		_ = s.ha.slave.Close()
		s.ha.slave = nil
	}
	c := s.b.Config()
	sc := replication.SlaveConfig{MasterAddr: addr, ReplicaID: c.BrokerID, OnMeta: s.b.RestoreMeta, Logger: c.Logger}
	if s.ha.signer != nil {
		sc.Signer = s.ha.signer
	}
	if s.dial != nil {
		sc.Dial = s.dial.Dial
	}
	if s.ha.epochs != nil {
		sc.Epochs = s.ha.epochs
	}
	if cs := s.ha.confirm; cs != nil {
		// What the last master confirmed of the log, the new one holds
		// too (it was elected from the in-sync set); the rest waits for its
		// confirms.
		cs.heard.Store(min(cs.heard.Load(), s.b.ReplicaLog().MaxOffset()))
		sc.OnConfirm = func(off int64) {
			if off > cs.heard.Load() {
				cs.heard.Store(off)
				s.b.ConfirmMoved()
			}
		}
	}
	sl, err := replication.StartSlave(sc, s.b.ReplicaLog())
	if err != nil {
		return fmt.Errorf("broker: replicate from %s: %w", addr, err)
	}
	s.ha.slave, s.ha.follow = sl, addr
	return nil
}

// registered takes a nameserver's answer to the registration: a slave
// learns its master's addresses from it.
func (s *Server) registered(res *gantryv1.RegisterBrokerResponse) {
	if !s.b.IsSlave() {
		return
	}
	if a := res.GetMasterAddr(); a != "" {
		s.b.SetMasterAddr(a)
	}
	// In controller mode (epochs) the controller names the master, not the
	// nameservers, which may still list an old one.
	if a := res.GetMasterHaAddr(); a != "" && s.b.Config().HAMasterAddress == "" && s.ha.epochs == nil {
		if err := s.followMaster(a); err != nil {
			s.log.Error("cannot replicate from the master the nameserver names", "ha_addr", a, "err", err)
		}
	}
}

// stopSlave stops a slave's follower for good: first of all at Close, so
// that nothing appends to the log while the store closes.
func (s *Server) stopSlave() {
	s.ha.mu.Lock()
	defer s.ha.mu.Unlock()
	s.ha.closed = true
	if s.ha.slave != nil {
		_ = s.ha.slave.Close()
		s.ha.slave = nil
	}
}

// closeMaster closes a master's HA port, once the broker's calls are done.
func (s *Server) closeMaster() error {
	if s.ha.master == nil {
		return nil
	}
	s.b.SetReplication(nil)
	err := s.ha.master.Close()
	if s.ha.mux != nil {
		_ = s.ha.mux.Close()
	}
	return err
}

// HAAddr returns a master's advertised HA address (registered with the
// nameservers), "" on a slave.
func (s *Server) HAAddr() string { return s.ha.addr }

// SlaveStatus returns a slave's replication state; ok is false on a
// master or while the slave does not know its master's HA address.
func (s *Server) SlaveStatus() (st replication.SlaveStatus, ok bool) {
	s.ha.mu.Lock()
	defer s.ha.mu.Unlock()
	if s.ha.slave == nil {
		return st, false
	}
	return s.ha.slave.Status(), true
}

// Slaves returns what a master knows of its slaves; nil on a slave.
func (s *Server) Slaves() []replication.SlaveInfo {
	if s.ha.master == nil {
		return nil
	}
	return s.ha.master.Slaves()
}

// haReporter passes the replication state to the Admin service's HAStatus
// (grpcapi.HAReporter) as plain values.
type haReporter struct{ s *Server }

func (r haReporter) HAReport() grpcapi.HAReport {
	s := r.s
	rep := grpcapi.HAReport{LogEnd: s.b.ReplicaLog().MaxOffset()}
	for _, sl := range s.Slaves() {
		rep.Slaves = append(rep.Slaves, grpcapi.HASlave{ID: sl.ID, Addr: sl.Addr, Connected: sl.Connected, Acked: sl.Acked})
	}
	s.ha.mu.Lock()
	defer s.ha.mu.Unlock()
	if s.ha.slave != nil {
		st := s.ha.slave.Status()
		rep.Following = true
		rep.Follower = grpcapi.HAFollower{MasterAddr: s.ha.follow, Connected: st.Connected, End: st.End, MasterEnd: st.MasterEnd,
			MetaSnapshots: st.MetaSnapshots, LastErr: st.LastErr, Stopped: st.Stopped}
	}
	return rep
}
