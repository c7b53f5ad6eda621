package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/remotingapi"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/nameserver"
	"github.com/gantrymq/gantry/replication/controller"
)

// Controller-mode settings of the embedded group, short so that a test's
// failover takes seconds: a master is declared dead after ControllerBroker
// Timeout without a heartbeat, and its lease (MemberMasterLease) ends well
// before, so it never acknowledges a write after a successor may be
// elected. Options.Broker and Options.Controller may change them.
const (
	MemberHeartbeatInterval = 200 * time.Millisecond
	MemberMasterLease       = time.Second
	ControllerBrokerTimeout = 2 * time.Second
	ControllerScanInterval  = 100 * time.Millisecond
	controllerRaftTimeout   = 100 * time.Millisecond // one member: no peer to wait for
	controllerID            = "c1"
	groupStartWait          = 60 * time.Second
	controllerShutdownWait  = 10 * time.Second
	masterPollInterval      = 10 * time.Millisecond
)

// errControllerMode refuses the static master's lifecycle calls in
// controller mode, where no broker is the master for good.
var errControllerMode = errors.New("embedded: the broker group runs in controller mode (Options.Replicas): use StopMember, KillMember and StartMember")

// controllerNode is the group's one-member controller.
type controllerNode struct {
	ctl      *controller.Controller
	svc      *controller.Service
	addr     string // gRPC
	raftAddr string
	done     chan error // Serve's return
}

// memberNode is one broker of a controller-mode group.
type memberNode struct {
	id  int64
	cfg server.Config  // listen addresses fixed at Start, kept across restarts
	m   *server.Member // nil while stopped
	// busy is set while the broker starts or stops, which happens outside
	// Cluster.mu (a start is I/O): another start or stop is refused.
	busy bool
	// first holds, until the first start, the listeners of the ports
	// chosen here (gRPC, HTTP, remoting, HA; nil for a configured one), so
	// that no other process takes a port between its choice and the bind.
	first [4]net.Listener
}

// startGroup starts the controller and the Replicas members, then waits
// for the controller's master to take writes.
func (c *Cluster) startGroup(ctx context.Context) error {
	if c.opts.Slaves > 0 {
		return fmt.Errorf("embedded: Options.Slaves %d and Replicas %d: a controller-mode group elects its master; set Replicas only", c.opts.Slaves, c.opts.Replicas)
	}
	if err := c.startController(); err != nil {
		return err
	}
	for id := int64(1); id <= int64(c.opts.Replicas); id++ {
		listen := [3]string{"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"}
		if id == 1 { // the first usually becomes master: it gets the configured ports
			listen = [3]string{c.grpcListen, c.httpListen, c.remotingListen}
		}
		cfg, first, err := c.memberConfig(id, listen)
		if err != nil {
			return err
		}
		c.members = append(c.members, &memberNode{id: id, cfg: cfg, first: first})
		if err := c.StartMember(ctx, id); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, groupStartWait)
	defer cancel()
	_, err := c.WaitMaster(wctx, 0)
	return err
}

