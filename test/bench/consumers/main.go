// Command consumers measures what many push consumers cost a broker: it
// starts a nameserver and a broker as processes of their own (`gantry
// namesrv`, `gantry broker`), creates topics, starts push consumers of
// Gantry's Go client, each a client of its own (its own connections, as
// separate applications have), in groups, lets them settle, and reports the
// broker process's CPU over a window (utime+stime from /proc/PID/stat, as a
// percentage of one core), its RSS, goroutines and GC cycles (from its
// /metrics), and optionally takes a CPU profile of it (/debug/pprof/) and
// splits it into the garbage collector's parts and the rest.
//
//	cd test/bench/consumers && go run . -consumers 5000 -groups 100          # idle
//	cd test/bench/consumers && go run . -consumers 1000 -groups 125 -rate 2000 -profile 30s   # busy
//
// With -rate a producer sends that many messages a second, round robin
// over the topics, during the settle time and the windows. Group g
// consumes topic g mod -topics (default: one topic per group), with
// -queues queues each. The load generator shares the machine with the
// servers; only the broker's own CPU is the figure. docs/BENCHMARKS.md has
// results and how the GC share is computed.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/internal/benchkit"

	"github.com/gantrymq/gantry/test/bench/benchproc"
)

type config struct {
	consumers, groups, topics, queues int
	concurrency, startParallel        int
	settle, window, sample, profile   time.Duration
	rate, size                        int
	gantry, dir                       string
	brokerEnv                         string
	keep, heapAfterGC                 bool
}

