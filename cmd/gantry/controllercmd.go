package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/replication/controller"
)

// controllerFlags are a controller member's flags: those of gantry
// controller, and gantry namesrv's with --enable-controller (each name then
// prefixed with "controller-").
type controllerFlags struct {
	id, peers, dataDir  string
	raftListen, listen  string
	brokerTimeout, scan time.Duration
	heartbeat, election time.Duration
	unclean             bool
	scanSet             func() bool
	prefix              string          // of the flags' names
	tls                 *serverTLSFlags // the member's ports and raft dials; nil: none
}

func (cf *controllerFlags) register(cmd *cobra.Command, prefix string) {
	f := cmd.Flags()
	cf.prefix = prefix
	f.StringVar(&cf.id, prefix+"id", "", "this member's id, one of --"+prefix+"peers (required)")
	f.StringVar(&cf.peers, prefix+"peers", "", "the whole group: id=raftAddr=grpcAddr, comma-separated (required)")
	f.StringVar(&cf.dataDir, prefix+"data-dir", "", "raft log, state and snapshots (required)")
	f.StringVar(&cf.raftListen, prefix+"raft-listen", "", "raft listen address (default: this member's raftAddr in --"+prefix+"peers)")
	f.StringVar(&cf.listen, prefix+"listen", "", "gRPC listen address (default: this member's grpcAddr in --"+prefix+"peers)")
	f.DurationVar(&cf.brokerTimeout, prefix+"broker-timeout", 10*time.Second, "mark a broker dead after this long without a heartbeat")
	f.DurationVar(&cf.scan, prefix+"scan-interval", 0, "how often the leader looks for silent brokers (default 1s, at most the broker timeout)")
	f.BoolVar(&cf.unclean, prefix+"unclean-election", false, "let automatic elections pick a broker outside the in-sync set when none in it is alive (may lose acknowledged messages)")
	f.DurationVar(&cf.heartbeat, prefix+"raft-heartbeat-timeout", time.Second, "raft's heartbeat timeout")
	f.DurationVar(&cf.election, prefix+"raft-election-timeout", time.Second, "raft's election timeout (at least the heartbeat timeout)")
	cf.scanSet = func() bool { return f.Changed(prefix + "scan-interval") }
}

// prepare builds and checks the member's configuration from the flags.
func (cf *controllerFlags) prepare(logger *slog.Logger) (controller.Config, error) {
	cfg, err := cf.config()
	if err != nil {
		return cfg, &exitError{code: exitUsage, err: err}
	}
	cfg.BrokerTimeout, cfg.UncleanElection = cf.brokerTimeout, cf.unclean
	if cf.scanSet() {
		cfg.ScanInterval = cf.scan
	}
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = cf.heartbeat, cf.election
	cfg.LeaderLeaseTimeout = min(cf.heartbeat/2, 500*time.Millisecond)
	cfg.Logger = logger
	if err := cf.setTLS(&cfg, logger); err != nil {
		return cfg, &exitError{code: exitUsage, err: err}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, &exitError{code: exitUsage, err: err}
	}
	return cfg, nil
}

// listenAddrs are the member's listen addresses, named by their flags.
func (cf *controllerFlags) listenAddrs(cfg controller.Config) []listenAddr {
	p := cf.prefix
	return []listenAddr{
		{"--" + p + "listen (gRPC)", cfg.GRPCAddr},
		{"--" + p + "raft-listen (raft)", cfg.BindAddr},
	}
}

// controllerRisk is what anyone reaching an open controller could do.
const controllerRisk = "can register brokers, report their progress and elect masters"

// start starts the member of cfg (prepare): raft and its gRPC service,
// authenticating its calls with guard (nil: authentication off). It
// returns the service's serve and stop, and a line saying where it
// listens.
func (cf *controllerFlags) start(cfg controller.Config, guard *auth.Guard) (serve func() error, stop func(context.Context) error, ready string, err error) {
	cfg.Guard = guard
	lis, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return nil, nil, "", &exitError{code: exitUsage, err: fmt.Errorf("controller listen: %w", err)}
	}
	ctl, err := controller.New(cfg)
	if err != nil {
		lis.Close()
		return nil, nil, "", &exitError{code: exitUsage, err: err}
	}
	svc, err := controller.NewService(ctl)
	if err != nil {
		lis.Close()
		return nil, nil, "", &exitError{code: exitUsage, err: errors.Join(err, ctl.Close())}
	}
	ready = fmt.Sprintf("controller %s ready: raft %s, gRPC %s, data %s", cfg.ID, cfg.BindAddr, lis.Addr(), cfg.DataDir)
	if cfg.TLS != nil {
		ready += fmt.Sprintf(", TLS %s", cf.tls.mode)
	}
	return func() error { return svc.Serve(lis) }, func(ctx context.Context) error { return errors.Join(svc.Close(ctx), ctl.Close()) }, ready, nil
}

