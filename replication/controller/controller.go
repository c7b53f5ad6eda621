// Package controller is the replication controller: a raft group
// (hashicorp/raft, raft-boltdb) that keeps, per broker group, the replicas,
// the master and its epoch, and the in-sync set and its epoch, and elects a
// new master from the in-sync set. See docs/REPLICATION.md, "Controller".
//
// The FSM is the replicated state; Controller is one raft member that
// applies commands on the leader and serves reads of its local copy.
// Service serves a member over gRPC (api/gantry/v1/controller.proto) and,
// on the leader, judges the brokers' liveness and elects masters; Client
// is the brokers' and admin tools' side of it.
package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/gantrymq/gantry/auth"
)

// storeLockTimeout bounds the wait for the raft store's file lock, held by
// another process using the same DataDir.
const storeLockTimeout = 2 * time.Second

// Peer is one member of the controller group.
type Peer struct {
	ID   string // raft server id, unique in the group
	Addr string // its raft address, host:port
	// GRPCAddr is where it serves the Controller gRPC service, host:port;
	// required of every peer when Config.GRPCAddr is set. A follower names
	// it to clients as the leader's address.
	GRPCAddr string
}

// Config configures one controller member.
type Config struct {
	ID       string // this member's raft server id; required
	BindAddr string // raft TCP listen address, host:port; required
	// AdvertiseAddr is the address the other members dial; default
	// BindAddr, which then must not be an unspecified (0.0.0.0) host.
	AdvertiseAddr string
	DataDir       string // raft log, stable store and snapshots; required
	// Peers is the whole group, this member included; required. A member
	// with no raft state yet bootstraps the group with it (every member
	// may: the configurations are identical); a member with state keeps
	// the configuration its log holds.
	Peers []Peer

	ApplyTimeout       time.Duration // a command's wait to be queued; default 5s
	HeartbeatTimeout   time.Duration // default 1s (raft's)
	ElectionTimeout    time.Duration // default 1s (raft's)
	LeaderLeaseTimeout time.Duration // default 500ms (raft's)
	SnapshotThreshold  uint64        // log entries between snapshots; default 1024
	SnapshotRetain     int           // snapshots kept on disk; default 2
	Logger             *slog.Logger  // default slog.Default()

	// The gRPC service (Service; docs/REPLICATION.md, "Running gantry
	// controller").

	// GRPCAddr is the service's listen address; "" for a member without
	// the service. The member's own Peers entry advertises it.
	GRPCAddr string
	// BrokerTimeout: the leader marks a broker dead after this long without
	// a heartbeat (a new leader first gives every broker this long);
	// default 10s (RocketMQ's brokerNotActiveTimeoutMillis).
	BrokerTimeout time.Duration
	// ScanInterval is how often the leader looks for silent brokers and
	// masterless groups; default 1s, at most BrokerTimeout.
	ScanInterval time.Duration
	// UncleanElection lets the leader's automatic elections pick a broker
	// outside the in-sync set when no in-sync broker is alive: messages the
	// old master acknowledged may be lost. Default off.
	UncleanElection bool
	// Now is the clock of the broker timeouts; default time.Now.
	Now func() time.Time
	// Guard, when set, authenticates and authorizes every call of the
	// service (docs/SECURITY.md, "Cluster"): the brokers' calls and group
	// reads need a cluster user, ElectMaster an admin, the members'
	// metadata nothing. nil: authentication off. The raft port is not
	// covered: mutual TLS or a private network protects it.
	Guard *auth.Guard

	// TLS (docs/SECURITY.md, "TLS"; tls.go).

	// TLS, if set, is the server side of TLS on the raft port and on the
	// gRPC service's listeners; each also takes plaintext connections
	// unless RequireTLS. A GetConfigForClient in it is kept (certificates
	// reloaded on change: internal/tlsx). Default nil: plaintext.
	TLS *tls.Config
	// RequireTLS, with TLS, refuses plaintext raft peers and gRPC clients
	// (tls.server.mode enforcing); a gRPC client is told why.
	RequireTLS bool
	// RaftDial, if set, dials the other members' raft addresses: a TLS
	// dialer showing this member's certificate where the peers require
	// one. Used with TLS only; default plain TCP.
	RaftDial func(ctx context.Context, addr string) (net.Conn, error)
}

