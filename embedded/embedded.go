// Package embedded runs a nameserver and a broker inside the calling
// process, on loopback ports, for applications' own tests and for
// `gantry dev`:
//
//	c, err := embedded.Start(ctx, embedded.Options{})
//	if err != nil { ... }
//	defer c.Close(context.Background())
//	producer, err := client.NewProducer(ctx, client.Config{NameServers: []string{c.NameServerAddr()}})
//
// Both also speak RocketMQ's remoting protocol, so the official Apache
// RocketMQ clients work against the cluster too: give them
// NameServerRemotingAddr as their nameserver.
//
// Options.Slaves adds slaves to the broker, a master for good;
// Options.Replicas runs a broker group whose master a controller elects
// instead, for failover tests (KillMember, WaitMaster).
// Options.TLS serves every port with TLS (DevTLS makes certificates).
package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/remotingapi"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/nameserver"
	"github.com/gantrymq/gantry/replication/controller"
)

// Options configures Start. The zero value is ready to use: a temporary
// data directory removed by Close, ports chosen by the system, topics
// created on first send.
type Options struct {
	// Dir holds the broker's store (storePathRootDir = Dir/store). Empty:
	// a new temporary directory, removed by Close.
	Dir string
	// NameServerListen, BrokerListen and HTTPListen are listen addresses:
	// the nameserver's and the broker's gRPC, the broker's metrics and
	// health. Default 127.0.0.1:0 each.
	NameServerListen, BrokerListen, HTTPListen string
	// NameServerRemotingListen and BrokerRemotingListen are the RocketMQ
	// remoting listen addresses of the nameserver (RocketMQ's 9876) and the
	// broker (its listenPort, 10911). Default 127.0.0.1:0 each. RocketMQ
	// clients need the nameserver's as an IP literal, not a host name.
	NameServerRemotingListen, BrokerRemotingListen string
	// NoAutoCreateTopics turns autoCreateTopicEnable off (it is on here).
	NoAutoCreateTopics bool
	// Broker, if set, adjusts the broker's configuration before it starts.
	Broker func(*broker.Config)
	// Remoting, if set, adjusts the broker's RocketMQ remoting front end
	// (its long-poll limit, the young-queue rule of QUERY_CONSUMER_OFFSET)
	// before it starts.
	Remoting func(*remotingapi.Config)
	// Slaves is how many slaves the broker group has besides its master
	// (docs/REPLICATION.md): brokers of the same brokerName with brokerId
	// 1..Slaves and brokerRole SLAVE, each with its store under
	// Dir/slave-<id>, on loopback ports, replicating from the master's HA
	// address the nameserver names. The master's role is what Broker sets
	// (ASYNC_MASTER by default). Default 0.
	Slaves int
	// Slave, if set, adjusts each slave's configuration (after Broker)
	// before it starts; id is its brokerId.
	Slave func(id int64, c *broker.Config)
	// Replicas, when above 0, runs the broker group in controller mode
	// instead (docs/REPLICATION.md): a one-member controller
	// (replication/controller, its raft data under Dir/controller) and
	// Replicas brokers of one brokerName, brokerId 1..Replicas, each a
	// broker/server Member with enableControllerMode and its store under
	// Dir/broker-<id>. The controller elects the master and elects another
	// when it stops heartbeating; brokerRole (Broker sets it; ASYNC_MASTER
	// by default) is only how a master acknowledges. Broker 1 listens on
	// BrokerListen, HTTPListen and BrokerRemotingListen, the others on
	// loopback ports chosen at Start; each keeps its ports across restarts.
	// Start returns once the master takes writes (WaitMaster). Slaves must
	// be 0. Default 0: a single broker (and Slaves).
	Replicas int
	// ControllerListen and ControllerRaftListen are the controller's gRPC
	// and raft listen addresses with Replicas. Default 127.0.0.1:0 each.
	ControllerListen, ControllerRaftListen string
	// Controller, if set, adjusts the controller's configuration (its
	// timeouts, UncleanElection) before it starts.
	Controller func(*controller.Config)
	// TLS, if set, serves every listener with TLS, enforcing unless it
	// says permissive, and makes the brokers and the controller dial with
	// TLS (tls.go; docs/SECURITY.md, "TLS"). Clients then need
	// client.Config.TLS (DevCerts.ClientTLS). Default nil: plaintext.
	TLS *TLSOptions
	// Logger receives both components' logs. Default: discard.
	Logger *slog.Logger
	// Users, when set, turns the brokers' authentication on
	// (authenticationEnabled, docs/SECURITY.md) with these users, written
	// to Dir/acl.json (the brokers' aclFile): every request must then be
	// signed by one of them with the rights it needs. Give Gantry's
	// client its keys in client.Config.Credentials, the official client in
	// producer.WithCredentials and consumer.WithCredentials. Broker may
	// adjust the settings further. Default: authentication off.
	Users []auth.User
}

