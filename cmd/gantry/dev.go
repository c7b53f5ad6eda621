package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/internal/exposure"
	procgov "github.com/gantrymq/gantry/internal/procs"
)

func newDevCmd() *cobra.Command {
	var (
		dir                  string
		nsListen, brokerList string
		nsRemoting           string
		brokerRemoting       string
		httpListen           string
		ctlListen, ctlRaft   string
		flush                string
		procs, replicas      int
		verbose, pprof       bool
		withTLS, withAuth    bool
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a nameserver and a broker in one process, for development",
		Long: `Dev starts a nameserver and a broker in this process, with the store in
--dir, topics created on first use, and prints the endpoints, all on
127.0.0.1: it runs without authentication, so the flags take loopback
addresses only (other ports, not other interfaces). Every nameserver and broker port
speaks both Gantry's gRPC API and RocketMQ's remoting protocol: Apache
RocketMQ clients use 127.0.0.1:9876 as NAMESRV_ADDR, Gantry's 127.0.0.1:9877,
and either works for either. Go's profiles (/debug/pprof/) are served only
with --pprof. Ctrl-C shuts both down cleanly (the broker unregisters,
finishes requests in flight and flushes).

With --replicas N (2 to 5) it runs a broker group of N in controller mode
(docs/REPLICATION.md): a one-member controller (--controller-listen, the
address gantry admin -a uses by default) and N brokers, ids 1 to N, each
with its store under --dir, SYNC_MASTER (inSyncReplicas 2) and
slaveReadEnable. The controller elects the master; the others replicate
from it. Broker 1 listens on the broker flags' addresses, the others on
ports the system chooses. Dev prints which broker is master, and how to
watch the group (gantry admin haStatus, getSyncStateSet) and hand the
master role to another broker (gantry admin electMaster).

With --tls every port (nameserver, broker, HTTP, HA, controller) serves
TLS only: a throw-away CA, a server certificate for localhost, 127.0.0.1,
::1 and the host name, and a client certificate are written to DIR/tls
(kept across runs while valid), and dev prints how to connect
(docs/SECURITY.md, "TLS").

With --auth the brokers authenticate and authorize every request
(authenticationEnabled): the users are DIR/acl.json's, or at first one admin
user with a random secret key, which dev prints with how to sign requests.`,
		Example: `  gantry dev
  gantry dev --replicas 3
  gantry dev --tls
  gantry dev --auth
  gantry admin updateTopic -t Orders
  gantry bench produce -t Orders --count 100000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			mode, err := devCheckFlags(flush, procs, replicas)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if err := devLoopback([]listenAddr{{"--namesrv-listen", nsListen}, {"--namesrv-remoting-listen", nsRemoting},
				{"--broker-listen", brokerList}, {"--broker-remoting-listen", brokerRemoting}, {"--http-listen", httpListen},
				{"--controller-listen", ctlListen}, {"--controller-raft-listen", ctlRaft}}); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			logger.Info("go memory limit", "limit", serverGC(0))
			start := time.Now()
			prev := runtime.GOMAXPROCS(0)
			defer runtime.GOMAXPROCS(prev) // dev runs inside tests too
			low, high := devProcs(procs, mode, prev)
			cpus := fmt.Sprint(low)
			if high > low {
				gov, err := procgov.Start(procgov.Config{Low: low, High: high, Logger: logger})
				if err != nil {
					return err
				}
				defer gov.Close()
				cpus = fmt.Sprintf("%d-%d, by load,", low, high)
			} else {
				runtime.GOMAXPROCS(low)
			}
			opts := devOptions(embedded.Options{
				Dir: dir, NameServerListen: nsListen, BrokerListen: brokerList, HTTPListen: httpListen, Logger: logger,
				NameServerRemotingListen: nsRemoting, BrokerRemotingListen: brokerRemoting,
				ControllerListen: ctlListen, ControllerRaftListen: ctlRaft,
			}, mode, pprof, replicas)
			certs, admin, err := devSecurity(&opts, dir, withTLS, withAuth)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			c, err := embedded.Start(cmd.Context(), opts)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			abs, _ := filepath.Abs(c.Dir())
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, `Gantry dev ready in %v
  nameserver  %s   (gRPC: client.Config.NameServers, gantry admin -n)
  nameserver  %s   (RocketMQ remoting: NAMESRV_ADDR of RocketMQ clients)
  broker      %s   (gRPC)
  broker      %s   (RocketMQ remoting)
  metrics     %s://%s/metrics   health /healthz /readyz%s
  store       %s   (%s, topics auto-created)
  cpus        Go code on %s of %d (--procs)
`, time.Since(start).Round(time.Millisecond), c.NameServerAddr(), c.NameServerRemotingAddr(), c.BrokerAddr(),
				c.BrokerRemotingAddr(), httpScheme(withTLS), c.HTTPAddr(), pprofNote(pprof), abs, mode, cpus, runtime.NumCPU())
			if replicas > 1 {
				printDevGroup(out, c, replicas, httpScheme(withTLS))
			}
			if withTLS {
				printDevTLS(out, c, certs)
			}
			if withAuth {
				printDevAuth(out, c, admin)
			}
			fmt.Fprint(out, `Each nameserver and broker port serves gRPC and RocketMQ remoting alike.
Ctrl-C to stop.
`)
			<-cmd.Context().Done()
			fmt.Fprintln(cmd.OutOrStdout(), "shutting down")
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := c.Close(ctx); err != nil {
				return &exitError{code: exitProblems, err: fmt.Errorf("shutdown: %w", err)}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "stopped")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "./gantry-data", "data directory (the store is DIR/store; with --replicas, broker ID's is DIR/broker-ID/store and the controller's data DIR/controller)")
	f.IntVar(&replicas, "replicas", 1, fmt.Sprintf("brokers in the broker group, 1 to %d: with 2 or more, a controller elects a SYNC_MASTER among them; 1: a single broker", maxDevReplicas))
	f.StringVar(&ctlListen, "controller-listen", defaultController, "with --replicas: the controller's gRPC listen address (gantry admin -a)")
	f.StringVar(&ctlRaft, "controller-raft-listen", "127.0.0.1:9878", "with --replicas: the controller's raft listen address")
	f.StringVar(&nsListen, "namesrv-listen", "127.0.0.1:9877", "nameserver gRPC listen address")
	f.StringVar(&brokerList, "broker-listen", "127.0.0.1:8081", "broker gRPC listen address")
	f.StringVar(&nsRemoting, "namesrv-remoting-listen", "127.0.0.1:9876", "nameserver RocketMQ remoting listen address")
	f.StringVar(&brokerRemoting, "broker-remoting-listen", "127.0.0.1:10911", "broker RocketMQ remoting listen address (its listenPort)")
	f.StringVar(&httpListen, "http-listen", "127.0.0.1:5557", "broker metrics and health listen address")
	f.StringVar(&flush, "flush", "ASYNC_FLUSH", "flushDiskType: ASYNC_FLUSH or SYNC_FLUSH")
	f.IntVar(&procs, "procs", 0, "CPUs the process runs Go code on at once (GOMAXPROCS); 0: all under SYNC_FLUSH, and under ASYNC_FLUSH half of them (at least 1) while it is quiet and all while it is busy, unless GOMAXPROCS is set")
	f.BoolVarP(&verbose, "verbose", "v", false, "log at info level")
	f.BoolVar(&pprof, "pprof", false, "serve Go's profiles at /debug/pprof/ on the HTTP address (pprofEnable)")
	f.BoolVar(&withTLS, "tls", false, "serve every port with TLS only, with throw-away certificates written to DIR/tls")
	f.BoolVar(&withAuth, "auth", false, "authenticate and authorize every request, with the users of DIR/acl.json (at first an admin user dev prints)")
	return cmd
}

// devCheckFlags checks --flush, --procs and --replicas, returning the
// flush mode.
func devCheckFlags(flush string, procs, replicas int) (commitlog.FlushMode, error) {
	mode := commitlog.AsyncFlush
	switch flush {
	case "ASYNC_FLUSH":
	case "SYNC_FLUSH":
		mode = commitlog.SyncFlush
	default:
		return mode, fmt.Errorf("--flush %q: want ASYNC_FLUSH or SYNC_FLUSH", flush)
	}
	if procs < 0 {
		return mode, fmt.Errorf("--procs %d: want 0 (the default) or more", procs)
	}
	if replicas < 1 || replicas > maxDevReplicas {
		return mode, fmt.Errorf("--replicas %d: want 1 (a single broker, the default) to %d (a master and %d slaves)",
			replicas, maxDevReplicas, maxDevReplicas-1)
	}
	return mode, nil
}

// maxDevReplicas bounds dev's broker group: a master and four slaves.
const maxDevReplicas = 5

// devOptions sets dev's brokers in o: the flush mode and profiles, and
// with replicas > 1 a controller-mode group of replicas brokers, SYNC_MASTER
// (inSyncReplicas 2), serving reads on slaves.
func devOptions(o embedded.Options, mode commitlog.FlushMode, pprof bool, replicas int) embedded.Options {
	o.Broker = func(bc *broker.Config) {
		bc.FlushDiskType, bc.PprofEnable = mode, pprof
		if replicas > 1 {
			bc.BrokerRole, bc.InSyncReplicas, bc.SlaveReadEnable = broker.SyncMaster, 2, true
		}
	}
	if replicas > 1 {
		o.Replicas = replicas
	}
	return o
}

// printDevGroup prints the controller, each broker's endpoints, which one
// is master and the admin verbs that show and change the group.
func printDevGroup(out io.Writer, c *embedded.Cluster, replicas int, scheme string) {
	ctlData, _ := filepath.Abs(filepath.Join(c.Dir(), "controller"))
	fmt.Fprintf(out, "  controller  %s   (gRPC: gantry admin -a)   raft %s   data %s\n", c.ControllerAddr(), c.ControllerRaftAddr(), ctlData)
	var slaves []string
	for id := int64(1); id <= int64(replicas); id++ {
		m := c.Member(id)
		if m == nil {
			continue
		}
		s := m.Server()
		if s == nil {
			continue
		}
		store, _ := filepath.Abs(s.Broker().Config().StorePathRootDir)
		fmt.Fprintf(out, "  broker %d    %s   (gRPC)   %s   (RocketMQ remoting)   metrics %s://%s/metrics   store %s\n",
			id, s.GRPCAddr(), s.RemotingAddr(), scheme, s.HTTPAddr(), store)
		if !m.IsMaster() {
			slaves = append(slaves, strconv.FormatInt(id, 10))
		}
	}
	id, ep := c.MasterID()
	master := c.Member(id)
	if id == 0 || master == nil || master.Server() == nil {
		fmt.Fprintf(out, "Broker group: no master serves right now (an election?): gantry admin getSyncStateSet -a %s -b %s shows the controller's view.\n",
			c.ControllerAddr(), broker.DefaultBrokerName)
		return
	}
	s := master.Server()
	bc := s.Broker().Config()
	follow := "brokers " + strings.Join(slaves, ", ") + " (slaveReadEnable) replicate"
	switch len(slaves) {
	case 0:
		follow = "no other broker serves to replicate"
	case 1:
		follow = "broker " + slaves[0] + " (slaveReadEnable) replicates"
	}
	other := "ID"
	if len(slaves) > 0 {
		other = slaves[0]
	}
	fmt.Fprintf(out, `Broker group %s in controller mode (%s, inSyncReplicas %d): the master is broker %d, epoch %d,
  at %s (gRPC) and %s (RocketMQ remoting); %s from its HA port %s.
  gantry admin haStatus -b %s shows each slave's lag.
  gantry admin getSyncStateSet -a %s -b %s shows the controller's master, epoch and in-sync set.
  gantry admin electMaster -a %s -b %s -i %s makes in-sync broker %s the master; clients follow through the nameserver.
  A master silent for %v (its controller heartbeats) is replaced by an in-sync broker.
`, bc.BrokerName, bc.BrokerRole, bc.InSyncReplicas, id, ep, s.GRPCAddr(), s.RemotingAddr(), follow, s.HAAddr(), s.GRPCAddr(),
		c.ControllerAddr(), bc.BrokerName, c.ControllerAddr(), bc.BrokerName, other, other, embedded.ControllerBrokerTimeout)
}

func httpScheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

// printDevTLS says where dev's certificates are and how each client
// connects over TLS.
func printDevTLS(out io.Writer, c *embedded.Cluster, certs embedded.DevCerts) {
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		return a
	}
	ca := abs(certs.CA)
	fmt.Fprintf(out, `TLS on every port, TLS only (enforcing); the CA that signed the server certificate is %s
  gantry admin clusterList -n %s --tls-ca %s
  gantry bench produce -n %s --tls-ca %s -t BenchmarkTest
  curl --cacert %s https://%s/metrics
  Gantry's Go client:
    pem, _ := os.ReadFile(%q)
    roots := x509.NewCertPool()
    roots.AppendCertsFromPEM(pem)
    cfg := client.Config{NameServers: []string{%q}, TLS: &tls.Config{RootCAs: roots}}
  RocketMQ's Go client: producer.WithTls(true), consumer.WithTls(true) (it does not verify the server's certificate)
  A client certificate for servers that require one (mutual TLS): %s, key %s
`, ca, c.NameServerAddr(), ca, c.NameServerAddr(), ca, ca, c.HTTPAddr(), ca, c.NameServerAddr(), abs(certs.ClientCert), abs(certs.ClientKey))
}

// pprofNote says where Go's profiles are, with --pprof.
func pprofNote(on bool) string {
	if on {
		return "   profiles /debug/pprof/"
	}
	return ""
}

// devProcs returns how many CPUs the dev process runs Go code on at once,
// at least and at most, from the flag n, the flush mode and the current
// GOMAXPROCS: n, or, for 0 under ASYNC_FLUSH, half of current (at least
// one) while the process is quiet and all of current while it is busy
// (internal/procs), unless the GOMAXPROCS environment variable is set. A
// dev broker shares its machine with the application and tests that use
// it, and a request answered at once then costs less on one CPU than on
// two: the hand-overs between gRPC's goroutines no longer wake an idle CPU
// (system calls, such as the disk's, do not count against the limit). A
// busy one does more on all of them, its appenders waiting for the disk
// meanwhile. Under SYNC_FLUSH the group commit's flush runs beside the
// requests and every CPU is kept. The measurements:
// docs/decisions/0006-gomaxprocs-governor-for-gantry-dev.md.
func devProcs(n int, mode commitlog.FlushMode, current int) (low, high int) {
	switch {
	case n > 0:
		return n, n
	case os.Getenv("GOMAXPROCS") == "" && mode == commitlog.AsyncFlush:
		return max(1, current/2), current
	}
	return current, current
}

// devLoopback refuses listen addresses beyond loopback: gantry dev runs
// without authentication (docs/SECURITY.md, "Safe defaults").
func devLoopback(addrs []listenAddr) error {
	for _, la := range addrs {
		if exposure.Beyond(la.addr) {
			return fmt.Errorf("%s %s: gantry dev runs without authentication and listens on loopback only; "+
				"serve a network with gantry namesrv and gantry broker with authentication on (docs/SECURITY.md, \"Cluster\")",
				la.flag, exposure.Name(la.addr))
		}
	}
	return nil
}
