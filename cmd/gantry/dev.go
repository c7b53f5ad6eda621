package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/embedded"
	procgov "github.com/gantrymq/gantry/internal/procs"
)

func newDevCmd() *cobra.Command {
	var (
		dir                  string
		nsListen, brokerList string
		nsRemoting           string
		brokerRemoting       string
		httpListen           string
		flush                string
		procs                int
		verbose, pprof       bool
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a nameserver and a broker in one process, for development",
		Long: `Dev starts a nameserver and a broker in this process, with the store in
--dir, topics created on first use, and prints the endpoints, all on
127.0.0.1 unless the flags say otherwise. Every nameserver and broker port
speaks both Gantry's gRPC API and RocketMQ's remoting protocol: Apache
RocketMQ clients use 127.0.0.1:9876 as NAMESRV_ADDR, Gantry's 127.0.0.1:9877,
and either works for either. Go's profiles (/debug/pprof/) are served only
with --pprof. Ctrl-C shuts both down cleanly (the broker unregisters,
finishes requests in flight and flushes).`,
		Example: `  gantry dev
  gantry admin updateTopic -t Orders
  gantry bench produce -t Orders --count 100000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			mode := commitlog.AsyncFlush
			switch flush {
			case "ASYNC_FLUSH":
			case "SYNC_FLUSH":
				mode = commitlog.SyncFlush
			default:
				return &exitError{code: exitUsage, err: fmt.Errorf("--flush %q: want ASYNC_FLUSH or SYNC_FLUSH", flush)}
			}
			logger.Info("go memory limit", "limit", serverGC(0))
			if procs < 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("--procs %d: want 0 (the default) or more", procs)}
			}
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
			c, err := embedded.Start(cmd.Context(), embedded.Options{
				Dir: dir, NameServerListen: nsListen, BrokerListen: brokerList, HTTPListen: httpListen, Logger: logger,
				NameServerRemotingListen: nsRemoting, BrokerRemotingListen: brokerRemoting,
				Broker: func(bc *broker.Config) { bc.FlushDiskType, bc.PprofEnable = mode, pprof },
			})
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			abs, _ := filepath.Abs(c.Dir())
			fmt.Fprintf(cmd.OutOrStdout(), `Gantry dev ready in %v
  nameserver  %s   (gRPC: client.Config.NameServers, gantry admin -n)
  nameserver  %s   (RocketMQ remoting: NAMESRV_ADDR of RocketMQ clients)
  broker      %s   (gRPC)
  broker      %s   (RocketMQ remoting)
  metrics     http://%s/metrics   health /healthz /readyz%s
  store       %s   (%s, topics auto-created)
  cpus        Go code on %s of %d (--procs)
Each nameserver and broker port serves gRPC and RocketMQ remoting alike.
Ctrl-C to stop.
`, time.Since(start).Round(time.Millisecond), c.NameServerAddr(), c.NameServerRemotingAddr(), c.BrokerAddr(),
				c.BrokerRemotingAddr(), c.HTTPAddr(), pprofNote(pprof), abs, mode, cpus, runtime.NumCPU())
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
	f.StringVar(&dir, "dir", "./gantry-data", "data directory (the store is DIR/store)")
	f.StringVar(&nsListen, "namesrv-listen", "127.0.0.1:9877", "nameserver gRPC listen address")
	f.StringVar(&brokerList, "broker-listen", "127.0.0.1:8081", "broker gRPC listen address")
	f.StringVar(&nsRemoting, "namesrv-remoting-listen", "127.0.0.1:9876", "nameserver RocketMQ remoting listen address")
	f.StringVar(&brokerRemoting, "broker-remoting-listen", "127.0.0.1:10911", "broker RocketMQ remoting listen address (its listenPort)")
	f.StringVar(&httpListen, "http-listen", "127.0.0.1:5557", "broker metrics and health listen address")
	f.StringVar(&flush, "flush", "ASYNC_FLUSH", "flushDiskType: ASYNC_FLUSH or SYNC_FLUSH")
	f.IntVar(&procs, "procs", 0, "CPUs the process runs Go code on at once (GOMAXPROCS); 0: all under SYNC_FLUSH, and under ASYNC_FLUSH half of them (at least 1) while it is quiet and all while it is busy, unless GOMAXPROCS is set")
	f.BoolVarP(&verbose, "verbose", "v", false, "log at info level")
	f.BoolVar(&pprof, "pprof", false, "serve Go's profiles at /debug/pprof/ on the HTTP address (pprofEnable)")
	return cmd
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