func (c *Config) setDefaults() {
	if c.AdvertiseAddr == "" {
		c.AdvertiseAddr = c.BindAddr
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = 5 * time.Second
	}
	def := raft.DefaultConfig()
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = def.HeartbeatTimeout
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = def.ElectionTimeout
	}
	if c.LeaderLeaseTimeout == 0 {
		c.LeaderLeaseTimeout = def.LeaderLeaseTimeout
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 1024
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = 2
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.BrokerTimeout == 0 {
		c.BrokerTimeout = 10 * time.Second
	}
	if c.ScanInterval == 0 {
		c.ScanInterval = min(time.Second, c.BrokerTimeout)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports the first problem of the configuration, after defaults.
func (c Config) Validate() error {
	c.setDefaults()
	return c.validate(true)
}

// validate checks c (defaults set); needNet is false for the in-memory
// transport of the tests, whose addresses are not host:port.
func (c *Config) validate(needNet bool) error {
	if c.ID == "" {
		return errors.New("controller: config: ID is empty")
	}
	if needNet {
		if c.DataDir == "" {
			return errors.New("controller: config: DataDir is empty")
		}
		if _, _, err := net.SplitHostPort(c.BindAddr); err != nil {
			return fmt.Errorf("controller: config: BindAddr %q: %w", c.BindAddr, err)
		}
		host, port, err := net.SplitHostPort(c.AdvertiseAddr)
		if err != nil {
			return fmt.Errorf("controller: config: AdvertiseAddr %q: %w", c.AdvertiseAddr, err)
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) || port == "0" {
			return fmt.Errorf("controller: config: AdvertiseAddr %q is not an address peers can dial", c.AdvertiseAddr)
		}
	}
	if c.ApplyTimeout < 0 {
		return fmt.Errorf("controller: config: ApplyTimeout %v is negative", c.ApplyTimeout)
	}
	if c.SnapshotRetain < 1 {
		return fmt.Errorf("controller: config: SnapshotRetain %d, want ≥ 1", c.SnapshotRetain)
	}
	// raft's own rules for the timeouts (each at least 5ms, the lease
	// within the heartbeat timeout, the election timeout at least the
	// heartbeat timeout).
	if err := raft.ValidateConfig(c.raftConfig(hclog.NewNullLogger())); err != nil {
		return fmt.Errorf("controller: config: %w", err)
	}
	ids, addrs := map[string]bool{}, map[string]bool{}
	self := false
	for _, p := range c.Peers {
		if p.ID == "" || p.Addr == "" {
			return fmt.Errorf("controller: config: peer %+v needs an ID and an Addr", p)
		}
		if ids[p.ID] || addrs[p.Addr] {
			return fmt.Errorf("controller: config: peer %+v repeats an ID or an Addr", p)
		}
		ids[p.ID], addrs[p.Addr] = true, true
		if p.ID == c.ID {
			self = true
			if needNet && p.Addr != c.AdvertiseAddr {
				return fmt.Errorf("controller: config: Peers gives this member (%s) address %s, AdvertiseAddr is %s", c.ID, p.Addr, c.AdvertiseAddr)
			}
		}
	}
	if !self {
		return fmt.Errorf("controller: config: Peers does not list this member %q", c.ID)
	}
	if c.BrokerTimeout < 0 {
		return fmt.Errorf("controller: config: BrokerTimeout %v is negative", c.BrokerTimeout)
	}
	if c.ScanInterval < 0 || c.ScanInterval > c.BrokerTimeout {
		return fmt.Errorf("controller: config: ScanInterval %v, want 0 < ScanInterval ≤ BrokerTimeout (%v)", c.ScanInterval, c.BrokerTimeout)
	}
	switch {
	case c.RequireTLS && c.TLS == nil:
		return errors.New("controller: config: RequireTLS needs TLS")
	case c.RequireTLS && c.RaftDial == nil:
		return errors.New("controller: config: RequireTLS needs RaftDial: the other members require TLS of this one too")
	}
	return c.validateGRPC()
}

// validateGRPC checks the gRPC addresses: with GRPCAddr set, every peer
// advertises a dialable one, no two the same, and this member's matches
// GRPCAddr (its port, when GRPCAddr listens on every interface).
func (c *Config) validateGRPC() error {
	if c.GRPCAddr == "" {
		for _, p := range c.Peers {
			if p.GRPCAddr != "" {
				return fmt.Errorf("controller: config: peer %s has a gRPC address but GRPCAddr (this member's listen address) is empty", p.ID)
			}
		}
		return nil
	}
	lhost, lport, err := net.SplitHostPort(c.GRPCAddr)
	if err != nil {
		return fmt.Errorf("controller: config: GRPCAddr %q: %w", c.GRPCAddr, err)
	}
	seen := map[string]bool{}
	for _, p := range c.Peers {
		host, port, err := net.SplitHostPort(p.GRPCAddr)
		if err != nil {
			return fmt.Errorf("controller: config: peer %s: gRPC address %q: %w", p.ID, p.GRPCAddr, err)
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) || port == "0" {
			return fmt.Errorf("controller: config: peer %s: gRPC address %q is not an address clients can dial", p.ID, p.GRPCAddr)
		}
		if seen[p.GRPCAddr] {
			return fmt.Errorf("controller: config: peer %s repeats gRPC address %s", p.ID, p.GRPCAddr)
		}
		seen[p.GRPCAddr] = true
		if p.ID != c.ID {
			continue
		}
		if ip := net.ParseIP(lhost); lhost == "" || (ip != nil && ip.IsUnspecified()) {
			if port != lport {
				return fmt.Errorf("controller: config: Peers gives this member (%s) gRPC address %s, GRPCAddr listens on port %s", c.ID, p.GRPCAddr, lport)
			}
		} else if p.GRPCAddr != c.GRPCAddr {
			return fmt.Errorf("controller: config: Peers gives this member (%s) gRPC address %s, GRPCAddr is %s", c.ID, p.GRPCAddr, c.GRPCAddr)
		}
	}
	return nil
}

// ParsePeers reads a controller group from its command-line form: members
// separated by ',' or ';', each id=raftAddr=grpcAddr (or id=raftAddr for
// a member without the gRPC service).
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' }) {
		f = strings.TrimSpace(f)
		parts := strings.Split(f, "=")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" || (len(parts) == 3 && parts[2] == "") {
			return nil, fmt.Errorf("controller: peer %q: want id=raftAddr=grpcAddr", f)
		}
		p := Peer{ID: parts[0], Addr: parts[1]}
		if len(parts) == 3 {
			p.GRPCAddr = parts[2]
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("controller: no peers: want id=raftAddr=grpcAddr, comma-separated")
	}
	return out, nil
}