// Cluster is a running nameserver and broker.
type Cluster struct {
	opts    Options
	dir     string
	tempDir bool
	log     *slog.Logger
	aclFile string // the brokers' users with Options.Users

	tls *clusterTLS // Options.TLS loaded; nil without

	ns             *nameserver.Server
	nsAddr         string // Gantry's nameserver port
	nsRemotingAddr string // RocketMQ's nameserver port (each speaks both protocols)
	nsDone         chan error
	nsServing      int // ns.Serve calls that will send to nsDone

	mu     sync.Mutex
	broker *server.Server
	// The broker's listen addresses (gRPC, HTTP, remoting), kept across
	// restarts.
	grpcListen, httpListen, remotingListen string
	haPort                                 int // the master's HA port, kept across restarts
	slaves                                 []*slaveNode
	members                                []*memberNode // controller mode
	ctl                                    *controllerNode
}

// slaveNode is one slave of the broker group.
type slaveNode struct {
	id     int64
	srv    *server.Server
	listen [3]string // gRPC, HTTP, remoting
}

// Start starts a nameserver, then a broker registered with it, and
// returns once the broker has recovered its store and is serving.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c := &Cluster{opts: opts, dir: opts.Dir, log: opts.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "gantry-embedded-")
		if err != nil {
			return nil, err
		}
		c.dir, c.tempDir = d, true
	}
	if len(opts.Users) > 0 {
		if err := c.writeUsers(); err != nil {
			return nil, c.cleanup(err)
		}
	}
	if opts.TLS != nil {
		t, err := opts.TLS.load()
		if err != nil {
			return nil, c.cleanup(err)
		}
		c.tls = t
	}
	c.nsAddr = orDefault(opts.NameServerListen, "127.0.0.1:0")
	c.nsRemotingAddr = orDefault(opts.NameServerRemotingListen, "127.0.0.1:0")
	if err := c.StartNameServer(ctx); err != nil {
		return nil, c.cleanup(err)
	}
	c.grpcListen, c.httpListen = orDefault(opts.BrokerListen, "127.0.0.1:0"), orDefault(opts.HTTPListen, "127.0.0.1:0")
	c.remotingListen = orDefault(opts.BrokerRemotingListen, "127.0.0.1:0")
	if opts.Replicas > 0 {
		if err := c.startGroup(ctx); err != nil {
			return nil, errors.Join(err, c.Close(context.Background()))
		}
		return c, nil
	}
	if err := c.StartBroker(ctx); err != nil {
		return nil, errors.Join(err, c.Close(context.Background()))
	}
	for i := range opts.Slaves {
		c.slaves = append(c.slaves, &slaveNode{id: int64(i + 1), listen: [3]string{"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"}})
		if err := c.StartSlave(ctx, int64(i+1)); err != nil {
			return nil, errors.Join(err, c.Close(context.Background()))
		}
	}
	return c, nil
}

