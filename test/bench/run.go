package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/internal/benchkit"
	"github.com/gantrymq/gantry/internal/histogram"

	"github.com/gantrymq/gantry/test/bench/benchproc"
)

// row is one workload's figures for both systems.
type row struct {
	name           string
	gantry, nats   benchkit.Result
	higherIsBetter bool // msgs/s; else latency
}

func run(ctx context.Context, cfg config) error {
	dir := cfg.dir
	if dir == "" {
		d, err := os.MkdirTemp(".", "bench-data-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	dir, _ = filepath.Abs(dir)
	bin, err := benchproc.BuildGantry(ctx, dir)
	if err != nil {
		return err
	}
	natsBin := ""
	if cfg.nats == "process" {
		if natsBin, err = buildNATS(dir); err != nil {
			return err
		}
	}
	fmt.Printf("peer benchmark: %d messages of %d bytes, %d in flight; nats-server %s; data in %s; clients GODEBUG=%s\n", cfg.count, cfg.size, cfg.inflight, cfg.nats, dir, os.Getenv("GODEBUG"))
	var rows []row
	var rss int64
	var push, pull benchkit.Result

	if cfg.only["async"] || cfg.only["consume"] || cfg.only["latency"] {
		g, err := startGantry(bin, filepath.Join(dir, "gantry-async"), "ASYNC_FLUSH")
		if err != nil {
			return err
		}
		n, err := startNATS(natsBin, filepath.Join(dir, "nats-async"), false)
		if err != nil {
			g.stop()
			return err
		}
		err = func() error {
			defer g.stop()
			defer n.stop()
			if cfg.only["async"] || cfg.only["consume"] {
				r := row{name: "async produce", higherIsBetter: true}
				fmt.Println("== async produce")
				if r.gantry, err = gantryProduce(ctx, g, "Async", cfg); err != nil {
					return err
				}
				if r.nats, err = n.produce(ctx, "async", cfg); err != nil {
					return err
				}
				rows = append(rows, r)
			}
			if cfg.only["consume"] {
				// JetStream's produce, just before, left a gigabyte of its
				// data dirty, written back while the next phase runs: that
				// is Gantry's consume, not JetStream's, which comes later.
				// Both consume from a clean page cache.
				syncedPhase("consume")
				r := row{name: "consume stored", higherIsBetter: true}
				if r.gantry, err = gantryConsume(ctx, g, "Async", cfg); err != nil {
					return err
				}
				fmt.Println("== push consume (Gantry's push consumer, one member, no-op handler)")
				if push, err = gantryPush(ctx, g, "Async", cfg); err != nil {
					return err
				}
				pull = r.gantry
				if r.nats, err = n.consume(ctx, "async", cfg); err != nil {
					return err
				}
				rows = append(rows, r)
				if rss, err = benchkit.RSSAnon(g.cmd.Process.Pid); err != nil {
					return err
				}
			}
			if cfg.only["latency"] {
				// The phases above may leave much of JetStream's data dirty
				// (it syncs every 2 min, Gantry's async flusher every 500
				// ms), written back 30 s after it was written: while
				// Gantry's sends are timed, not JetStream's, which come
				// later. Both start from a clean page cache.
				syncedPhase("one send at a time")
				gsend, gclose, err := gantryLatencySender(ctx, g, "Latency")
				if err != nil {
					return err
				}
				defer gclose()
				nsend, err := n.latencySender(ctx, "latency")
				if err != nil {
					return err
				}
				both, err := oneAtATime(ctx, [2]func(context.Context, []byte) error{gsend, nsend}, cfg)
				if err != nil {
					return err
				}
				rows = append(rows, row{name: "one at a time", gantry: both[0], nats: both[1]})
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	if cfg.only["sync"] {
		// The phases above leave gigabytes of dirty pages, whose writeback
		// would compete with the fsyncs measured next, for both systems.
		fmt.Println("== removing the data of the phases above and syncing the disk")
		for _, d := range []string{"gantry-async", "nats-async"} {
			if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
				return err
			}
		}
		syncDisks()
		g, err := startGantry(bin, filepath.Join(dir, "gantry-sync"), "SYNC_FLUSH")
		if err != nil {
			return err
		}
		n, err := startNATS(natsBin, filepath.Join(dir, "nats-sync"), true)
		if err != nil {
			g.stop()
			return err
		}
		r := row{name: "sync produce (fsync)", higherIsBetter: true}
		fmt.Println("== sync produce")
		r.gantry, err = gantryProduce(ctx, g, "Sync", cfg)
		if err == nil {
			r.nats, err = n.produce(ctx, "sync", cfg)
		}
		g.stop()
		n.stop()
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	printRows(rows)
	if rss > 0 {
		fmt.Printf("gantry broker RssAnon after %d produced and consumed: %.1f MiB\n", cfg.count, float64(rss)/(1<<20))
	}
	if push.Msgs > 0 && pull.Msgs > 0 {
		fmt.Printf("gantry push consumer: %.0f msgs/s, %.0f%% of its pull consumer's %.0f msgs/s in this run\n",
			push.MsgsPerSec(), 100*push.MsgsPerSec()/pull.MsgsPerSec(), pull.MsgsPerSec())
	}
	return nil
}

// syncedPhase writes every dirty page back, then prints the header of
// phase name with how much was dirty and how long the sync took.
func syncedPhase(name string) {
	dirty := dirtyMiB()
	start := time.Now()
	syncDisks()
	fmt.Printf("== %s (first synced the disk: %d MiB were dirty, %s)\n", name, dirty, time.Since(start).Round(time.Millisecond))
}

func printRows(rows []row) {
	fmt.Println()
	fmt.Printf("%-22s %16s %16s %8s\n", "workload", "gantry", "jetstream", "ratio")
	for _, r := range rows {
		if r.higherIsBetter {
			g, n := r.gantry.MsgsPerSec(), r.nats.MsgsPerSec()
			fmt.Printf("%-22s %12.0f/s %12.0f/s %7.2fx\n", r.name, g, n, g/n)
			continue
		}
		for _, q := range []float64{0.5, 0.99} {
			g, n := r.gantry.Latency.Quantile(q), r.nats.Latency.Quantile(q)
			fmt.Printf("%-22s %16v %16v %7.2fx\n", fmt.Sprintf("%s p%g", r.name, q*100), g, n, float64(g)/float64(n))
		}
	}
}

func gantryConfig(g *gantryProc) client.Config {
	return client.Config{NameServers: []string{g.namesrv}}
}

func gantryProduce(ctx context.Context, g *gantryProc, topic string, cfg config) (benchkit.Result, error) {
	p, err := client.NewProducer(ctx, gantryConfig(g))
	if err != nil {
		return benchkit.Result{}, err
	}
	defer p.Close(context.Background())
	warm(ctx, p, topic)
	cpu := benchkit.StartCPU(g.cmd.Process.Pid)
	res, err := benchkit.Produce(ctx, benchkit.GantrySender(p, topic), benchkit.ProduceConfig{
		Count: cfg.count, Size: cfg.size, Inflight: cfg.inflight, Run: benchkit.NewRunID()})
	fmt.Println("gantry   ", res)
	fmt.Println("         ", cpu.Stop(res.Msgs))
	return res, err
}

// warm creates the topic and its route before timing starts.
func warm(ctx context.Context, p *client.Producer, topic string) {
	for range 3 {
		_, _ = p.Send(ctx, &client.Message{Topic: topic, Body: []byte("warm-up")})
		time.Sleep(200 * time.Millisecond)
	}
}

func gantryConsume(ctx context.Context, g *gantryProc, topic string, cfg config) (benchkit.Result, error) {
	pc, err := client.NewPullConsumer(ctx, gantryConfig(g), "bench")
	if err != nil {
		return benchkit.Result{}, err
	}
	defer pc.Close(context.Background())
	var v benchkit.Verifier
	cpu := benchkit.StartCPU(g.cmd.Process.Pid)
	res, err := benchkit.ConsumeGantry(ctx, pc, topic, benchkit.ConsumeConfig{Count: cfg.count, FromMin: true}, &v)
	fmt.Println("gantry   ", res)
	fmt.Println("         ", cpu.Stop(res.Msgs))
	lines, _ := v.Report()
	fmt.Println("         ", strings.Join(lines, "; "))
	return res, err
}

func gantryPush(ctx context.Context, g *gantryProc, topic string, cfg config) (benchkit.Result, error) {
	var v benchkit.Verifier
	res, err := benchkit.ConsumePush(ctx, gantryConfig(g), "bench_push", topic, benchkit.PushConfig{ConsumeConfig: benchkit.ConsumeConfig{Count: cfg.count}}, &v)
	fmt.Println("gantry   ", res)
	lines, _ := v.Report()
	fmt.Println("         ", strings.Join(lines, "; "))
	return res, err
}

// gantryLatencySender returns a send of one message at a time to topic,
// warmed up, and the producer's Close.
func gantryLatencySender(ctx context.Context, g *gantryProc, topic string) (func(context.Context, []byte) error, func(), error) {
	p, err := client.NewProducer(ctx, gantryConfig(g))
	if err != nil {
		return nil, nil, err
	}
	warm(ctx, p, topic)
	return func(ctx context.Context, body []byte) error {
		_, err := p.Send(ctx, &client.Message{Topic: topic, Body: body})
		return err
	}, func() { p.Close(context.Background()) }, nil
}

// latencyRounds is how many rounds the one-at-a-time sends are made in,
// each system's in turn.
const latencyRounds = 10

// oneAtATime times cfg.latencyCount sends one at a time to each system, in
// latencyRounds rounds that alternate between them (Gantry first in one
// round, JetStream in the next), so that the machine's drift over the
// phase falls on both alike instead of on whichever went first. It
// returns Gantry's result and JetStream's.
func oneAtATime(ctx context.Context, sends [2]func(context.Context, []byte) error, cfg config) ([2]benchkit.Result, error) {
	var res [2]benchkit.Result
	for i := range res {
		res[i] = benchkit.Result{Op: "produce one at a time", Latency: &histogram.Histogram{}}
	}
	per := max(cfg.latencyCount/latencyRounds, 1)
	for round := range latencyRounds {
		for k := range 2 {
			sys := (round + k) % 2
			r, err := benchkit.OneAtATime(ctx, sends[sys], per, cfg.size)
			res[sys].Msgs += r.Msgs
			res[sys].Bytes += r.Bytes
			res[sys].Elapsed += r.Elapsed
			res[sys].Latency.Merge(r.Latency)
			if err != nil {
				return res, fmt.Errorf("%s: %w", [2]string{"gantry", "jetstream"}[sys], err)
			}
		}
	}
	fmt.Printf("          %d rounds of %d sends each, the two systems in turn\n", latencyRounds, per)
	fmt.Println("gantry   ", res[0])
	fmt.Println("jetstream", res[1])
	return res, nil
}