// raftConfig is the raft configuration of this member.
func (c *Config) raftConfig(logger hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.ID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.Logger = logger
	rc.NoLegacyTelemetry = true
	return rc
}

// ErrNotLeader is matched (errors.Is) by every NotLeaderError.
var ErrNotLeader = errors.New("controller: not the leader")

// NotLeaderError says a command reached a member that is not the raft
// leader; LeaderID and LeaderAddr name the leader this member knows of
// ("" when none is known, e.g. during an election).
type NotLeaderError struct {
	LeaderID, LeaderAddr string
	// MayHaveApplied is set when leadership was lost after the command was
	// queued: it may still be committed by the next leader.
	MayHaveApplied bool
}

func (e *NotLeaderError) Error() string {
	s := "controller: not the leader"
	if e.LeaderID != "" {
		s += fmt.Sprintf("; the leader is %s at %s", e.LeaderID, e.LeaderAddr)
	} else {
		s += "; no leader known"
	}
	if e.MayHaveApplied {
		s += " (leadership was lost after the command was queued: it may still apply)"
	}
	return s
}

func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// ErrClosed is returned by calls on a closed controller.
var ErrClosed = errors.New("controller: closed")

// parts are the raft stores and transport; New builds the durable ones, the
// tests in-memory ones.
type parts struct {
	logs   raft.LogStore
	stable raft.StableStore
	snaps  raft.SnapshotStore
	trans  raft.Transport
	closer func() error // closes what the parts hold open, after raft
}

// Controller is one member of the controller group.
type Controller struct {
	cfg  Config
	fsm  *FSM
	raft *raft.Raft
	p    parts

	mu      sync.Mutex
	closed  bool
	waiters sync.WaitGroup // calls in progress and their goroutines waiting on raft futures
}