// StartNameServer starts the nameserver (after StopNameServer) on the
// addresses it had, Gantry's port and RocketMQ's (each speaks gRPC and
// RocketMQ remoting alike), with an empty registry: the broker registers
// again by itself.
func (c *Cluster) StartNameServer(_ context.Context) error {
	if c.ns != nil {
		return errors.New("embedded: nameserver already running")
	}
	nc := nameserver.Config{Logger: c.log}
	if c.tls != nil {
		nc.TLS, nc.RequireTLS = c.tls.server.Config(), c.tls.server.Required()
	}
	ns, err := nameserver.NewServer(nc)
	if err != nil {
		return err
	}
	c.ns, c.nsDone, c.nsServing = ns, make(chan error, 2), 0
	for _, p := range []struct {
		what string
		addr *string
	}{{"nameserver", &c.nsAddr}, {"nameserver remoting", &c.nsRemotingAddr}} {
		lis, err := net.Listen("tcp", *p.addr)
		if err != nil {
			return errors.Join(fmt.Errorf("%s listen: %w", p.what, err), c.StopNameServer(context.Background()))
		}
		*p.addr = lis.Addr().String()
		c.nsServing++
		go func() { c.nsDone <- ns.Serve(lis) }()
	}
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// writeUsers writes Options.Users to Dir/acl.json, where the brokers
// read them (replacing the file of an earlier run on Dir).
func (c *Cluster) writeUsers() error {
	data, err := json.MarshalIndent(auth.File{Users: c.opts.Users}, "", "  ")
	if err != nil {
		return fmt.Errorf("embedded: Options.Users: %w", err)
	}
	path := filepath.Join(c.dir, "acl.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("embedded: Options.Users: %w", err)
	}
	c.aclFile = path
	return nil
}

func (c *Cluster) cleanup(err error) error {
	if c.tempDir {
		os.RemoveAll(c.dir)
	}
	return err
}

// StartBroker starts the broker (after StopBroker), on the same store and
// addresses.
func (c *Cluster) StartBroker(ctx context.Context) error {
	if c.opts.Replicas > 0 {
		return errControllerMode
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broker != nil {
		return errors.New("embedded: broker already running")
	}
	bc := c.brokerConfig(filepath.Join(c.dir, "store"))
	if c.haPort != 0 { // the port of the first start: the slaves keep following it
		bc.HAListenPort = c.haPort
	}
	listen := [3]string{c.grpcListen, c.httpListen, c.remotingListen}
	s, err := c.startServer(ctx, bc, &listen)
	if err != nil {
		return err
	}
	c.broker, c.grpcListen, c.httpListen, c.remotingListen = s, listen[0], listen[1], listen[2]
	if a := s.HAAddr(); a != "" {
		if _, p, err := net.SplitHostPort(a); err == nil {
			c.haPort, _ = strconv.Atoi(p)
		}
	}
	return c.waitRegistered(ctx, s.GRPCAddr())
}

// brokerConfig is a broker's configuration with its store in root.
func (c *Cluster) brokerConfig(root string) broker.Config {
	bc := broker.Config{
		NamesrvAddr:           []string{c.nsAddr},
		StorePathRootDir:      root,
		AutoCreateTopicEnable: !c.opts.NoAutoCreateTopics,
		Logger:                c.log,
	}
	if c.opts.Replicas > 0 {
		memberDefaults(&bc)
	}
	if c.aclFile != "" {
		bc.AuthenticationEnabled, bc.ACLFile = true, c.aclFile
	}
	if c.tls != nil {
		c.tls.broker(&bc)
	}
	if c.opts.Broker != nil {
		c.opts.Broker(&bc)
	}
	return bc
}

// startServer starts a broker server on listen's addresses (gRPC, HTTP,
// remoting), which it replaces with the addresses it got.
func (c *Cluster) startServer(ctx context.Context, bc broker.Config, listen *[3]string) (*server.Server, error) {
	grpcLis, err := net.Listen("tcp", listen[0])
	if err != nil {
		return nil, fmt.Errorf("broker listen: %w", err)
	}
	httpLis, err := net.Listen("tcp", listen[1])
	if err != nil {
		grpcLis.Close()
		return nil, fmt.Errorf("broker HTTP listen: %w", err)
	}
	remotingLis, err := net.Listen("tcp", listen[2])
	if err != nil {
		grpcLis.Close()
		httpLis.Close()
		return nil, fmt.Errorf("broker remoting listen: %w", err)
	}
	var rc remotingapi.Config
	if c.opts.Remoting != nil {
		c.opts.Remoting(&rc)
	}
	s, err := server.Start(ctx, server.Config{Broker: bc, GRPCListener: grpcLis, HTTPListener: httpLis, RemotingListener: remotingLis, Remoting: rc})
	if err != nil {
		grpcLis.Close()
		httpLis.Close()
		remotingLis.Close()
		return nil, err
	}
	*listen = [3]string{grpcLis.Addr().String(), httpLis.Addr().String(), remotingLis.Addr().String()}
	return s, nil
}

// slave returns the slave of brokerId id.
func (c *Cluster) slave(id int64) (*slaveNode, error) {
	if id < 1 || int(id) > len(c.slaves) {
		return nil, fmt.Errorf("embedded: no slave %d (Options.Slaves is %d)", id, len(c.slaves))
	}
	return c.slaves[id-1], nil
}

// StartSlave starts the slave of brokerId id (1..Options.Slaves), after
// StopSlave, on the same store and addresses. It returns once the slave
// is registered; it replicates from then on.
func (c *Cluster) StartSlave(ctx context.Context, id int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.slave(id)
	if err != nil {
		return err
	}
	if n.srv != nil {
		return fmt.Errorf("embedded: slave %d already running", id)
	}
	bc := c.brokerConfig(filepath.Join(c.dir, fmt.Sprintf("slave-%d", id), "store"))
	bc.BrokerRole, bc.BrokerID, bc.HAListenPort = broker.Slave, id, 0
	if c.opts.Slave != nil {
		c.opts.Slave(id, &bc)
	}
	s, err := c.startServer(ctx, bc, &n.listen)
	if err != nil {
		return err
	}
	n.srv = s
	return c.waitRegistered(ctx, s.GRPCAddr())
}

// StopSlave shuts the slave of brokerId id down gracefully: it stops
// replicating first.
func (c *Cluster) StopSlave(ctx context.Context, id int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.slave(id)
	if err != nil || n.srv == nil {
		return err
	}
	err = n.srv.Close(ctx)
	n.srv = nil
	return err
}

// SlaveServer returns the running slave of brokerId id, nil while it is
// stopped.
func (c *Cluster) SlaveServer(id int64) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.slave(id)
	if err != nil {
		return nil
	}
	return n.srv
}

// Server returns the running master's server (its HA address and slaves),
// nil while it is stopped; in controller mode, the server of the broker
// the controller made master, nil while none serves.
func (c *Cluster) Server() *server.Server {
	if c.opts.Replicas > 0 {
		return c.masterServer()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broker
}

// waitRegistered returns once the nameserver routes to the broker at addr,
// so that clients created right after Start find it.
func (c *Cluster) waitRegistered(ctx context.Context, addr string) error {
	if c.ns == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		for _, b := range c.ns.Registry().Brokers() {
			if b.Addr == addr {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("embedded: broker %s did not register with the nameserver: %w", addr, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// StopBroker shuts the broker down gracefully (unregister, drain, flush).
func (c *Cluster) StopBroker(ctx context.Context) error {
	if c.opts.Replicas > 0 {
		return errControllerMode
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broker == nil {
		return nil
	}
	err := c.broker.Close(ctx)
	c.broker = nil
	return err
}

// KillBroker stops the broker as a crash would look to the nameserver and
// clients: no unregistration, connections cut (the store is still closed
// cleanly).
func (c *Cluster) KillBroker() error {
	if c.opts.Replicas > 0 {
		return errControllerMode
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broker == nil {
		return nil
	}
	err := c.broker.Kill()
	c.broker = nil
	return err
}

// RestartBroker stops and starts the broker.
func (c *Cluster) RestartBroker(ctx context.Context) error {
	if err := c.StopBroker(ctx); err != nil {
		return err
	}
	return c.StartBroker(ctx)
}

// StopNameServer stops the nameserver, gRPC and remoting (an outage:
// clients keep their cached routes). StartNameServer starts it again.
func (c *Cluster) StopNameServer(ctx context.Context) error {
	if c.ns == nil {
		return nil
	}
	errs := []error{c.ns.Close(ctx)}
	for ; c.nsServing > 0; c.nsServing-- {
		errs = append(errs, <-c.nsDone)
	}
	c.ns = nil
	return errors.Join(errs...)
}

// NameServerAddr is the nameserver's gRPC address (client.Config.NameServers).
func (c *Cluster) NameServerAddr() string { return c.nsAddr }

// NameServerRemotingAddr is the nameserver's RocketMQ remoting address, an
// IP literal with its port: the name server address of the official
// RocketMQ clients (primitive.NamesrvAddr, NAMESRV_ADDR).
func (c *Cluster) NameServerRemotingAddr() string { return c.nsRemotingAddr }

// BrokerRemotingAddr is the broker's RocketMQ remoting address (its
// listenPort: the port it registers with the nameserver and stores in
// every record and offset message id). Like BrokerAddr, it is the listen
// address, its port chosen at the first start and kept across restarts.
// In controller mode it is the current master's ("" while none serves).
func (c *Cluster) BrokerRemotingAddr() string {
	if c.opts.Replicas > 0 {
		return addrOf(c.masterServer(), (*server.Server).RemotingAddr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.remotingListen
}

// BrokerAddr is the broker's gRPC address; in controller mode the current
// master's ("" while none serves).
func (c *Cluster) BrokerAddr() string {
	if c.opts.Replicas > 0 {
		return addrOf(c.masterServer(), (*server.Server).GRPCAddr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.grpcListen
}

// HTTPAddr is the broker's metrics and health address; in controller mode
// the current master's ("" while none serves).
func (c *Cluster) HTTPAddr() string {
	if c.opts.Replicas > 0 {
		return addrOf(c.masterServer(), (*server.Server).HTTPAddr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.httpListen
}

// Dir is the data directory.
func (c *Cluster) Dir() string { return c.dir }

// Broker returns the running broker core, or nil while it is stopped; in
// controller mode the current master's, nil while none serves.
func (c *Cluster) Broker() *broker.Broker {
	if c.opts.Replicas > 0 {
		if s := c.masterServer(); s != nil {
			return s.Broker()
		}
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broker == nil {
		return nil
	}
	return c.broker.Broker()
}

// Close stops the brokers (and the controller) and the nameserver and
// removes a temporary data directory.
func (c *Cluster) Close(ctx context.Context) error {
	var errs []error
	for i := range c.slaves {
		errs = append(errs, c.StopSlave(ctx, int64(i+1)))
	}
	if c.opts.Replicas > 0 {
		errs = append(errs, c.closeGroup(ctx))
	} else {
		errs = append(errs, c.StopBroker(ctx))
	}
	err := errors.Join(append(errs, c.StopNameServer(ctx))...)
	return c.cleanup(err)
}

// addrOf is one of s's addresses, "" for a nil s.
func addrOf(s *server.Server, addr func(*server.Server) string) string {
	if s == nil {
		return ""
	}
	return addr(s)
}
