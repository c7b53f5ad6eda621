package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/gantrymq/gantry/internal/benchkit"

	"github.com/gantrymq/gantry/test/bench/benchproc"
)

// scaleRow is one topic count's figures.
type scaleRow struct {
	topics, queues int
	skipped        string

	create, send, dispatched time.Duration // dispatched: from the first send until all are readable
	stop                     time.Duration
	stopNote                 string
	clean, kill9             time.Duration
	cleanCPU, kill9CPU       float64 // the broker's CPU seconds from its start to /readyz 200
	load                     string  // the machine's load average after the run
	disk                     diskUse
	loaded, restarted        procStats
}

// workspace makes the run's directory (removed by the returned func
// unless keep) and finds or builds the gantry binary.
func workspace(ctx context.Context, cfg config) (work, bin string, cleanup func(), err error) {
	parent := cfg.dir
	if parent == "" {
		parent = "."
	}
	work, err = os.MkdirTemp(parent, "scale-data-")
	if err != nil {
		return "", "", nil, fmt.Errorf("data directory: %w", err)
	}
	work, _ = filepath.Abs(work)
	cleanup = func() {
		if cfg.keep {
			fmt.Println("kept", work)
			return
		}
		if err := os.RemoveAll(work); err != nil {
			fmt.Fprintln(os.Stderr, "scale: remove the data directory:", err)
		}
	}
	bin = cfg.gantry
	if bin == "" {
		fmt.Println("building gantry ...")
		bin, err = benchproc.BuildGantry(ctx, work)
	} else if _, err = exec.LookPath(bin); err != nil {
		err = fmt.Errorf("-gantry %s: %w", bin, err)
	}
	if err != nil {
		cleanup()
		return "", "", nil, err
	}
	return work, bin, cleanup, nil
}

// describe prints what runs where.
func describe(work, bin string) {
	rev, _ := exec.Command("git", "-C", filepath.Join("..", ".."), "log", "-1", "--format=%h %cI %s").Output()
	free, _ := freeBytes(work)
	fmt.Printf("gantry %s (repository at %s)\ndata in %s (%s free), %d CPUs, load average %s, %s\n", bin, strings.TrimSpace(string(rev)), work, mib(free),
		runtime.NumCPU(), loadAvg(), time.Now().UTC().Format(time.RFC3339))
}

// estimate is what a run's store is expected to take, from the previous
// run's bytes per queue and the rest, or from the defaults (each
// consume-queue file at its full 6 MB, and two commit-log segments and an
// index file).
type estimate struct{ perQueue, fixed int64 }

func (e estimate) bytes(queues int) int64 { return e.fixed + e.perQueue*int64(queues) }

func (e *estimate) learn(d diskUse, queues int) {
	if queues > 0 {
		e.perQueue = d.cq / int64(queues)
		e.fixed = d.total - d.cq
	}
}

var defaultEstimate = estimate{perQueue: 6 << 20, fixed: 3 << 30}

// roomFor says why a store of want bytes does not fit, or "".
func roomFor(work string, want int64, frac float64) (string, error) {
	free, err := freeBytes(work)
	if err != nil {
		return "", err
	}
	if float64(want) > frac*float64(free) {
		return fmt.Sprintf("skipped: would take ~%s of disk, more than %.0f%% of the %s free", mib(want), 100*frac, mib(free)), nil
	}
	return "", nil
}

func runScale(ctx context.Context, cfg config) error {
	work, bin, cleanup, err := workspace(ctx, cfg)
	if err != nil {
		return err
	}
	defer cleanup()
	describe(work, bin)
	fmt.Printf("scale: topics %v x %d queues, %d messages of %d bytes into each queue, topics created by %s\n",
		cfg.topics, cfg.queues, cfg.msgs, cfg.size, cfg.create)
	est := defaultEstimate
	var rows []scaleRow
	for _, n := range cfg.topics {
		queues := n * cfg.queues
		why, err := roomFor(work, est.bytes(queues), cfg.diskFrac)
		if err != nil {
			return err
		}
		if why != "" {
			fmt.Printf("== %d topics (%d queues): %s\n", n, queues, why)
			rows = append(rows, scaleRow{topics: n, queues: queues, skipped: why})
			continue
		}
		fmt.Printf("== %d topics (%d queues)\n", n, queues)
		r, err := scaleOne(ctx, cfg, bin, work, n)
		if err != nil {
			return fmt.Errorf("%d topics: %w", n, err)
		}
		printScaleRow(r)
		rows = append(rows, r)
		est.learn(r.disk, queues)
	}
	fmt.Println()
	printScaleTable(rows)
	return nil
}