// startController starts the one-member controller: raft and its data in
// Dir/controller, its gRPC service on ControllerListen.
func (c *Cluster) startController() error {
	raftAddr, err := freePort(orDefault(c.opts.ControllerRaftListen, "127.0.0.1:0"))
	if err != nil {
		return fmt.Errorf("embedded: controller raft port: %w", err)
	}
	lis, err := net.Listen("tcp", orDefault(c.opts.ControllerListen, "127.0.0.1:0"))
	if err != nil {
		return fmt.Errorf("embedded: controller listen: %w", err)
	}
	addr := lis.Addr().String()
	cc := controller.Config{
		ID: controllerID, BindAddr: raftAddr, DataDir: filepath.Join(c.dir, "controller"), GRPCAddr: addr,
		Peers:            []controller.Peer{{ID: controllerID, Addr: raftAddr, GRPCAddr: addr}},
		HeartbeatTimeout: controllerRaftTimeout, ElectionTimeout: controllerRaftTimeout, LeaderLeaseTimeout: controllerRaftTimeout / 2,
		BrokerTimeout: ControllerBrokerTimeout, ScanInterval: ControllerScanInterval,
		Logger: c.log.With("component", "controller"),
	}
	if c.tls != nil {
		c.tls.controller(&cc)
	}
	if c.opts.Controller != nil {
		c.opts.Controller(&cc)
	}
	ctl, err := controller.New(cc)
	if err != nil {
		lis.Close()
		return err
	}
	svc, err := controller.NewService(ctl)
	if err != nil {
		lis.Close()
		return errors.Join(err, ctl.Close())
	}
	n := &controllerNode{ctl: ctl, svc: svc, addr: addr, raftAddr: raftAddr, done: make(chan error, 1)}
	go func() { n.done <- svc.Serve(lis) }() // joined by stopController
	c.ctl = n
	// A leader first, so that broker 1, started first, registers first
	// and a new group's controller makes it master.
	for deadline := time.Now().Add(groupStartWait); !ctl.IsLeader(); time.Sleep(masterPollInterval) {
		if time.Now().After(deadline) {
			return fmt.Errorf("embedded: the controller elected no raft leader in %v", groupStartWait)
		}
	}
	return nil
}

// stopController stops the controller's service, then raft.
func (c *Cluster) stopController() error {
	n := c.ctl
	if n == nil {
		return nil
	}
	c.ctl = nil
	ctx, cancel := context.WithTimeout(context.Background(), controllerShutdownWait)
	defer cancel()
	return errors.Join(n.svc.Close(ctx), <-n.done, n.ctl.Close())
}

// memberConfig is broker id's configuration, without listeners, in
// controller mode, listening on listen's addresses (gRPC, HTTP, remoting;
// a port 0 replaced by one chosen now) and, when the remoting port was
// chosen here, on an HA port chosen too. It returns the listeners of the
// ports it chose, for the first start.
func (c *Cluster) memberConfig(id int64, listen [3]string) (cfg server.Config, first [4]net.Listener, err error) {
	defer func() {
		if err != nil {
			closeListeners(first[:])
		}
	}()
	bc := c.brokerConfig(filepath.Join(c.dir, fmt.Sprintf("broker-%d", id), "store"))
	bc.EnableControllerMode, bc.ControllerAddr, bc.BrokerID = true, []string{c.ctl.addr}, id
	_, rport, _ := net.SplitHostPort(listen[2])
	var addrs [3]string
	for i, a := range listen {
		if addrs[i], first[i], err = listenIfAny(a); err != nil {
			return cfg, first, fmt.Errorf("embedded: broker %d: %w", id, err)
		}
	}
	host, port, err := net.SplitHostPort(addrs[2])
	if err != nil {
		return cfg, first, fmt.Errorf("embedded: broker %d remoting address: %w", id, err)
	}
	bc.GRPCListenAddr, bc.HTTPListenAddr, bc.BindAddress = addrs[0], addrs[1], host
	if bc.ListenPort, err = strconv.Atoi(port); err != nil {
		return cfg, first, fmt.Errorf("embedded: broker %d remoting port: %w", id, err)
	}
	if bc.HAListenPort == 0 && rport == "0" { // else listenPort+1, RocketMQ's
		var ha string
		if ha, first[3], err = listenIfAny(net.JoinHostPort(host, "0")); err != nil {
			return cfg, first, fmt.Errorf("embedded: broker %d HA port: %w", id, err)
		}
		_, hp, _ := net.SplitHostPort(ha)
		bc.HAListenPort, _ = strconv.Atoi(hp)
	}
	var rc remotingapi.Config
	if c.opts.Remoting != nil {
		c.opts.Remoting(&rc)
	}
	return server.Config{Broker: bc, Remoting: rc}, first, nil
}