// New opens (or creates) the member's state in cfg.DataDir and starts raft
// on a TCP transport bound to cfg.BindAddr.
func New(cfg Config) (*Controller, error) {
	cfg.setDefaults()
	if err := cfg.validate(true); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("controller: data dir: %w", err)
	}
	logger := hclogFor(cfg.Logger)
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(cfg.DataDir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: storeLockTimeout},
	})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("controller: raft store in %s is in use by another process: %w", cfg.DataDir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("controller: open raft store in %s: %w", cfg.DataDir, err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotRetain, logger)
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("controller: open snapshot store in %s: %w", cfg.DataDir, err)
	}
	adv, err := net.ResolveTCPAddr("tcp", cfg.AdvertiseAddr)
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("controller: AdvertiseAddr %q: %w", cfg.AdvertiseAddr, err)
	}
	var trans *raft.NetworkTransport
	if cfg.TLS != nil {
		trans, err = tlsTransport(cfg, adv, logger)
	} else {
		trans, err = raft.NewTCPTransportWithLogger(cfg.BindAddr, adv, 3, 10*time.Second, logger)
	}
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("controller: listen on %s: %w", cfg.BindAddr, err)
	}
	c, err := start(cfg, parts{
		logs: store, stable: store, snaps: snaps, trans: trans,
		closer: func() error {
			// CloseStreams closes the pooled connections to the peers, so
			// their handlers (and ours, once they close theirs) end.
			trans.CloseStreams()
			return errors.Join(trans.Close(), store.Close())
		},
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// start runs raft over the given parts; it closes them if it fails.
func start(cfg Config, p parts) (_ *Controller, err error) {
	defer func() {
		if err != nil && p.closer != nil {
			err = errors.Join(err, p.closer())
		}
	}()
	rc := cfg.raftConfig(hclogFor(cfg.Logger))
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("controller: raft config: %w", err)
	}
	has, err := raft.HasExistingState(p.logs, p.stable, p.snaps)
	if err != nil {
		return nil, fmt.Errorf("controller: read raft state: %w", err)
	}
	if !has {
		var servers []raft.Server
		for _, peer := range cfg.Peers {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(peer.ID), Address: raft.ServerAddress(peer.Addr)})
		}
		if err := raft.BootstrapCluster(rc, p.logs, p.stable, p.snaps, p.trans, raft.Configuration{Servers: servers}); err != nil {
			return nil, fmt.Errorf("controller: bootstrap: %w", err)
		}
	}
	fsm := NewFSM()
	r, err := raft.NewRaft(rc, fsm, p.logs, p.stable, p.snaps, p.trans)
	if err != nil {
		return nil, fmt.Errorf("controller: start raft: %w", err)
	}
	return &Controller{cfg: cfg, fsm: fsm, raft: r, p: p}, nil
}

// Register adds or updates a replica of a broker group (RegisterReplica).
func (c *Controller) Register(ctx context.Context, cmd RegisterReplica) (GroupState, error) {
	return c.apply(ctx, cmd)
}

// AlterInSync replaces a group's in-sync set on behalf of its master.
func (c *Controller) AlterInSync(ctx context.Context, cmd AlterInSync) (GroupState, error) {
	return c.apply(ctx, cmd)
}

// ElectMaster elects a group's master (see ElectMaster for the rule).
func (c *Controller) ElectMaster(ctx context.Context, cmd ElectMaster) (GroupState, error) {
	return c.apply(ctx, cmd)
}

// ReplicaDead marks a replica dead.
func (c *Controller) ReplicaDead(ctx context.Context, cmd ReplicaDead) (GroupState, error) {
	return c.apply(ctx, cmd)
}

// apply commits cmd through raft on the leader and returns the group's
// state after it, or the FSM's refusal, or a *NotLeaderError.
func (c *Controller) apply(ctx context.Context, cmd any) (GroupState, error) {
	b, err := encodeCommand(cmd)
	if err != nil {
		return GroupState{}, err
	}
	f, err := c.begin(ctx, func(timeout time.Duration) raft.Future { return c.raft.Apply(b, timeout) })
	if err != nil {
		return GroupState{}, err
	}
	if err := c.await(ctx, f, true); err != nil {
		return GroupState{}, err
	}
	switch r := f.(raft.ApplyFuture).Response().(type) {
	case GroupState:
		return r, nil
	case error:
		return GroupState{}, r
	default:
		return GroupState{}, fmt.Errorf("controller: apply returned %T", r)
	}
}

