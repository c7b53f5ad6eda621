package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/internal/benchkit"
)

func newBenchCmd() *cobra.Command {
	var (
		topic, group   string
		count          int64
		duration       time.Duration
		size, inflight int
		pullBatch      int
		failEvery      int64
		fromMin, push  bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load generator: produce and consume with throughput and latency",
		Long: `Bench produces or consumes messages against a running cluster and prints a
progress line a second, then msgs/s, MB/s and latency percentiles (p50, p99,
p999) from a histogram. Produced bodies carry a run id and sequence number, so
"bench consume" reports, per run, how many were received, lost or duplicated.
--tls (and --tls-ca, --tls-cert, --tls-key) run it over TLS; --access-key and
--secret-key (or $GANTRY_ACCESS_KEY and $GANTRY_SECRET_KEY) sign its calls,
against a cluster with authentication on.`,
		Example: `  gantry bench produce -t Orders --count 100000
  gantry bench consume -t Orders --count 100000`,
	}
	verbsOnly(cmd)
	nameServers := nameServerFlag(cmd)
	clientConfig := clientFlags(cmd, nameServers, "the user's")
	pf := cmd.PersistentFlags()
	pf.StringVarP(&topic, "topic", "t", "BenchmarkTest", "topic")
	pf.Int64Var(&count, "count", 0, "messages (default: run for --duration)")
	pf.DurationVar(&duration, "duration", 0, "how long to run when --count is not given (default 10s)")
	var cpuProfile string
	pf.StringVar(&cpuProfile, "cpuprofile", "", "write the client's CPU profile to this file")
	_ = pf.MarkHidden("cpuprofile")
	cmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		clientGC(inflight, size)
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		cmd.PersistentPostRun = func(*cobra.Command, []string) { pprof.StopCPUProfile(); f.Close() }
		return nil
	}

	produce := &cobra.Command{
		Use:   "produce",
		Short: "Send messages with a window of messages in flight",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if count == 0 && duration == 0 {
				duration = 10 * time.Second
			}
			ctx := cmd.Context()
			ccfg, err := clientConfig()
			if err != nil {
				return err
			}
			p, err := client.NewProducer(ctx, ccfg)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			defer p.Close(context.Background())
			out := cmd.OutOrStdout()
			printFlushModes(ctx, out, ccfg)
			run := benchkit.NewRunID()
			fmt.Fprintf(out, "producing to %s: run %s, %s, %d-byte bodies, %d in flight\n", topic, run, amount(count, duration), size, inflight)
			res, err := benchkit.Produce(ctx, benchkit.GantrySender(p, topic), benchkit.ProduceConfig{
				Count: count, Duration: duration, Size: size, Inflight: inflight, Run: run, Progress: out, Fatal: definite})
			if err == nil || res.Msgs > 0 { // a run that failed at once has nothing to say
				fmt.Fprintln(out, res)
			}
			if err != nil {
				return &exitError{code: exitProblems, err: err}
			}
			return nil
		},
	}
	produce.Flags().IntVar(&size, "size", 1024, "body size in bytes")
	produce.Flags().IntVar(&inflight, "inflight", 4096, "messages in flight at most")

	consume := &cobra.Command{
		Use:   "consume",
		Short: "Pull every queue of a topic and check what bench produce sent",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			ccfg, err := clientConfig()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			var v benchkit.Verifier
			var res benchkit.Result
			cc := benchkit.ConsumeConfig{Count: count, Duration: duration, FromMin: fromMin, Progress: func(s string) { fmt.Fprintln(out, s) }}
			if push {
				// The consumer retries failed pulls: its warnings say why.
				ccfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
				fmt.Fprintf(out, "consuming %s with a push consumer of group %s: %s\n", topic, group, amount(count, duration))
				if failEvery > 0 && count > 0 {
					cc.Count = count - count/failEvery // the healthy ones
				}
				res, err = benchkit.ConsumePush(ctx, ccfg, group, topic, benchkit.PushConfig{ConsumeConfig: cc, PullBatch: pullBatch, FailEvery: failEvery}, &v)
			} else {
				pc, perr := client.NewPullConsumer(ctx, ccfg, group)
				if perr != nil {
					return &exitError{code: exitUsage, err: perr}
				}
				defer pc.Close(context.Background())
				fmt.Fprintf(out, "consuming %s as group %s: %s\n", topic, group, amount(count, duration))
				res, err = benchkit.ConsumeGantry(ctx, pc, topic, cc, &v)
			}
			if err != nil && res.Msgs == 0 { // nothing consumed: the error says why
				return &exitError{code: exitProblems, err: err}
			}
			fmt.Fprintln(out, res)
			if push && failEvery > 0 {
				return stormVerdict(out, failEvery, cc.Count, res, err)
			}
			lines, ok := v.Report()
			for _, l := range lines {
				fmt.Fprintln(out, l)
			}
			switch {
			case err != nil:
				return &exitError{code: exitProblems, err: err}
			case !ok:
				return &exitError{code: exitProblems, err: fmt.Errorf("messages lost")}
			case count > 0 && res.Msgs < count:
				return &exitError{code: exitProblems, err: fmt.Errorf("received %d of %d messages", res.Msgs, count)}
			}
			return nil
		},
	}
	consume.Flags().StringVarP(&group, "group", "g", "gantry_bench_consumer", "consumer group (its committed offsets are the start)")
	consume.Flags().BoolVar(&fromMin, "from-min", false, "start at each queue's first message, not the committed offset (pull only)")
	consume.Flags().BoolVar(&push, "push", false, "consume with a push consumer (one member of the group; a new group starts at the first message)")
	consume.Flags().IntVar(&pullBatch, "pull-batch", 0, "push: messages per pull (default: the client's, 256)")
	consume.Flags().Int64Var(&failEvery, "fail-every", 0, "push: fail the first delivery of every N-th message (a retry storm; only the others are counted)")
	cmd.AddCommand(produce, consume)
	return cmd
}