func scaleOne(ctx context.Context, cfg config, bin, work string, n int) (scaleRow, error) {
	r := scaleRow{topics: n, queues: n * cfg.queues}
	dir := filepath.Join(work, fmt.Sprintf("n%d", n))
	b, err := newBroker(bin, dir, filepath.Join(work, fmt.Sprintf("n%d.log", n)))
	if err != nil {
		return r, err
	}
	defer func() {
		b.close()
		if !cfg.keep {
			_ = os.RemoveAll(dir)
		}
	}()
	if err := b.start(); err != nil {
		return r, err
	}
	took, err := b.waitReady(ctx, cfg.readyWait)
	if err != nil {
		return r, err
	}
	fmt.Printf("  empty broker ready in %s\n", secs(took))

	const prefix = "Scale"
	if cfg.create == "admin" {
		start := time.Now()
		if err := createTopics(ctx, b, prefix, n, cfg.queues, cfg.concurrency); err != nil {
			return r, err
		}
		r.create = time.Since(start)
		fmt.Printf("  created %d topics in %s (admin CreateTopic, %d at a time)\n", n, secs(r.create), cfg.concurrency)
	}
	p, err := newProducer(ctx, b)
	if err != nil {
		return r, err
	}
	start := time.Now()
	_, err = sendToQueues(ctx, p, prefix, n, cfg.queues, sendOpts{msgs: cfg.msgs, size: cfg.size, inflight: 16 * cfg.concurrency, strict: true})
	r.send = time.Since(start)
	p.Close(context.Background())
	if err != nil {
		return r, err
	}
	if err := b.waitDispatched(ctx, cfg.readyWait); err != nil {
		return r, err
	}
	r.dispatched = time.Since(start)
	fmt.Printf("  sent %d messages in %s, all readable after %s\n", r.queues*cfg.msgs, secs(r.send), secs(r.dispatched))
	// check waits until the first and the last topic are routed and hold
	// their messages. /readyz answers 200 once the broker has started
	// registering, which may be before the nameserver routes its topics.
	check := func(when string) error {
		start := time.Now()
		for _, i := range []int{0, n - 1} {
			for {
				err := checkTopic(ctx, b, topicName(prefix, i), cfg.queues, int64(cfg.msgs))
				if err == nil {
					break
				}
				if time.Since(start) > time.Minute || ctx.Err() != nil {
					return fmt.Errorf("%s: %w", when, err)
				}
				if err := sleep(ctx, 10*time.Millisecond); err != nil {
					return err
				}
			}
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			fmt.Printf("  %s: topics routed and complete %s after /readyz\n", when, secs(d))
		}
		return nil
	}
	if err := check("after the sends"); err != nil {
		return r, err
	}
	if r.loaded, err = readProc(b.pid()); err != nil {
		return r, err
	}
	if r.disk, err = measureDisk(filepath.Join(dir, "store")); err != nil {
		return r, err
	}

	fmt.Println("  clean stop (SIGTERM) ...")
	r.stop, err = b.stop(cfg.stopWait)
	if err != nil {
		if errors.Is(err, errKilled) {
			return r, err
		}
		// It exited, but not cleanly (a shutdown past gantry dev's own
		// limit exits 3): note it, measure on.
		r.stopNote = firstLine(err)
		fmt.Println("  clean stop:", r.stopNote)
	}
	fmt.Printf("  stopped in %s; restarting ...\n", secs(r.stop))
	if err := b.start(); err != nil {
		return r, err
	}
	if r.clean, err = b.waitReady(ctx, cfg.readyWait); err != nil {
		return r, err
	}
	if r.cleanCPU, err = benchkit.ProcCPU(b.pid()); err != nil {
		return r, err
	}
	if err := check("after the clean restart"); err != nil {
		return r, err
	}
	if r.restarted, err = readProc(b.pid()); err != nil {
		return r, err
	}
	fmt.Printf("  clean restart to /readyz: %s; kill -9 and restart ...\n", secs(r.clean))
	if err := b.kill(); err != nil {
		return r, err
	}
	if err := b.start(); err != nil {
		return r, err
	}
	if r.kill9, err = b.waitReady(ctx, cfg.readyWait); err != nil {
		return r, err
	}
	if r.kill9CPU, err = benchkit.ProcCPU(b.pid()); err != nil {
		return r, err
	}
	if err := check("after the kill -9 restart"); err != nil {
		return r, err
	}
	fmt.Printf("  kill -9 restart to /readyz: %s\n", secs(r.kill9))
	r.load = loadAvg()
	return r, nil
}

