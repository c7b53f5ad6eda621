// Command scale measures what a Gantry broker's size costs it: how long
// topics take to create and their first messages to become readable,
// how long a clean and a kill -9 restart take to /readyz, and the disk,
// memory and file descriptors its queues take; and, in -mode newtopics,
// what producing into many new topics at once does to another topic's
// end-to-end latency. It starts `gantry dev` processes built from this
// repository, on a store in a temporary directory, and drives them with
// Gantry's Go client over loopback. It is a measuring program, not a test.
//
//	cd test/bench && go run ./scale [-topics 50,500,1250] [-queues 8] [-msgs 2]
//	cd test/bench && go run ./scale -mode newtopics [-new-topics 1000] [-rate 200] [-baseline 20s]
//
// Topics are created with the admin API over gRPC (client.Admin.CreateTopic
// to the broker's address, -concurrency calls at a time), or with -create
// auto by sending to them (the dev broker creates a topic on first use, as
// RocketMQ's autoCreateTopicEnable). docs/BENCHMARKS.md has the figures and
// what each column means.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	mode        string
	topics      []int
	queues      int
	msgs        int
	size        int
	create      string // admin or auto
	concurrency int
	dir         string
	keep        bool
	gantry      string
	diskFrac    float64
	readyWait   time.Duration
	stopWait    time.Duration

	// -mode newtopics
	newTopics int
	rate      int
	baseline  time.Duration
	after     time.Duration
}

func main() {
	var cfg config
	topics := flag.String("topics", "50,500,1250", "-mode scale: topic counts to measure, comma-separated, each on a fresh store")
	flag.StringVar(&cfg.mode, "mode", "scale", "scale (topics x queues: create, restarts, disk, memory) or newtopics (another topic's latency while many new topics are produced into)")
	flag.IntVar(&cfg.queues, "queues", 8, "queues per topic (read and write)")
	flag.IntVar(&cfg.msgs, "msgs", 2, "messages sent into each queue of each new topic")
	flag.IntVar(&cfg.size, "size", 128, "message body bytes")
	flag.StringVar(&cfg.create, "create", "admin", "-mode newtopics: how the new topics are created: admin (Admin.CreateTopic over gRPC, then sends) or auto (sends only; the broker creates a topic on first use, autoCreateTopicEnable), or existing (the control: the topics are created and every queue written and its file made before the baseline, so the burst sends the same messages into queues that exist). -mode scale always uses admin")
	flag.IntVar(&cfg.concurrency, "concurrency", 16, "admin calls at a time; sends in flight are 16 times this")
	flag.StringVar(&cfg.dir, "dir", "", "where the temporary data directory is made (default: the current directory, whose disk is measured)")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the data directory and the brokers' logs at the end")
	flag.StringVar(&cfg.gantry, "gantry", "", "gantry binary to run (default: built from this repository into the data directory)")
	flag.Float64Var(&cfg.diskFrac, "disk-fraction", 0.7, "skip a run whose estimated disk use exceeds this fraction of the free space")
	flag.DurationVar(&cfg.readyWait, "ready-timeout", 15*time.Minute, "how long a start may take to /readyz 200 before the run fails")
	flag.DurationVar(&cfg.stopWait, "stop-timeout", 2*time.Minute, "how long a clean stop may take before the broker is killed (and the run fails)")
	flag.IntVar(&cfg.newTopics, "new-topics", 1000, "-mode newtopics: topics produced into at once")
	flag.IntVar(&cfg.rate, "rate", 200, "-mode newtopics: the steady topic's messages a second, one message per send")
	flag.DurationVar(&cfg.baseline, "baseline", 20*time.Second, "-mode newtopics: how long the steady topic's baseline is measured")
	flag.DurationVar(&cfg.after, "after", 10*time.Second, "-mode newtopics: how long it is measured after the new topics' messages are all readable")
	flag.Parse()
	// The brokers are started from this goroutine, and Pdeathsig (which
	// kills them if this process dies) fires when the thread that started
	// them exits: keep that thread for the whole run.
	runtime.LockOSThread()
	if err := cfg.parse(*topics); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
	// Ctrl-C or SIGTERM cancels the run: the brokers it started are stopped
	// cleanly and the data directory removed on the way out. A second one
	// kills the brokers instead of waiting for their clean stop.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "scale: interrupted: stopping the broker and removing the data (interrupt again to kill the broker)")
		cancel()
		<-sigs
		close(hurry)
	}()
	var err error
	switch cfg.mode {
	case "scale":
		err = runScale(ctx, cfg)
	case "newtopics":
		err = runNewTopics(ctx, cfg)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "scale: interrupted")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func (c *config) parse(topics string) error {
	if c.mode != "scale" && c.mode != "newtopics" {
		return fmt.Errorf("-mode %q: want scale or newtopics", c.mode)
	}
	if c.create != "admin" && c.create != "auto" && c.create != "existing" {
		return fmt.Errorf("-create %q: want admin, auto or existing", c.create)
	}
	if c.create != "admin" && c.mode == "scale" {
		// The broker makes an auto-created topic 8 queues, and the producer
		// spreads its first sends over 4 (RocketMQ's defaultTopicQueueNums):
		// not every queue would hold -msgs messages.
		return fmt.Errorf("-create %s is for -mode newtopics; -mode scale creates its topics with the admin API", c.create)
	}
	for _, f := range strings.Split(topics, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 100_000 {
			return fmt.Errorf("-topics %q: want comma-separated counts from 1 to 100000", topics)
		}
		c.topics = append(c.topics, n)
	}
	checks := []struct {
		name   string
		v, min int
	}{
		{"-queues", c.queues, 1}, {"-msgs", c.msgs, 1}, {"-size", c.size, 16}, {"-concurrency", c.concurrency, 1},
		{"-new-topics", c.newTopics, 1}, {"-rate", c.rate, 1},
	}
	for _, ch := range checks {
		if ch.v < ch.min {
			return fmt.Errorf("%s %d: want at least %d", ch.name, ch.v, ch.min)
		}
	}
	if c.queues > 1024 {
		return fmt.Errorf("-queues %d: want at most 1024", c.queues)
	}
	if c.size > 1<<20 {
		return fmt.Errorf("-size %d: want at most 1 MiB", c.size)
	}
	if c.rate > 10_000 {
		return fmt.Errorf("-rate %d: want at most 10000", c.rate)
	}
	if c.diskFrac <= 0 || c.diskFrac > 1 {
		return fmt.Errorf("-disk-fraction %g: want more than 0, at most 1", c.diskFrac)
	}
	if c.baseline < time.Second || c.after < 0 || c.readyWait <= 0 || c.stopWait <= 0 {
		return errors.New("-baseline wants at least 1s; -after, -ready-timeout and -stop-timeout must not be negative")
	}
	return nil
}