// setTLS sets the member's TLS from the --tls-* flags: its ports serve TLS
// unless --tls-mode is disabled, and it then dials its raft peers with TLS
// too (--tls-ca, --tls-client-cert, default --tls-cert).
func (cf *controllerFlags) setTLS(cfg *controller.Config, logger *slog.Logger) error {
	if cf.tls == nil {
		return nil
	}
	srv, err := cf.tls.server(logger)
	if err != nil || srv == nil {
		return err
	}
	dial, err := cf.tls.peerDialer(logger)
	if err != nil {
		return err
	}
	cfg.TLS, cfg.RequireTLS, cfg.RaftDial = srv.Config(), srv.Required(), dial.Dial
	return nil
}

func newControllerCmd() *cobra.Command {
	var (
		cf = controllerFlags{tls: &serverTLSFlags{}}
		af authFlags
	)
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run a replication controller member",
		Long: `Controller runs one member of the replication controller: a raft group (three
or five members) that keeps, per broker group, the replicas, the master and its
epoch, and the in-sync set; brokers register and heartbeat to it over gRPC, and
when a master falls silent for --broker-timeout the leader elects a new one
from the in-sync set (the broker with the highest last epoch, then the greatest
log end). Admin verbs reach it with gantry admin -a (getSyncStateSet,
getBrokerEpoch, electMaster, getControllerMetaData). gantry namesrv
--enable-controller runs a member inside a nameserver instead.

--peers lists the whole group, this member included, as id=raftAddr=grpcAddr,
comma-separated; every member gets the same list. The raft state lives in
--data-dir; a member with state keeps the group its log holds.

With --auth --acl-file FILE (docs/SECURITY.md), the brokers' calls (register,
heartbeat, in-sync set changes, group reads) need a cluster user, electMaster
an admin; getControllerMetaData stays public. The raft port is not covered by
--auth: protect it with mutual TLS or a private network. Without --auth the
member refuses to listen beyond loopback unless --allow-remote-without-auth is
given.

--tls-mode permissive or enforcing serves TLS on the raft and gRPC ports
(--tls-cert, --tls-key; --tls-client-ca and --tls-client-auth require
certificates of brokers and peers), and the member then dials its peers
with TLS: --tls-ca verifies them, and it shows --tls-client-cert, by
default --tls-cert (which must then allow client authentication).`,
		Example: `  gantry controller --id c1 --data-dir ./c1 --auth --acl-file ./acl.json \
    --peers c1=10.0.0.1:9878=10.0.0.1:9879,c2=10.0.0.2:9878=10.0.0.2:9879,c3=10.0.0.3:9878=10.0.0.3:9879`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if err := af.check(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			cfg, err := cf.prepare(logger)
			if err != nil {
				return err
			}
			if err := af.checkOpen(logger, "controller", controllerRisk, cf.listenAddrs(cfg), cfg.BindAddr); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			users, guard, err := af.open(logger)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			closeUsers := func() error {
				if users != nil {
					return users.Close()
				}
				return nil
			}
			serve, stop, ready, err := cf.start(cfg, guard)
			if err != nil {
				return errors.Join(err, closeUsers())
			}
			fmt.Fprintln(cmd.OutOrStdout(), ready)
			return serveUntilDone(cmd.Context(), logger, serve, func(ctx context.Context) error { return errors.Join(stop(ctx), closeUsers()) })
		},
	}
	cf.register(cmd, "")
	af.register(cmd)
	cf.tls.register(cmd.Flags(), "(its raft peers)")
	return cmd
}

// config builds the member's configuration from the flags: the
// listen addresses default to the member's own entry of --peers.
func (cf *controllerFlags) config() (controller.Config, error) {
	p := cf.prefix
	switch {
	case cf.id == "":
		return controller.Config{}, fmt.Errorf(`required flag "%sid" not set`, p)
	case cf.peers == "":
		return controller.Config{}, fmt.Errorf(`required flag "%speers" not set: id=raftAddr=grpcAddr, comma-separated`, p)
	case cf.dataDir == "":
		return controller.Config{}, fmt.Errorf(`required flag "%sdata-dir" not set`, p)
	}
	ps, err := controller.ParsePeers(cf.peers)
	if err != nil {
		return controller.Config{}, fmt.Errorf("--%speers: %w", p, err)
	}
	cfg := controller.Config{ID: cf.id, Peers: ps, DataDir: cf.dataDir, BindAddr: cf.raftListen, GRPCAddr: cf.listen}
	for _, peer := range ps {
		if peer.ID != cf.id {
			continue
		}
		if peer.GRPCAddr == "" {
			return controller.Config{}, fmt.Errorf("--%speers: member %s has no gRPC address (id=raftAddr=grpcAddr)", p, cf.id)
		}
		cfg.AdvertiseAddr = peer.Addr
		if cfg.BindAddr == "" {
			cfg.BindAddr = peer.Addr
		}
		if cfg.GRPCAddr == "" {
			cfg.GRPCAddr = peer.GRPCAddr
		}
	}
	if cfg.AdvertiseAddr == "" {
		return controller.Config{}, fmt.Errorf("--%speers does not list this member %q", p, cf.id)
	}
	return cfg, nil
}