func main() {
	var cfg config
	flag.IntVar(&cfg.consumers, "consumers", 5000, "push consumers, each a client of its own")
	flag.IntVar(&cfg.groups, "groups", 100, "consumer groups (consumers spread evenly)")
	flag.IntVar(&cfg.topics, "topics", 0, "topics (group g consumes topic g mod topics; default: one per group)")
	flag.IntVar(&cfg.queues, "queues", 8, "queues per topic")
	flag.IntVar(&cfg.concurrency, "concurrency", client.DefaultConsumeConcurrency, "consume goroutines per consumer")
	flag.IntVar(&cfg.startParallel, "start-parallel", 32, "consumers starting at once")
	flag.DurationVar(&cfg.settle, "settle", 40*time.Second, "wait after the last consumer started, before measuring")
	flag.DurationVar(&cfg.window, "window", 60*time.Second, "CPU measurement window")
	flag.DurationVar(&cfg.sample, "sample", 10*time.Second, "print the broker's CPU every this long within the window")
	flag.DurationVar(&cfg.profile, "profile", 0, "after the window, take a broker CPU profile this long and report its GC share (0: none)")
	flag.IntVar(&cfg.rate, "rate", 0, "messages a second a producer sends over the topics (0: idle consumers)")
	flag.IntVar(&cfg.size, "size", 256, "body size with -rate")
	flag.StringVar(&cfg.gantry, "gantry", "", "gantry binary (default: built from this repository)")
	flag.StringVar(&cfg.dir, "dir", "", "data directory (default: a temporary one)")
	flag.StringVar(&cfg.brokerEnv, "broker-env", "", "extra environment of the broker, comma-separated KEY=VALUE (e.g. GOMEMLIMIT=40MiB)")
	flag.BoolVar(&cfg.heapAfterGC, "heap", true, "after the window, force a collection in the broker (/debug/pprof/heap?gc=1) and report its live heap")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the data directory and the profile")
	flag.Parse()
	if cfg.topics <= 0 {
		cfg.topics = cfg.groups
	}
	if cfg.consumers <= 0 || cfg.groups <= 0 || cfg.queues <= 0 || cfg.groups > cfg.consumers {
		fmt.Fprintln(os.Stderr, "consumers: want -consumers >= -groups > 0 and -queues > 0")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "consumers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) error {
	dir := cfg.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "consumers-bench-")
		if err != nil {
			return err
		}
		if !cfg.keep {
			defer os.RemoveAll(d)
		}
		dir = d
	}
	bin := cfg.gantry
	if bin == "" {
		var err error
		if bin, err = benchproc.BuildGantry(context.Background(), dir); err != nil {
			return err
		}
	}
	ns, err := startNamesrv(bin, dir)
	if err != nil {
		return err
	}
	defer ns.stop()
	br, err := startBroker(ctx, bin, dir, ns.grpc, cfg.brokerEnv)
	if err != nil {
		return err
	}
	defer br.stop()
	fmt.Printf("broker pid %d (env %q), nameserver pid %d; %d push consumers in %d groups over %d topics of %d queues; producer %d msgs/s\n",
		br.cmd.Process.Pid, cfg.brokerEnv, ns.cmd.Process.Pid, cfg.consumers, cfg.groups, cfg.topics, cfg.queues, cfg.rate)

	ccfg := client.Config{NameServers: []string{ns.grpc}}
	if err := createTopics(ctx, ccfg, cfg); err != nil {
		return err
	}
	m := br.metrics()
	fmt.Printf("before the consumers: broker %s, goroutines %.0f, heap in use %.1f MiB\n", br.rss(), m["go_goroutines"], m["go_memstats_heap_inuse_bytes"]/(1<<20))
	var delivered atomic.Int64
	var cs []*client.PushConsumer
	defer func() { shutdownAll(cs) }()
	t0 := time.Now()
	cs, err = startConsumers(ctx, ccfg, cfg, &delivered)
	if err != nil {
		return err
	}
	fmt.Printf("started %d consumers in %v; broker RSS %s\n", len(cs), time.Since(t0).Round(time.Millisecond), br.rss())

	var sent, sendErrs atomic.Int64
	if cfg.rate > 0 {
		pctx, pstop := context.WithCancel(ctx)
		defer pstop()
		var pwg sync.WaitGroup
		defer pwg.Wait()
		defer pstop()
		p, err := client.NewProducer(ctx, ccfg)
		if err != nil {
			return err
		}
		defer p.Close(context.Background())
		pwg.Go(func() { produce(pctx, p, cfg, &sent, &sendErrs) })
	}
	if !sleepCtx(ctx, cfg.settle) {
		return ctx.Err()
	}

	m0 := br.metrics()
	cpu0, _ := benchkit.ProcCPU(br.cmd.Process.Pid)
	nsCPU0, _ := benchkit.ProcCPU(ns.cmd.Process.Pid)
	self0, _ := benchkit.ProcCPU(os.Getpid())
	d0 := delivered.Load()
	start := time.Now()
	prev, prevT := cpu0, start
	for time.Since(start) < cfg.window {
		if !sleepCtx(ctx, min(cfg.sample, cfg.window-time.Since(start))) {
			return ctx.Err()
		}
		c, err := benchkit.ProcCPU(br.cmd.Process.Pid)
		if err != nil {
			return err
		}
		now := time.Now()
		fmt.Printf("  %4.0fs  broker CPU %5.1f %% of a core\n", now.Sub(start).Seconds(), 100*(c-prev)/now.Sub(prevT).Seconds())
		prev, prevT = c, now
	}
	el := time.Since(start).Seconds()
	cpu1, _ := benchkit.ProcCPU(br.cmd.Process.Pid)
	nsCPU1, _ := benchkit.ProcCPU(ns.cmd.Process.Pid)
	self1, _ := benchkit.ProcCPU(os.Getpid())
	m1 := br.metrics()
	fmt.Printf("window %.0fs: broker CPU %.2f %% of one core (%.2f s); nameserver %.2f %%; load generator %.0f %%\n",
		el, 100*(cpu1-cpu0)/el, cpu1-cpu0, 100*(nsCPU1-nsCPU0)/el, 100*(self1-self0)/el)
	fmt.Printf("broker: RSS %s, goroutines %.0f (stacks %.1f MiB), heap in use %.1f MiB, next GC at %.1f MiB, GC cycles %.2f/s\n",
		br.rss(), m1["go_goroutines"], m1["go_memstats_stack_inuse_bytes"]/(1<<20), m1["go_memstats_heap_inuse_bytes"]/(1<<20),
		m1["go_memstats_next_gc_bytes"]/(1<<20), (m1["go_gc_duration_seconds_count"]-m0["go_gc_duration_seconds_count"])/el)
	if cfg.heapAfterGC {
		// A collection now (the heap profile endpoint's ?gc=1) shows the
		// live heap: what the consumers' state really takes.
		if resp, err := http.Get("http://" + br.http + "/debug/pprof/heap?gc=1"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			m2 := br.metrics()
			fmt.Printf("after a forced GC: heap in use %.1f MiB, heap objects %.0f, RSS %s\n",
				m2["go_memstats_heap_inuse_bytes"]/(1<<20), m2["go_memstats_heap_objects"], br.rss())
		}
	}
	if cfg.rate > 0 {
		fmt.Printf("delivered %.0f msgs/s to handlers; sent %d (%d failed)\n", float64(delivered.Load()-d0)/el, sent.Load(), sendErrs.Load())
	}
	if cfg.profile > 0 {
		if err := profileGC(ctx, br, cfg, dir); err != nil {
			return err
		}
	}
	return nil
}

