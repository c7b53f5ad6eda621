package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/replication/controller"
)

// ControllerSpec configures a controller member child: one member of a
// raft group of controllers, serving the Controller gRPC service.
type ControllerSpec struct {
	ID       string
	Raft     string // raft listen address, kept across restarts
	GRPC     string // gRPC listen address, kept across restarts
	DataDir  string // raft state, kept across restarts
	Peers    []controller.Peer
	Timeouts ControllerTimeouts
}

// ControllerTimeouts are a controller member's timeouts (zero: the
// controller's defaults).
type ControllerTimeouts struct {
	// BrokerTimeout: a broker silent this long is dead; its group elects.
	BrokerTimeout time.Duration
	// ScanInterval: how often the leader looks for silent brokers.
	ScanInterval time.Duration
	// Heartbeat, Election, LeaderLease: raft's.
	Heartbeat, Election, LeaderLease time.Duration
}

func runController(ctx context.Context, raw []byte) error {
	var spec ControllerSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	to := spec.Timeouts
	c, err := controller.New(controller.Config{
		ID: spec.ID, BindAddr: spec.Raft, DataDir: spec.DataDir, GRPCAddr: spec.GRPC, Peers: spec.Peers,
		HeartbeatTimeout: to.Heartbeat, ElectionTimeout: to.Election, LeaderLeaseTimeout: to.LeaderLease,
		BrokerTimeout: to.BrokerTimeout, ScanInterval: to.ScanInterval, Logger: childLogger(),
	})
	if err != nil {
		return err
	}
	svc, err := controller.NewService(c)
	if err != nil {
		return errors.Join(err, c.Close())
	}
	lis, err := listen(ctx, spec.GRPC)
	if err != nil {
		return errors.Join(err, c.Close())
	}
	done := make(chan error, 1)
	go func() { done <- svc.Serve(lis) }()
	ready(map[string]string{"grpc": lis.Addr().String()})
	served := false
	select {
	case err = <-done:
		served = true
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = errors.Join(err, svc.Close(sctx))
	if !served { // Close ends Serve
		err = errors.Join(err, <-done)
	}
	return errors.Join(err, c.Close())
}

// MemberSpec configures a controller-mode broker child (server.Member):
// Broker's store and addresses, kept across restarts, and its place in
// the group.
type MemberSpec struct {
	Broker BrokerSpec
	// ID is the broker's id in its group (brokerId, above 0).
	ID          int64
	Controllers []string
	// Role is how a master acknowledges: SYNC_MASTER or ASYNC_MASTER.
	Role string
	// InSyncReplicas is inSyncReplicas (the master included).
	InSyncReplicas int
	// Heartbeat is brokerHeartbeatInterval; Lease is masterLeaseMillis.
	Heartbeat, Lease time.Duration
	// HAAdvertise, when set, is the HA address the broker registers with
	// the controllers (a fault proxy in front of HAPort): its slaves dial it.
	HAAdvertise string
}

func runMember(ctx context.Context, raw []byte) error {
	var spec MemberSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	cfg, err := brokerConfig(spec.Broker)
	if err != nil {
		return err
	}
	if cfg.BrokerRole, err = broker.ParseBrokerRole(spec.Role); err != nil {
		return err
	}
	cfg.BrokerID, cfg.InSyncReplicas = spec.ID, spec.InSyncReplicas
	cfg.EnableControllerMode, cfg.ControllerAddr = true, spec.Controllers
	cfg.BrokerHeartbeatInterval, cfg.MasterLease = spec.Heartbeat, spec.Lease
	glis, err := listen(ctx, spec.Broker.GRPC)
	if err != nil {
		return err
	}
	hlis, err := listen(ctx, spec.Broker.HTTP)
	if err != nil {
		glis.Close()
		return err
	}
	m, err := server.StartMember(ctx, server.Config{Broker: cfg, GRPCListener: glis, HTTPListener: hlis, HAAdvertiseAddr: spec.HAAdvertise})
	if err != nil {
		return err
	}
	ready(BrokerReady{GRPC: spec.Broker.GRPC, HTTP: spec.Broker.HTTP, Startup: time.Since(processStart)})
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return m.Close(sctx)
}