func printScaleRow(r scaleRow) {
	note := ""
	if r.stopNote != "" {
		note = " (" + r.stopNote + ")"
	}
	fmt.Printf("ROW topics=%d queues=%d create=%s send=%s readable=%s stop=%s%s clean_restart=%s (cpu %.2fs, %.1f ms/queue) kill9_restart=%s (cpu %.2fs) "+
		"cq=%s (%d files, %s/queue) index=%s commitlog=%s store=%s "+
		"loaded: VmRSS=%s RssAnon=%s fds=%d; restarted: VmRSS=%s RssAnon=%s fds=%d; load average %s\n",
		r.topics, r.queues, secs(r.create), secs(r.send), secs(r.dispatched), secs(r.stop), note,
		secs(r.clean), r.cleanCPU, 1000*r.cleanCPU/float64(max(r.queues, 1)), secs(r.kill9), r.kill9CPU,
		mib(r.disk.cq), r.disk.cqFiles, kib(r.disk.cq/int64(max(r.queues, 1))), mib(r.disk.index), mib(r.disk.commitlog), mib(r.disk.total),
		mib(r.loaded.vmRSS), mib(r.loaded.rssAnon), r.loaded.fds, mib(r.restarted.vmRSS), mib(r.restarted.rssAnon), r.restarted.fds, r.load)
}

// printScaleTable prints the rows as a Markdown table.
func printScaleTable(rows []scaleRow) {
	fmt.Println("| topics | queues | create | send, readable | clean stop | clean restart to /readyz (broker CPU) | kill -9 restart to /readyz (broker CPU) | consume queues on disk | per queue | index on disk | VmRSS / RssAnon loaded | VmRSS / RssAnon restarted | open files loaded / restarted |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if r.skipped != "" {
			fmt.Printf("| %d | %d | %s |||||||||||\n", r.topics, r.queues, r.skipped)
			continue
		}
		stop := secs(r.stop)
		if r.stopNote != "" {
			stop += " (" + r.stopNote + ")"
		}
		fmt.Printf("| %d | %d | %s | %s, %s | %s | %s (%.2fs) | %s (%.2fs) | %s | %s | %s | %s / %s | %s / %s | %d / %d |\n",
			r.topics, r.queues, secs(r.create), secs(r.send), secs(r.dispatched), stop, secs(r.clean), r.cleanCPU, secs(r.kill9), r.kill9CPU,
			mib(r.disk.cq), kib(r.disk.cq/int64(max(r.queues, 1))), mib(r.disk.index),
			mib(r.loaded.vmRSS), mib(r.loaded.rssAnon), mib(r.restarted.vmRSS), mib(r.restarted.rssAnon),
			r.loaded.fds, r.restarted.fds)
	}
}

// loadAvg is the machine's 1, 5 and 15 minute load averages, or "?": the
// other work the figures shared the CPUs with.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