// listenIfAny returns addr and no listener, or with port 0 the address of
// a listener it opens on a port chosen by the system.
func listenIfAny(addr string) (string, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port != "0" {
		return addr, nil, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", nil, err
	}
	return l.Addr().String(), l, nil
}

// closeListeners closes the listeners that are set.
func closeListeners(ls []net.Listener) {
	for _, l := range ls {
		if l != nil {
			l.Close()
		}
	}
}

// memberDefaults are the controller-mode settings of the group's brokers,
// before Options.Broker.
func memberDefaults(bc *broker.Config) {
	bc.BrokerHeartbeatInterval, bc.MasterLease = MemberHeartbeatInterval, MemberMasterLease
}

// freePort returns addr, or with port 0 the address of a port free now.
func freePort(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port != "0" {
		return addr, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// member returns broker id of the controller-mode group.
func (c *Cluster) member(id int64) (*memberNode, error) {
	if id < 1 || int(id) > len(c.members) {
		return nil, fmt.Errorf("embedded: no broker %d in the group (Options.Replicas is %d)", id, c.opts.Replicas)
	}
	return c.members[id-1], nil
}

// StartMember starts broker id (1..Options.Replicas) of a controller-mode
// group, after StopMember or KillMember, on the same store and addresses.
// It returns once the broker serves (as a slave until the controller
// names its role); it registers with the controller from then on.
func (c *Cluster) StartMember(ctx context.Context, id int64) error {
	c.mu.Lock()
	n, err := c.member(id)
	switch {
	case err != nil:
	case n.busy:
		err = fmt.Errorf("embedded: broker %d is starting or stopping", id)
	case n.m != nil:
		err = fmt.Errorf("embedded: broker %d already running", id)
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	n.busy = true
	cfg := n.cfg
	cfg.GRPCListener, cfg.HTTPListener, cfg.RemotingListener, cfg.HAListener = n.first[0], n.first[1], n.first[2], n.first[3]
	n.first = [4]net.Listener{} // StartMember owns them now, and closes them on failure
	c.mu.Unlock()
	m, err := server.StartMember(ctx, cfg)
	c.mu.Lock()
	defer c.mu.Unlock()
	n.busy, n.m = false, m
	if err != nil {
		return fmt.Errorf("embedded: start broker %d: %w", id, err)
	}
	return nil
}

// StopMember shuts broker id down gracefully: it stops heartbeating, then
// unregisters from the nameserver and closes its store. A stopped master
// is replaced once the controller misses its heartbeats
// (ControllerBrokerTimeout).
func (c *Cluster) StopMember(ctx context.Context, id int64) error {
	return c.endMember(id, func(m *server.Member) error { return m.Close(ctx) })
}

// KillMember stops broker id as a crash would look to the controller, the
// nameserver and clients: no more heartbeats, no unregistration,
// connections cut (the store is still closed cleanly).
func (c *Cluster) KillMember(id int64) error {
	return c.endMember(id, (*server.Member).Kill)
}

func (c *Cluster) endMember(id int64, end func(*server.Member) error) error {
	c.mu.Lock()
	n, err := c.member(id)
	if err != nil || n.m == nil || n.busy {
		c.mu.Unlock()
		if err == nil && n.busy {
			err = fmt.Errorf("embedded: broker %d is starting or stopping", id)
		}
		return err
	}
	m := n.m
	n.m, n.busy = nil, true
	c.mu.Unlock()
	err = end(m) // outside the lock: Member and MasterID answer meanwhile
	c.mu.Lock()
	n.busy = false
	c.mu.Unlock()
	return err
}

// Member returns broker id of a controller-mode group (its Server, role
// and epochs), nil while it is stopped.
func (c *Cluster) Member(id int64) *server.Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.member(id)
	if err != nil {
		return nil
	}
	return n.m
}

// MasterID returns the id of the broker serving as the controller-mode
// group's master, with its master epoch; 0 while none does (an election,
// a role change in progress).
func (c *Cluster) MasterID() (id int64, epoch int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.masterLocked()
}

func (c *Cluster) masterLocked() (id int64, epoch int32) {
	for _, n := range c.members {
		if n.m != nil && n.m.IsMaster() && n.m.Epoch() >= epoch {
			id, epoch = n.id, n.m.Epoch()
		}
	}
	return id, epoch
}

// WaitMaster waits until a broker serves as the group's master in a
// master epoch after after (0: any), registered with the nameserver as
// brokerId 0 and, a SYNC_MASTER, with the in-sync slaves a send needs
// (inSyncReplicas-1, at most the other running brokers), and returns its
// id. After killing the master of epoch e, WaitMaster(ctx, e) returns its
// successor.
func (c *Cluster) WaitMaster(ctx context.Context, after int32) (int64, error) {
	if c.opts.Replicas == 0 {
		return 0, errors.New("embedded: WaitMaster needs a controller-mode group (Options.Replicas)")
	}
	var last string
	for {
		id, ok, why := c.masterReady(after)
		if ok {
			return id, nil
		}
		last = why
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("embedded: no master in an epoch after %d: %s: %w", after, last, ctx.Err())
		case <-time.After(masterPollInterval):
		}
	}
}

// masterReady reports whether the group has a master ready for writes in
// an epoch after after, or why not.
func (c *Cluster) masterReady(after int32) (int64, bool, string) {
	c.mu.Lock()
	id, ep := c.masterLocked()
	running := 0
	for _, n := range c.members {
		if n.m != nil {
			running++
		}
	}
	var srv *server.Server
	var bc broker.Config
	if id != 0 {
		srv, bc = c.members[id-1].m.Server(), c.members[id-1].cfg.Broker.WithDefaults()
	}
	ns, ctl := c.ns, c.ctl
	c.mu.Unlock()
	switch {
	case id == 0 || srv == nil:
		return 0, false, "no broker serves as master"
	case ep <= after:
		return 0, false, fmt.Sprintf("broker %d is master in epoch %d", id, ep)
	case ns != nil && !registeredAs(ns.Registry().Brokers(), bc.BrokerName, 0, srv.GRPCAddr()):
		return 0, false, fmt.Sprintf("master %d (epoch %d) is not registered with the nameserver yet", id, ep)
	}
	need := 0
	if bc.BrokerRole == broker.SyncMaster {
		need = min(bc.InSyncReplicas-1, running-1)
	}
	g, ok := ctl.ctl.Group(bc.BrokerName)
	if !ok || g.MasterID != id || g.MasterEpoch != ep || len(g.InSync)-1 < need {
		return 0, false, fmt.Sprintf("master %d (epoch %d) waits for %d in-sync slaves; the controller has %+v", id, ep, need, g)
	}
	return id, true, ""
}

// ControllerAddr is the controller's gRPC address (controllerAddr of the
// brokers, gantry admin -a); "" without a controller-mode group.
func (c *Cluster) ControllerAddr() string {
	if c.ctl == nil {
		return ""
	}
	return c.ctl.addr
}

// ControllerRaftAddr is the controller's raft address.
func (c *Cluster) ControllerRaftAddr() string {
	if c.ctl == nil {
		return ""
	}
	return c.ctl.raftAddr
}

// registeredAs reports whether bs holds broker id of group name at addr.
func registeredAs(bs []nameserver.BrokerInfo, name string, id int64, addr string) bool {
	for _, b := range bs {
		if b.BrokerName == name && b.BrokerID == id && b.Addr == addr {
			return true
		}
	}
	return false
}

// masterServer is the controller-mode group's master's Server, nil while
// none serves.
func (c *Cluster) masterServer() *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, _ := c.masterLocked()
	if id == 0 {
		return nil
	}
	return c.members[id-1].m.Server()
}

// closeGroup stops the members, then the controller.
func (c *Cluster) closeGroup(ctx context.Context) error {
	var errs []error
	for _, n := range c.members {
		errs = append(errs, c.StopMember(ctx, n.id))
	}
	return errors.Join(append(errs, c.stopController())...)
}