// stormVerdict ends a push consume run with --fail-every: the failed
// messages come back 10 s later and are not waited for, so only the
// healthy ones (want of them) are counted.
func stormVerdict(out io.Writer, failEvery, want int64, res benchkit.Result, err error) error {
	fmt.Fprintf(out, "retry storm: the first delivery of every %d-th message failed and was sent back; %d healthy messages counted\n", failEvery, res.Msgs)
	if err != nil {
		return &exitError{code: exitProblems, err: err}
	}
	if want > 0 && res.Msgs < want {
		return &exitError{code: exitProblems, err: fmt.Errorf("received %d of %d healthy messages", res.Msgs, want)}
	}
	return nil
}

// definite reports a send error that every later send of the run would
// meet too: the topic does not exist (or cannot be written), the message
// is refused. bench produce stops at it instead of failing each message.
func definite(err error) bool {
	return errors.Is(err, client.ErrTopicNotFound) || errors.Is(err, client.ErrNoPermission) ||
		errors.Is(err, client.ErrInvalidArgument) || errors.Is(err, client.ErrNoQueue)
}

func amount(count int64, d time.Duration) string {
	if count > 0 {
		return fmt.Sprintf("%d messages", count)
	}
	if d == 0 {
		return "until idle"
	}
	return "for " + d.String()
}

// printFlushModes says how each broker acknowledges (flushDiskType): the
// figure means different things for ASYNC_FLUSH and SYNC_FLUSH.
func printFlushModes(ctx context.Context, out io.Writer, cfg client.Config) {
	a, err := client.NewAdmin(ctx, cfg)
	if err != nil {
		return
	}
	defer a.Close()
	info, err := a.ClusterInfo(ctx)
	if err != nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(info.Brokers)) {
		if addr := info.Brokers[name].Addrs[0]; addr != "" {
			if st, err := a.BrokerStatus(ctx, addr); err == nil {
				fmt.Fprintf(out, "broker %s at %s: %s\n", name, addr, st["flushDiskType"])
			}
		}
	}
}
