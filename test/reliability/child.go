package reliability

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/nameserver"
	"github.com/gantrymq/gantry/test/reliability/workload"
)

// Child process protocol: the test binary re-executed with ChildEnv set to
// a role runs that role with the JSON spec in SpecEnv instead of tests. It
// prints "READY <json>" on standard output once serving (or working), and
// stops cleanly on SIGTERM.
const (
	ChildEnv = "GANTRY_RELIABILITY_CHILD"
	SpecEnv  = "GANTRY_RELIABILITY_SPEC"
)

// Child roles.
const (
	RoleNameServer = "namesrv"
	RoleBroker     = "broker"
	RoleProducer   = "producer"
	RoleConsumer   = "consumer"
	RoleController = "controller" // a controller member (groupchild.go)
	RoleMember     = "member"     // a controller-mode broker (groupchild.go)
)

// RunChild runs the child role this process was started for, if any, and
// returns its exit code; ok is false in a normal test process. Call it
// first in TestMain.
func RunChild() (code int, ok bool) {
	role := os.Getenv(ChildEnv)
	if role == "" {
		return 0, false
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// Runs before stop: from here on a SIGTERM is ignored, not fatal. The
	// harness may send a second one (StopWorkers signals every worker, then
	// stops each), which must not kill a child that is exiting cleanly.
	defer signal.Ignore(syscall.SIGTERM, os.Interrupt)
	spec := []byte(os.Getenv(SpecEnv))
	var err error
	switch role {
	case RoleNameServer:
		err = runNameServer(ctx, spec)
	case RoleBroker:
		err = runBroker(ctx, spec)
	case RoleProducer:
		err = runProducer(ctx, spec)
	case RoleConsumer:
		err = runConsumer(ctx, spec)
	case RoleController:
		err = runController(ctx, spec)
	case RoleMember:
		err = runMember(ctx, spec)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
		return 1, true
	}
	return 0, true
}

// ready tells the parent the child is up.
func ready(v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(os.Stdout, "READY %s\n", b)
}

// NameServerSpec configures a nameserver child.
type NameServerSpec struct {
	Listen string
}

func runNameServer(ctx context.Context, raw []byte) error {
	var spec NameServerSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	ns, err := nameserver.NewServer(nameserver.Config{Logger: childLogger()})
	if err != nil {
		return err
	}
	lis, err := listen(ctx, spec.Listen)
	if err != nil {
		return errors.Join(err, ns.Close(context.Background()))
	}
	done := make(chan error, 1)
	go func() { done <- ns.Serve(lis) }()
	ready(map[string]string{"addr": lis.Addr().String()})
	select {
	case err = <-done:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(err, ns.Close(sctx))
}

// BrokerSpec configures a broker child. Zero fields take the suite's
// defaults (small files, so rolls happen; otherwise the broker's own).
type BrokerSpec struct {
	Name       string
	Store      string
	GRPC, HTTP string // listen addresses, kept across restarts
	// ListenPort is the remoting port (on every interface), also the port
	// of the store address in each record; kept across restarts.
	ListenPort int
	// HAPort is the master's HA port (haListenPort); kept across restarts.
	// The suite picks it (freePort) like ListenPort: listenPort+1, the
	// default, is not reserved.
	HAPort      int
	NameServers []string
	// Flush is SYNC_FLUSH or ASYNC_FLUSH.
	Flush string
	// SegmentBytes is the commit-log segment size. Default 8 MiB.
	SegmentBytes int64
	// SyncFlushTimeout is the commit log's (default 5 s).
	SyncFlushTimeout time.Duration
	// FlushInterval is the async flusher's period (default 500 ms).
	FlushInterval time.Duration
	// DiskFullRatio, DiskForceCleanRatio: the commit log's (defaults 0.90, 0.85).
	DiskFullRatio, DiskForceCleanRatio float64
	// CleanInterval: how often disk use is checked (default 10 s).
	CleanInterval time.Duration
	// OffsetInterval is flushConsumerOffsetInterval (default 5 s).
	OffsetInterval time.Duration
	// QueueNums is defaultTopicQueueNums.
	QueueNums int32
	// AutoCreate is autoCreateTopicEnable.
	AutoCreate bool
	// RegisterPeriod is registerNameServerPeriod (default 30 s): how soon
	// a restarted nameserver learns about the broker again.
	RegisterPeriod time.Duration
	// StoreDefaults keeps the broker's own consume-queue and index file
	// sizes (300,000 entries a queue file, 420 MB index files) instead of
	// the suite's small ones, which roll.
	StoreDefaults bool
	// IndexSlots, when set, is maxHashSlotNum: the slot table a new index
	// file reserves whole at creation (4 bytes a slot).
	IndexSlots int
}

// BrokerReady is what a broker child reports when it serves.
type BrokerReady struct {
	GRPC, HTTP string
	// Startup is the time from process start to serving: recovery included.
	Startup time.Duration
}

var processStart = time.Now()

func runBroker(ctx context.Context, raw []byte) error {
	var spec BrokerSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	cfg, err := brokerConfig(spec)
	if err != nil {
		return err
	}
	glis, err := listen(ctx, spec.GRPC)
	if err != nil {
		return err
	}
	hlis, err := listen(ctx, spec.HTTP)
	if err != nil {
		glis.Close()
		return err
	}
	s, err := server.Start(ctx, server.Config{Broker: cfg, GRPCListener: glis, HTTPListener: hlis})
	if err != nil {
		return err
	}
	ready(BrokerReady{GRPC: s.GRPCAddr(), HTTP: s.HTTPAddr(), Startup: time.Since(processStart)})
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return s.Close(sctx)
}

// brokerConfig is the broker configuration of spec.
func brokerConfig(spec BrokerSpec) (broker.Config, error) {
	mode, err := commitlog.ParseFlushMode(spec.Flush)
	if err != nil {
		return broker.Config{}, err
	}
	return broker.Config{
		BrokerName: spec.Name, NamesrvAddr: spec.NameServers, StorePathRootDir: spec.Store, ListenPort: spec.ListenPort, HAListenPort: spec.HAPort,
		MappedFileSizeCommitLog: cmp.Or(spec.SegmentBytes, 8<<20), FlushDiskType: mode,
		DefaultTopicQueueNums: spec.QueueNums, FlushConsumerOffsetInterval: spec.OffsetInterval,
		RegisterNameServerPeriod: spec.RegisterPeriod, AutoCreateTopicEnable: spec.AutoCreate,
		// The suite runs brokers as a user's defaults do, bindAddress unset
		// (the remoting and HA ports on every interface: what a slave is told
		// to dial there is part of what it checks), without authentication:
		// that must be asked for (docs/SECURITY.md, "Cluster").
		AuthConfig: broker.AuthConfig{AllowRemoteWithoutAuth: true},
		Logger:     childLogger(),
		StoreOverride: func(sc *store.Config) {
			if !spec.StoreDefaults {
				sc.QueueEntriesPerFile, sc.IndexSlots, sc.IndexEntries = 20_000, 20_000, 80_000 // small files: they roll
			}
			if spec.IndexSlots > 0 {
				sc.IndexSlots = spec.IndexSlots
			}
			sc.Log.SyncFlushTimeout = spec.SyncFlushTimeout
			sc.Log.FlushInterval = spec.FlushInterval
			sc.Log.DiskFullRatio, sc.Log.DiskForceCleanRatio = spec.DiskFullRatio, spec.DiskForceCleanRatio
			sc.Log.CleanInterval = spec.CleanInterval
		},
	}, nil
}

// listen listens on addr, retrying for a few seconds while the address is
// still held (a killed predecessor's socket).
func listen(ctx context.Context, addr string) (net.Listener, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		lis, err := net.Listen("tcp", addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return lis, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func childLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func runProducer(ctx context.Context, raw []byte) error {
	var spec workload.ProducerSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	spec.OnStarted = func() { ready(map[string]string{"worker": spec.Worker}) }
	st, err := workload.RunProducer(ctx, spec)
	fmt.Fprintf(os.Stderr, "producer %s: %s\n", spec.Worker, st)
	return err
}

func runConsumer(ctx context.Context, raw []byte) error {
	var spec workload.ConsumerSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	spec.OnStarted = func() { ready(map[string]string{"worker": spec.Worker}) }
	n, err := workload.RunConsumer(ctx, spec)
	fmt.Fprintf(os.Stderr, "consumer %s: handled %d\n", spec.Worker, n)
	return err
}