// createTopics creates the topics, -queues queues each.
func createTopics(ctx context.Context, ccfg client.Config, cfg config) error {
	a, err := client.NewAdmin(ctx, ccfg)
	if err != nil {
		return err
	}
	defer a.Close()
	for t := range cfg.topics {
		tc := client.TopicConfig{Name: topicName(t), ReadQueueNums: int32(cfg.queues), WriteQueueNums: int32(cfg.queues)}
		for try := 0; ; try++ {
			err := a.CreateTopic(ctx, tc)
			if err == nil {
				break
			}
			if try == 30 || !sleepCtx(ctx, time.Second) { // the broker registers with the nameserver soon after /readyz
				return fmt.Errorf("create %s: %w", tc.Name, err)
			}
		}
	}
	return nil
}

func topicName(t int) string { return fmt.Sprintf("Consumers%04d", t) }

// startConsumers starts the consumers, -start-parallel at a time.
func startConsumers(ctx context.Context, ccfg client.Config, cfg config, delivered *atomic.Int64) ([]*client.PushConsumer, error) {
	handler := func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		delivered.Add(int64(len(msgs)))
		return client.ConsumeSuccess
	}
	cs := make([]*client.PushConsumer, cfg.consumers)
	t0 := time.Now()
	var next, retries atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range cfg.startParallel {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.consumers || ctx.Err() != nil {
					return
				}
				g := i % cfg.groups
				var c *client.PushConsumer
				var err error
				for try := 0; try < 5 && ctx.Err() == nil; try++ {
					// On a loaded machine a start may time out; an
					// application would try again.
					if c, err = startConsumer(ctx, ccfg, cfg, g, handler); err == nil {
						break
					}
					retries.Add(1)
					sleepCtx(ctx, time.Second)
				}
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, fmt.Errorf("consumer %d: %w", i, err))
					mu.Unlock()
					return
				}
				cs[i] = c
				if (i+1)%500 == 0 {
					fmt.Printf("  %d consumers started, %v\n", i+1, time.Since(t0).Round(time.Second))
				}
			}
		})
	}
	wg.Wait()
	if n := retries.Load(); n > 0 {
		fmt.Printf("  %d starts failed and were tried again\n", n)
	}
	var started []*client.PushConsumer
	for _, c := range cs {
		if c != nil {
			started = append(started, c)
		}
	}
	return started, firstErr
}

func startConsumer(ctx context.Context, ccfg client.Config, cfg config, g int, handler client.MessageHandler) (*client.PushConsumer, error) {
	c, err := client.NewPushConsumer(ctx, ccfg, fmt.Sprintf("ConsumersGroup%04d", g), handler,
		client.WithConsumeConcurrency(cfg.concurrency))
	if err != nil {
		return nil, err
	}
	if err := c.Subscribe(topicName(g%cfg.topics), "*"); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.Start(sctx); err != nil {
		return nil, err
	}
	return c, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func shutdownAll(cs []*client.PushConsumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, c := range cs {
		sem <- struct{}{}
		wg.Go(func() { defer func() { <-sem }(); _ = c.Shutdown(ctx) })
	}
	wg.Wait()
}

// produce sends cfg.rate messages a second, round robin over the topics,
// in ticks of 10 ms.
func produce(ctx context.Context, p *client.Producer, cfg config, sent, errs *atomic.Int64) {
	body := make([]byte, cfg.size)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	start := time.Now()
	var n int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due := int64(time.Since(start).Seconds() * float64(cfg.rate))
		for ; n < due; n++ {
			sent.Add(1)
			p.SendAsync(ctx, &client.Message{Topic: topicName(int(n) % cfg.topics), Body: body}, func(_ *client.Message, _ client.SendResult, err error) {
				if err != nil && ctx.Err() == nil {
					errs.Add(1)
				}
			})
		}
	}
}

