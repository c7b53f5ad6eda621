package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/client"
)

// sample is one steady message: when it was due to be sent (the time in
// its body) and how long after that the consumer had it.
type sample struct {
	sent    time.Time
	latency time.Duration
}

// samples collects the consumer's samples.
type samples struct {
	mu  sync.Mutex
	all []sample
	got atomic.Int64
}

func (s *samples) add(x sample) {
	s.mu.Lock()
	s.all = append(s.all, x)
	s.mu.Unlock()
	s.got.Add(1)
}

// phase returns the latencies of the messages due in [from, to), sorted.
func (s *samples) phase(from, to time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ls []time.Duration
	for _, x := range s.all {
		if !x.sent.Before(from) && x.sent.Before(to) {
			ls = append(ls, x.latency)
		}
	}
	slices.Sort(ls)
	return ls
}

// since returns the latencies of the messages received after the first n.
func (s *samples) since(n int) ([]time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ls []time.Duration
	for _, x := range s.all[min(n, len(s.all)):] {
		ls = append(ls, x.latency)
	}
	slices.Sort(ls)
	return ls, len(s.all)
}

// quantile of sorted latencies (nearest rank), 0 for none.
func quantile(ls []time.Duration, q float64) time.Duration {
	if len(ls) == 0 {
		return 0
	}
	i := int(q*float64(len(ls))+0.5) - 1
	return ls[min(max(i, 0), len(ls)-1)]
}

type phaseStats struct {
	name          string
	n             int
	p50, p99, max time.Duration
}

