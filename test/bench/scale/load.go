package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/client"
)

// diskUse is the disk a store takes, by part.
type diskUse struct {
	cq, index, commitlog, total int64
	cqFiles                     int
}

// measureDisk sums the allocated blocks of the files under the store
// (DIR/store of `gantry dev --dir DIR`).
func measureDisk(store string) (diskUse, error) {
	var d diskUse
	err := filepath.WalkDir(store, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		n := diskBytes(fi)
		d.total += n
		rel, _ := filepath.Rel(store, path)
		switch top, _, _ := cutPath(rel); top {
		case "consumequeue":
			d.cq += n
			d.cqFiles++
		case "index":
			d.index += n
		case "commitlog":
			d.commitlog += n
		}
		return nil
	})
	if err != nil {
		return d, fmt.Errorf("disk use of %s: %w", store, err)
	}
	return d, nil
}

func cutPath(p string) (string, string, bool) {
	for i := 0; i < len(p); i++ {
		if os.IsPathSeparator(p[i]) {
			return p[:i], p[i+1:], true
		}
	}
	return p, "", false
}

// topicName is the i-th topic of a run.
func topicName(prefix string, i int) string { return fmt.Sprintf("%s%05d", prefix, i) }

// createTopics creates topics prefix00000... with queues queues each on the
// broker at addr (gRPC), conc calls at a time, printing progress.
func createTopics(ctx context.Context, b *broker, prefix string, n, queues, conc int) error {
	adm, err := client.NewAdmin(ctx, client.Config{NameServers: []string{b.ns}})
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	defer adm.Close()
	var done atomic.Int64
	stop := progress("created", &done, int64(n), "topics")
	defer stop()
	return parallel(ctx, n, conc, func(ctx context.Context, i int) error {
		err := adm.CreateTopic(ctx, client.TopicConfig{Name: topicName(prefix, i),
			ReadQueueNums: int32(queues), WriteQueueNums: int32(queues)}, b.br)
		if err != nil {
			return fmt.Errorf("create topic %s: %w", topicName(prefix, i), err)
		}
		done.Add(1)
		return nil
	})
}

// parallel calls f for 0..n-1, conc at a time, and returns the first error
// (the others are not started once one failed).
func parallel(ctx context.Context, n, conc int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(conc, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// queueKey is the ShardingKey that byQueueID sends to a queue id.
func queueKey(id int) string { return strconv.Itoa(id) }

// byQueueID sends a message to the queue whose id its ShardingKey holds.
var byQueueID = client.SelectorFunc(func(_ string, qs []client.Queue, m *client.Message) client.Queue {
	id, _ := strconv.Atoi(m.ShardingKey)
	for _, q := range qs {
		if int(q.ID) == id {
			return q
		}
	}
	return qs[id%len(qs)]
})

// newProducer is a producer to b that sends to the queue a message's
// ShardingKey names (queueKey).
func newProducer(ctx context.Context, b *broker) (*client.Producer, error) {
	p, err := client.NewProducer(ctx, client.Config{NameServers: []string{b.ns}}, client.WithQueueSelector(byQueueID))
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	return p, nil
}

// sendOpts says how sendToQueues holds its sends.
type sendOpts struct {
	msgs, size, inflight int
	// strict fails a message stored in another queue than its own.
	strict bool
	// tolerate counts failed sends and goes on, instead of stopping at
	// the first.
	tolerate bool
}

// sendToQueues sends o.msgs messages of o.size bytes into each of the
// queues of topics prefix00000..prefix(n-1), at most o.inflight at a time,
// and waits for every acknowledgement. It returns how many sends failed
// and the first failure: unless o.tolerate, it stops sending at that one.
func sendToQueues(ctx context.Context, p *client.Producer, prefix string, n, queues int, o sendOpts) (int64, error) {
	total := int64(n) * int64(queues) * int64(o.msgs)
	var acked, failed atomic.Int64
	stop := progress("acknowledged", &acked, total, "messages")
	defer stop()
	sem := make(chan struct{}, o.inflight)
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	body := make([]byte, o.size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	done := func() (int64, error) {
		wg.Wait()
		if e := first.Load(); e != nil {
			return failed.Load(), *e
		}
		return 0, nil
	}
	for m := range o.msgs {
		for t := range n {
			for q := range queues {
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					wg.Wait()
					return failed.Load(), ctx.Err()
				}
				if !o.tolerate && first.Load() != nil {
					<-sem
					return done()
				}
				wg.Add(1)
				topic := topicName(prefix, t)
				p.SendAsync(ctx, &client.Message{Topic: topic, Body: body, ShardingKey: queueKey(q)}, func(_ *client.Message, r client.SendResult, err error) {
					defer wg.Done()
					defer func() { <-sem }()
					if err == nil && o.strict && int(r.QueueID) != q {
						err = fmt.Errorf("stored in queue %d, not %d", r.QueueID, q)
					}
					if err != nil {
						err = fmt.Errorf("send %d to %s queue %d: %w", m, topic, q, err)
						first.CompareAndSwap(nil, &err)
						failed.Add(1)
						return
					}
					acked.Add(1)
				})
			}
		}
	}
	return done()
}

// progress prints done of total every 2 s until the returned func is
// called.
func progress(verb string, done *atomic.Int64, total int64, what string) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				fmt.Printf("    %6.0fs  %s %d of %d %s\n", time.Since(start).Seconds(), verb, done.Load(), total, what)
			}
		}
	})
	return func() { close(stop); wg.Wait() }
}

// checkTopic asks the broker for topic's queues and checks each holds want
// messages.
func checkTopic(ctx context.Context, b *broker, topic string, queues int, want int64) error {
	adm, err := client.NewAdmin(ctx, client.Config{NameServers: []string{b.ns}})
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	defer adm.Close()
	qs, err := adm.TopicStatus(ctx, topic)
	if err != nil {
		return fmt.Errorf("topic status of %s: %w", topic, err)
	}
	if len(qs) != queues {
		return fmt.Errorf("topic %s has %d queues, want %d", topic, len(qs), queues)
	}
	for _, q := range qs {
		if n := q.MaxOffset - q.MinOffset; n != want {
			return fmt.Errorf("topic %s queue %d holds %d messages, want %d", topic, q.Queue.ID, n, want)
		}
	}
	return nil
}

// mib formats bytes in MiB (GiB from 10 GiB).
func mib(n int64) string {
	if n >= 10<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// kib formats bytes in KiB.
func kib(n int64) string { return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10)) }

// secs formats a duration in seconds, to the millisecond.
func secs(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }
