// Command bench is the peer benchmark: the same workloads, in one run,
// against Gantry (a `gantry dev` process built from this repository,
// store on disk, the client in this process over loopback) and against NATS
// JetStream (a nats-server process built from the nats-server module this
// benchmark requires, file storage, the client in this process over
// loopback), printing both and the ratio. With -nats embedded the
// nats-server runs inside the benchmark process instead, beside the clients.
//
//	cd test/bench && go run . [-count 1000000] [-size 1024] [-inflight 4096] [-only async,sync,latency,consume] [-nats process|embedded]
//
// Workloads, 1 KiB bodies:
//   - async: produce with 4,096 in flight; Gantry ASYNC_FLUSH, JetStream's
//     default file store (fsync in the background);
//   - sync: the same with every acknowledgement after fsync: Gantry
//     SYNC_FLUSH, JetStream with sync_interval always;
//   - latency: one send at a time (async flush), latency percentiles, in
//     ten rounds that alternate between the two systems;
//   - consume: read back the messages the async run stored (Gantry pull
//     consumer, JetStream pull consumer without acks), and once more with
//     Gantry's push consumer (one member), printed against its pull
//     consumer's rate;
//   - after consume, the Gantry broker's anonymous RSS (RssAnon).
//
// Both clients run in this process, under the same runtime settings: the
// garbage collector's (below) and, on Linux, GODEBUG=madvdontneed=0, for
// which the benchmark starts itself again (procattr_linux.go); the servers
// get the environment it was started with.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gantrymq/gantry/test/bench/benchproc"
)

func main() {
	if err := withClientGODEBUG(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: start again with GODEBUG:", err)
		os.Exit(1)
	}
	var cfg config
	flag.Int64Var(&cfg.count, "count", 1_000_000, "messages per produce workload and for consume")
	flag.IntVar(&cfg.latencyCount, "latency-count", 20_000, "sends of the one-at-a-time workload")
	flag.IntVar(&cfg.size, "size", 1024, "body size")
	flag.IntVar(&cfg.inflight, "inflight", 4096, "messages in flight")
	only := flag.String("only", "async,sync,latency,consume", "workloads to run")
	flag.StringVar(&cfg.dir, "dir", "", "data directory (default: a temporary one on the disk of the current directory)")
	flag.StringVar(&cfg.nats, "nats", "process", "how nats-server runs: process (its own, like gantry dev) or embedded (in this process)")
	flag.Parse()
	if cfg.nats != "process" && cfg.nats != "embedded" {
		fmt.Fprintf(os.Stderr, "bench: -nats %q: want process or embedded\n", cfg.nats)
		os.Exit(2)
	}
	if os.Getenv("GOGC") == "" {
		// As `gantry` does for its servers and its bench tool; here it
		// applies to both clients (and an embedded nats-server) alike.
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" && cfg.nats == "process" {
		// And `gantry bench`'s soft memory limit, for both clients alike
		// (not with an embedded nats-server, which would be held to it
		// too): a heap that stays small reuses its memory, where one that
		// swings touches memory the VM gave back to its host
		// (docs/decisions/0005-memory-limit-sized-from-machine.md); four
		// times the bodies in flight when more, never throttling a larger
		// load.
		debug.SetMemoryLimit(max(40<<20, 4*int64(cfg.inflight)*int64(cfg.size)))
	}
	cfg.only = map[string]bool{}
	for _, w := range strings.Split(*only, ",") {
		cfg.only[strings.TrimSpace(w)] = true
	}
	if err := run(context.Background(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type config struct {
	count        int64
	latencyCount int
	size         int
	inflight     int
	dir          string
	nats         string // process or embedded
	only         map[string]bool
}

// gantryProc is a `gantry dev` process.
type gantryProc struct {
	cmd     *exec.Cmd
	namesrv string
}

func startGantry(bin, dir, flush string) (*gantryProc, error) {
	addrs, err := benchproc.FreeAddrs(3)
	if err != nil {
		return nil, err
	}
	ns, br, ht := addrs[0], addrs[1], addrs[2]
	cmd := exec.Command(bin, "dev", "--dir", dir, "--namesrv-listen", ns, "--broker-listen", br, "--http-listen", ht, "--flush", flush)
	cmd.Stderr = os.Stderr
	ownChild(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	deadline := time.Now().Add(30 * time.Second)
	var seen string
	for !strings.Contains(seen, "Ctrl-C") {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("gantry dev did not start: %s", seen)
		}
		n, err := out.Read(buf)
		if err != nil {
			return nil, fmt.Errorf("gantry dev: %w (%s)", err, seen)
		}
		seen += string(buf[:n])
	}
	go func() { // drain
		for {
			if _, err := out.Read(buf); err != nil {
				return
			}
		}
	}()
	return &gantryProc{cmd: cmd, namesrv: ns}, nil
}

func (g *gantryProc) stop() {
	_ = g.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = g.cmd.Process.Kill()
		<-done
	}
}