// profileGC takes a CPU profile of the broker and prints the garbage
// collector's share of it and the top functions.
func profileGC(ctx context.Context, br *proc, cfg config, dir string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", br.http, int(cfg.profile.Seconds()))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: %s: %s", resp.Status, b)
	}
	path := filepath.Join(dir, "broker.cpu.pprof")
	if cfg.keep {
		_ = os.WriteFile(path, b, 0o644)
	}
	p, err := parseCPUProfile(b)
	if err != nil {
		return err
	}
	share := p.gcShare()
	var gc int64
	var classes []string
	for k, v := range share {
		if k != "" {
			gc += v
			classes = append(classes, k)
		}
	}
	sort.Strings(classes)
	tot := float64(max(p.total, 1))
	fmt.Printf("profile %v: broker CPU %.2f s (%.1f %% of a core); GC %.1f %% of it:", cfg.profile, float64(p.total)/1e9,
		100*float64(p.total)/1e9/cfg.profile.Seconds(), 100*float64(gc)/tot)
	for _, k := range classes {
		fmt.Printf(" %s %.1f %%;", k, 100*float64(share[k])/tot)
	}
	fmt.Println()
	fmt.Println("top functions (flat):")
	for _, l := range p.top(15) {
		fmt.Println("   ", l)
	}
	if cfg.keep {
		fmt.Println("profile kept at", path)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// proc is a server process.
type proc struct {
	cmd        *exec.Cmd
	grpc, http string
	done       chan struct{}
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) rss() string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return "?"
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && (k == "VmRSS" || k == "RssAnon") {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			out = append(out, fmt.Sprintf("%s %.1f MiB", k, kb/1024))
		}
	}
	return strings.Join(out, ", ")
}

// metrics reads the broker's /metrics samples without labels.
func (p *proc) metrics() map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get("http://" + p.http + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "#") || strings.Contains(l, "{") {
			continue
		}
		if k, v, ok := strings.Cut(l, " "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				out[k] = f
			}
		}
	}
	return out
}

// startProc starts a server with its output in logPath.
func startProc(cmd *exec.Cmd, logPath string) (*proc, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = log, log
	benchproc.OwnChild(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func startNamesrv(bin, dir string) (*proc, error) {
	addrs, err := benchproc.FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	grpcAddr, remoting := addrs[0], addrs[1]
	p, err := startProc(exec.Command(bin, "namesrv", "--listen", grpcAddr, "--remoting-listen", remoting), filepath.Join(dir, "namesrv.log"))
	if err != nil {
		return nil, err
	}
	p.grpc = grpcAddr
	for deadline := time.Now().Add(20 * time.Second); ; {
		if c, err := net.Dial("tcp", grpcAddr); err == nil {
			c.Close()
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, errors.New("the nameserver did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func startBroker(ctx context.Context, bin, dir, namesrv, env string) (*proc, error) {
	addrs, err := benchproc.FreeAddrs(3)
	if err != nil {
		return nil, err
	}
	grpcAddr, remoting, httpAddr := addrs[0], addrs[1], addrs[2]
	_, port, _ := net.SplitHostPort(remoting)
	conf := filepath.Join(dir, "broker.conf")
	text := fmt.Sprintf(`namesrvAddr=%s
bindAddress=127.0.0.1
listenPort=%s
grpcListenAddr=%s
httpListenAddr=%s
storePathRootDir=%s
pprofEnable=true
mappedFileSizeCommitLog=67108864
maxHashSlotNum=100000
maxIndexNum=400000
`, namesrv, port, grpcAddr, httpAddr, filepath.Join(dir, "store"))
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "broker", "-c", conf)
	cmd.Env = os.Environ()
	if env != "" {
		cmd.Env = append(cmd.Env, strings.Split(env, ",")...)
	}
	p, err := startProc(cmd, filepath.Join(dir, "broker.log"))
	if err != nil {
		return nil, err
	}
	p.grpc, p.http = grpcAddr, httpAddr
	for deadline := time.Now().Add(60 * time.Second); ; {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, errors.New("the broker did not become ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