// LeaderGroup returns a group's state as the leader has it once every
// command committed before the call is applied (a raft barrier: a member
// deposed without knowing it cannot commit one). A follower returns a
// *NotLeaderError; Group reads any member's copy without this wait.
func (c *Controller) LeaderGroup(ctx context.Context, name string) (GroupState, bool, error) {
	f, err := c.begin(ctx, c.raft.Barrier)
	if err != nil {
		return GroupState{}, false, err
	}
	if err := c.await(ctx, f, false); err != nil {
		return GroupState{}, false, err
	}
	g, ok := c.fsm.Group(name)
	return g, ok, nil
}

// begin starts a raft operation on the leader; the caller must then
// await the future it returns.
func (c *Controller) begin(ctx context.Context, op func(timeout time.Duration) raft.Future) (raft.Future, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.waiters.Add(1) // under mu, so Close's Wait never races an Add
	c.mu.Unlock()
	if c.raft.State() != raft.Leader {
		c.waiters.Done()
		return nil, c.notLeader(false)
	}
	// The timeout bounds the wait for raft to take the operation in.
	timeout := c.cfg.ApplyTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = max(time.Until(d), time.Millisecond)
	}
	return op(timeout), nil
}

// await waits for a future begin returned, or for ctx. raft resolves every
// future, at the latest on shutdown; the waiting goroutine lets ctx end
// the call earlier and is joined by Close. written says the operation
// writes state (a lost leadership may still commit it).
func (c *Controller) await(ctx context.Context, f raft.Future, written bool) error {
	done := make(chan struct{})
	go func() {
		defer c.waiters.Done()
		_ = f.Error()
		close(done)
	}()
	select {
	case <-ctx.Done():
		return fmt.Errorf("controller: operation queued, outcome unknown: %w", ctx.Err())
	case <-done:
	}
	err := f.Error()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader):
		return c.notLeader(false)
	case errors.Is(err, raft.ErrLeadershipLost):
		return c.notLeader(written)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	}
	return fmt.Errorf("controller: raft: %w", err)
}

func (c *Controller) notLeader(mayHaveApplied bool) error {
	addr, id := c.raft.LeaderWithID()
	return &NotLeaderError{LeaderID: string(id), LeaderAddr: string(addr), MayHaveApplied: mayHaveApplied}
}

// Group returns this member's copy of a group's state. On a follower it may
// lag the leader by the commands not yet applied here.
func (c *Controller) Group(name string) (GroupState, bool) { return c.fsm.Group(name) }

// Groups returns this member's copy of all groups, sorted by name.
func (c *Controller) Groups() []GroupState { return c.fsm.Groups() }

// IsLeader reports whether this member is the raft leader now.
func (c *Controller) IsLeader() bool { return c.raft.State() == raft.Leader }

// Leader returns the leader this member knows of ("" when none).
func (c *Controller) Leader() (id, addr string) {
	a, i := c.raft.LeaderWithID()
	return string(i), string(a)
}

// ID is this member's raft server id.
func (c *Controller) ID() string { return c.cfg.ID }

// leaderTerm returns the raft term and whether this member leads in it. A
// member that loses and regains leadership does so in a new term.
func (c *Controller) leaderTerm() (uint64, bool) {
	term := c.raft.CurrentTerm()
	return term, c.raft.State() == raft.Leader && c.raft.CurrentTerm() == term
}

// Snapshot takes a raft snapshot now (normally raft takes one every
// SnapshotThreshold entries).
func (c *Controller) Snapshot() error {
	if err := c.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("controller: snapshot: %w", err)
	}
	return nil
}

// Close stops raft, waits for every goroutine the controller started and
// closes the stores and the transport. It is safe to call twice.
func (c *Controller) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	err := c.raft.Shutdown().Error()
	c.waiters.Wait()
	if c.p.closer != nil {
		err = errors.Join(err, c.p.closer())
	}
	if err != nil {
		return fmt.Errorf("controller: close: %w", err)
	}
	return nil
}