func statsOf(name string, ls []time.Duration) phaseStats {
	st := phaseStats{name: name, n: len(ls), p50: quantile(ls, 0.5), p99: quantile(ls, 0.99)}
	if len(ls) > 0 {
		st.max = ls[len(ls)-1]
	}
	return st
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

// runNewTopics measures a steady topic's end-to-end latency before, while
// and after many new topics are produced into at once.
func runNewTopics(ctx context.Context, cfg config) error {
	work, bin, cleanup, err := workspace(ctx, cfg)
	if err != nil {
		return err
	}
	defer cleanup()
	describe(work, bin)
	queues := (cfg.newTopics + 1) * cfg.queues
	if why, err := roomFor(work, defaultEstimate.bytes(queues), cfg.diskFrac); err != nil {
		return err
	} else if why != "" {
		return fmt.Errorf("%d new topics (%d queues): %s", cfg.newTopics, queues, why)
	}
	fmt.Printf("newtopics: steady topic of %d queues at %d messages/s, one message a send, %d-byte bodies; then %d new topics x %d queues, %d messages into each queue, created by %s\n",
		cfg.queues, cfg.rate, cfg.size, cfg.newTopics, cfg.queues, cfg.msgs, cfg.create)

	b, err := newBroker(bin, filepath.Join(work, "store"), filepath.Join(work, "gantry.log"))
	if err != nil {
		return err
	}
	defer b.close()
	if err := b.start(); err != nil {
		return err
	}
	if _, err := b.waitReady(ctx, cfg.readyWait); err != nil {
		return err
	}
	const steadyPrefix = "Steady"
	if err := createTopics(ctx, b, steadyPrefix, 1, cfg.queues, 1); err != nil {
		return err
	}
	st, err := startSteady(ctx, cfg, b.ns, topicName(steadyPrefix, 0))
	if err != nil {
		return err
	}
	defer st.close()

	// Warm up: the first message through, then 2 s more.
	warm := time.Now()
	for st.s.got.Load() == 0 {
		if time.Since(warm) > time.Minute {
			return errors.New("steady topic: nothing consumed in a minute")
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	if err := sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	const prefix = "Burst"
	if cfg.create == "existing" {
		if err := prepareExisting(ctx, b, prefix, cfg); err != nil {
			return err
		}
	}
	fmt.Printf("== baseline, %v\n", cfg.baseline)
	t0 := time.Now()
	if err := sleep(ctx, cfg.baseline); err != nil {
		return err
	}
	fmt.Printf("== producing into %d new topics\n", cfg.newTopics)
	t1 := time.Now()
	bu, err := produceNewTopics(ctx, b, prefix, cfg)
	if err != nil {
		return err
	}
	t2 := time.Now()
	fmt.Printf("  sent %d messages in %s%s; all readable %s after the first topic's creation\n", cfg.newTopics*cfg.queues*cfg.msgs, secs(bu.sendTook), bu.failures, secs(t2.Sub(t1)))
	fmt.Printf("== after, %v\n", cfg.after)
	if err := sleep(ctx, cfg.after); err != nil {
		return err
	}
	t3 := time.Now()
	st.stopSender()
	// Every acknowledged steady message is consumed, or the run says how
	// many were not.
	drain := time.Now()
	for st.s.got.Load() < st.acked.Load() && time.Since(drain) < 30*time.Second {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	st.stopMonitor()

	fmt.Println()
	// A busy machine delays the sender's ticks (a late tick is dropped),
	// so the rate achieved is printed beside the one asked for.
	fmt.Printf("steady topic: %d sent (%.0f/s of %d/s asked), %d acknowledged, %d failed, %d consumed",
		st.sent.Load(), float64(st.sent.Load())/t3.Sub(warm).Seconds(), cfg.rate, st.acked.Load(), st.failed.Load(), st.s.got.Load())
	if e := st.lastErr.Load(); e != nil {
		fmt.Printf(" (last failure: %v)", *e)
	}
	fmt.Println()
	fmt.Printf("new topics: %d x %d queues, created in %s (%s), %d messages sent in %s%s, all readable %s after the start\n",
		cfg.newTopics, cfg.queues, secs(bu.create), cfg.create, cfg.newTopics*cfg.queues*cfg.msgs, secs(bu.sendTook), bu.failures, secs(t2.Sub(t1)))
	printPhases(&st.s, []time.Time{t0, t1, t2, t3})
	if n := st.acked.Load() - st.s.got.Load(); n > 0 {
		return fmt.Errorf("steady topic: %d acknowledged messages not consumed within 30 s", n)
	}
	return nil
}

// printPhases prints the steady topic's latencies in the baseline, while
// producing into the new topics and after, the periods between the four
// times given, and the ratio of the second p99 to the first.
func printPhases(s *samples, at []time.Time) {
	phases := []phaseStats{
		statsOf("baseline", s.phase(at[0], at[1])),
		statsOf("new topics", s.phase(at[1], at[2])),
		statsOf("after", s.phase(at[2], at[3])),
	}
	fmt.Println("| steady topic, end to end | period | messages | p50 | p99 | max |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for i, ph := range phases {
		fmt.Printf("| %s | %s | %d | %s | %s | %s |\n", ph.name, secs(at[i+1].Sub(at[i])), ph.n, ms(ph.p50), ms(ph.p99), ms(ph.max))
	}
	if phases[0].p99 > 0 {
		fmt.Printf("p99 while producing into the new topics / baseline p99: %.2fx (goal <= 2x)\n", float64(phases[1].p99)/float64(phases[0].p99))
	}
}

// burstResult is what producing into the new topics took.
type burstResult struct {
	create, sendTook time.Duration // creating the topics (create=admin), sending
	failures         string        // "" or how many sends failed, and the first error
}

// produceNewTopics creates the new topics when cfg.create is "admin",
// sends cfg.msgs messages into each of their queues and waits until the
// broker has dispatched them all.
func produceNewTopics(ctx context.Context, b *broker, prefix string, cfg config) (burstResult, error) {
	var r burstResult
	start := time.Now()
	if cfg.create == "admin" {
		if err := createTopics(ctx, b, prefix, cfg.newTopics, cfg.queues, cfg.concurrency); err != nil {
			return r, err
		}
		r.create = time.Since(start)
		fmt.Printf("  created %d topics in %s\n", cfg.newTopics, secs(r.create))
	}
	p, err := newProducer(ctx, b)
	if err != nil {
		return r, err
	}
	sendStart := time.Now()
	// Auto-created topics get the broker's default queue count, and the
	// producer spreads its first sends over 4 of them (as RocketMQ's
	// defaultTopicQueueNums): the sends are not held to a queue.
	// A failed send (a timeout, say) is a result here: counted, printed,
	// and the run goes on.
	failedNew, err := sendToQueues(ctx, p, prefix, cfg.newTopics, cfg.queues,
		sendOpts{msgs: cfg.msgs, size: cfg.size, inflight: 16 * cfg.concurrency, strict: cfg.create != "auto", tolerate: true})
	r.sendTook = time.Since(sendStart)
	p.Close(context.Background())
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	if failedNew > 0 {
		r.failures = fmt.Sprintf(", %d of them failed (the first: %v)", failedNew, err)
	}
	return r, b.waitDispatched(ctx, cfg.readyWait)
}

// steadyLoad is the steady topic's traffic: a push consumer recording
// each message's latency, a sender at cfg.rate and a monitor line every
// 2 s.
type steadyLoad struct {
	s                   samples
	sent, acked, failed atomic.Int64
	lastErr             atomic.Pointer[error]

	pc          *client.PushConsumer
	sp          *client.Producer
	stopSender  func() // stops the sender and waits for its sends' answers
	stopMonitor func()
}

// startSteady starts the consumer of topic, its sender and the monitor.
func startSteady(ctx context.Context, cfg config, nameServer, topic string) (_ *steadyLoad, err error) {
	st := &steadyLoad{stopSender: func() {}, stopMonitor: func() {}}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	ccfg := client.Config{NameServers: []string{nameServer}}
	handler := func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		now := time.Now()
		for _, m := range msgs {
			if len(m.Body) >= 8 {
				sent := time.Unix(0, int64(binary.BigEndian.Uint64(m.Body)))
				st.s.add(sample{sent: sent, latency: now.Sub(sent)})
			}
		}
		return client.ConsumeSuccess
	}
	pc, err := client.NewPushConsumer(ctx, ccfg, "ScaleSteady", handler, client.WithConsumeFrom(client.ConsumeFromFirstOffset))
	if err != nil {
		return nil, fmt.Errorf("push consumer: %w", err)
	}
	if err := pc.Subscribe(topic, "*"); err != nil {
		return nil, fmt.Errorf("push consumer: %w", err)
	}
	if err := pc.Start(ctx); err != nil {
		return nil, fmt.Errorf("push consumer: %w", err)
	}
	st.pc = pc
	if st.sp, err = client.NewProducer(ctx, ccfg); err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	st.startSender(ctx, cfg, topic)
	st.startMonitor(ctx)
	return st, nil
}

// startSender sends one message a send, due every 1/rate s, each stamped
// with the time it was due, whether or not the previous one was
// acknowledged (a stall delays the messages due during it too).
func (st *steadyLoad) startSender(ctx context.Context, cfg config, topic string) {
	sendCtx, stopSending := context.WithCancel(ctx)
	var senders sync.WaitGroup
	senders.Go(func() {
		t := time.NewTicker(time.Second / time.Duration(cfg.rate))
		defer t.Stop()
		for {
			select {
			case <-sendCtx.Done():
				return
			case due := <-t.C:
				body := make([]byte, cfg.size)
				binary.BigEndian.PutUint64(body, uint64(due.UnixNano()))
				st.sent.Add(1)
				senders.Add(1)
				st.sp.SendAsync(ctx, &client.Message{Topic: topic, Body: body}, func(_ *client.Message, _ client.SendResult, err error) {
					defer senders.Done()
					if err != nil {
						st.failed.Add(1)
						st.lastErr.Store(&err)
						return
					}
					st.acked.Add(1)
				})
			}
		}
	})
	st.stopSender = sync.OnceFunc(func() { stopSending(); senders.Wait() })
}

// startMonitor prints a line every 2 s: the steady topic's recent p99.
func (st *steadyLoad) startMonitor(ctx context.Context) {
	monCtx, stopMon := context.WithCancel(ctx)
	var mon sync.WaitGroup
	mon.Go(func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		seen := 0
		for {
			select {
			case <-monCtx.Done():
				return
			case <-t.C:
				var ls []time.Duration
				ls, seen = st.s.since(seen)
				if len(ls) == 0 {
					fmt.Printf("    steady: %d received, none in the last 2s; %d send failures\n", st.s.got.Load(), st.failed.Load())
					continue
				}
				fmt.Printf("    steady: %d received, last 2s p50 %s p99 %s max %s; %d send failures\n",
					st.s.got.Load(), ms(quantile(ls, 0.5)), ms(quantile(ls, 0.99)), ms(quantile(ls, 1)), st.failed.Load())
			}
		}
	})
	st.stopMonitor = func() { stopMon(); mon.Wait() }
}

// close stops the monitor and the sender, then closes the producer and
// shuts the consumer down.
func (st *steadyLoad) close() {
	st.stopMonitor()
	st.stopSender()
	if st.sp != nil {
		st.sp.Close(context.Background())
	}
	if st.pc != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = st.pc.Shutdown(sctx)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// prepareExisting creates the burst's topics, writes one message into
// each queue and waits until every queue has its file: the control run,
// whose burst sends into queues that exist already.
func prepareExisting(ctx context.Context, b *broker, prefix string, cfg config) error {
	fmt.Printf("== control: creating the %d topics and a file for each of their queues before the baseline\n", cfg.newTopics)
	if err := createTopics(ctx, b, prefix, cfg.newTopics, cfg.queues, cfg.concurrency); err != nil {
		return err
	}
	p, err := newProducer(ctx, b)
	if err != nil {
		return err
	}
	_, err = sendToQueues(ctx, p, prefix, cfg.newTopics, cfg.queues,
		sendOpts{msgs: 1, size: cfg.size, inflight: 16 * cfg.concurrency, strict: true})
	p.Close(context.Background())
	if err != nil {
		return err
	}
	if err := b.waitDispatched(ctx, cfg.readyWait); err != nil {
		return err
	}
	want := (cfg.newTopics + 1) * cfg.queues
	start := time.Now()
	for {
		d, err := measureDisk(filepath.Join(b.dir, "store"))
		if err != nil {
			return err
		}
		if d.cqFiles >= want {
			fmt.Printf("  %d queue files after %s\n", d.cqFiles, secs(time.Since(start)))
			break
		}
		if time.Since(start) > cfg.readyWait {
			return fmt.Errorf("control: %d of %d queue files after %s", d.cqFiles, want, secs(time.Since(start)))
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	return sleep(ctx, 5*time.Second) // the flush after the creations
}
