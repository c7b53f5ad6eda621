package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantrymq/gantry/replication/controller"
)

func newControllerCmd() *cobra.Command {
	var (
		id, peers, dataDir  string
		raftListen, listen  string
		brokerTimeout, scan time.Duration
		heartbeat, election time.Duration
		unclean             bool
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
getBrokerEpoch, electMaster, getControllerMetaData).

--peers lists the whole group, this member included, as id=raftAddr=grpcAddr,
comma-separated; every member gets the same list. The raft state lives in
--data-dir; a member with state keeps the group its log holds.`,
		Example: `  gantry controller --id c1 --data-dir ./c1 \
    --peers c1=10.0.0.1:9878=10.0.0.1:9879,c2=10.0.0.2:9878=10.0.0.2:9879,c3=10.0.0.3:9878=10.0.0.3:9879`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := controllerConfig(id, peers, dataDir, raftListen, listen)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			cfg.BrokerTimeout, cfg.UncleanElection = brokerTimeout, unclean
			if cmd.Flags().Changed("scan-interval") {
				cfg.ScanInterval = scan
			}
			cfg.HeartbeatTimeout, cfg.ElectionTimeout = heartbeat, election
			cfg.LeaderLeaseTimeout = min(heartbeat/2, 500*time.Millisecond)
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			cfg.Logger = logger
			if err := cfg.Validate(); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			lis, err := net.Listen("tcp", cfg.GRPCAddr)
			if err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("controller listen: %w", err)}
			}
			ctl, err := controller.New(cfg)
			if err != nil {
				lis.Close()
				return &exitError{code: exitUsage, err: err}
			}
			svc, err := controller.NewService(ctl)
			if err != nil {
				lis.Close()
				return &exitError{code: exitUsage, err: errors.Join(err, ctl.Close())}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "controller %s ready: raft %s, gRPC %s, data %s\n", cfg.ID, cfg.BindAddr, lis.Addr(), cfg.DataDir)
			stop := func(ctx context.Context) error { return errors.Join(svc.Close(ctx), ctl.Close()) }
			return serveUntilDone(cmd.Context(), logger, func() error { return svc.Serve(lis) }, stop)
		},
	}
	f := cmd.Flags()
	f.StringVar(&id, "id", "", "this member's id, one of --peers (required)")
	f.StringVar(&peers, "peers", "", "the whole group: id=raftAddr=grpcAddr, comma-separated (required)")
	f.StringVar(&dataDir, "data-dir", "", "raft log, state and snapshots (required)")
	f.StringVar(&raftListen, "raft-listen", "", "raft listen address (default: this member's raftAddr in --peers)")
	f.StringVar(&listen, "listen", "", "gRPC listen address (default: this member's grpcAddr in --peers)")
	f.DurationVar(&brokerTimeout, "broker-timeout", 10*time.Second, "mark a broker dead after this long without a heartbeat")
	f.DurationVar(&scan, "scan-interval", 0, "how often the leader looks for silent brokers (default 1s, at most --broker-timeout)")
	f.BoolVar(&unclean, "unclean-election", false, "let automatic elections pick a broker outside the in-sync set when none in it is alive (may lose acknowledged messages)")
	f.DurationVar(&heartbeat, "raft-heartbeat-timeout", time.Second, "raft's heartbeat timeout")
	f.DurationVar(&election, "raft-election-timeout", time.Second, "raft's election timeout (at least the heartbeat timeout)")
	return cmd
}

// controllerConfig builds a member's configuration from the flags: the
// listen addresses default to the member's own entry of --peers.
func controllerConfig(id, peers, dataDir, raftListen, listen string) (controller.Config, error) {
	switch {
	case id == "":
		return controller.Config{}, errors.New(`required flag "id" not set`)
	case peers == "":
		return controller.Config{}, errors.New(`required flag "peers" not set: id=raftAddr=grpcAddr, comma-separated`)
	case dataDir == "":
		return controller.Config{}, errors.New(`required flag "data-dir" not set`)
	}
	ps, err := controller.ParsePeers(peers)
	if err != nil {
		return controller.Config{}, fmt.Errorf("--peers: %w", err)
	}
	cfg := controller.Config{ID: id, Peers: ps, DataDir: dataDir, BindAddr: raftListen, GRPCAddr: listen}
	for _, p := range ps {
		if p.ID != id {
			continue
		}
		if p.GRPCAddr == "" {
			return controller.Config{}, fmt.Errorf("--peers: member %s has no gRPC address (id=raftAddr=grpcAddr)", id)
		}
		cfg.AdvertiseAddr = p.Addr
		if cfg.BindAddr == "" {
			cfg.BindAddr = p.Addr
		}
		if cfg.GRPCAddr == "" {
			cfg.GRPCAddr = p.GRPCAddr
		}
	}
	if cfg.AdvertiseAddr == "" {
		return controller.Config{}, fmt.Errorf("--peers does not list this member %q", id)
	}
	return cfg, nil
}
