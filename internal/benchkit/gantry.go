package benchkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/internal/histogram"
)

// GantrySender sends to topic through a Gantry producer.
func GantrySender(p *client.Producer, topic string) AsyncSender {
	return func(ctx context.Context, body []byte, done func(error)) {
		p.SendAsync(ctx, &client.Message{Topic: topic, Body: body}, func(_ *client.Message, _ client.SendResult, err error) { done(err) })
	}
}

// ConsumeConfig configures a consume run.
type ConsumeConfig struct {
	Count    int64         // stop after this many messages; 0: Duration or Idle
	Duration time.Duration // stop after this long; 0: no limit
	Idle     time.Duration // stop when nothing arrived for this long; default 3 s
	Batch    int           // messages per pull; default 256
	FromMin  bool          // start at each queue's min offset instead of the committed one
	Progress func(string)  // a line a second; nil for none
}

// ConsumeGantry pulls every queue of topic concurrently (one puller per
// queue, long polling), feeds each body to v and measures end-to-end latency
// (receipt minus the message's born time; milliseconds resolution). It
// commits the offsets it reached.
func ConsumeGantry(ctx context.Context, pc *client.PullConsumer, topic string, cfg ConsumeConfig, v *Verifier) (Result, error) {
	if cfg.Idle <= 0 {
		cfg.Idle = 3 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	qs, err := pc.Queues(ctx, topic)
	if err != nil {
		return Result{}, err
	}
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := Result{Op: "consume", Latency: &histogram.Histogram{}}
	var got, bytes, failed atomic.Int64
	var lastMsg atomic.Int64
	lastMsg.Store(time.Now().UnixNano())
	var errMu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	start := time.Now()
	for _, q := range qs {
		wg.Go(func() {
			// Each puller records into its own histogram, merged at the
			// end: one shared by every puller costs a contended cache
			// line per message.
			var lat histogram.Histogram
			defer res.Latency.Merge(&lat)
			off, ok, err := pc.CommittedOffset(ctx, q)
			if err == nil && (!ok || cfg.FromMin) {
				off, _, err = pc.QueueOffsets(ctx, q)
			}
			for err == nil && ctx.Err() == nil {
				var r client.PullResult
				r, err = pc.Pull(ctx, q, off, client.PullOptions{MaxMessages: cfg.Batch, Hold: time.Second})
				if err != nil {
					break
				}
				now := time.Now()
				for _, m := range r.Messages {
					v.Add(m.Body)
					lat.Record(now.Sub(m.BornTimestamp))
					bytes.Add(int64(len(m.Body)))
				}
				if len(r.Messages) > 0 {
					lastMsg.Store(now.UnixNano())
					if n := got.Add(int64(len(r.Messages))); cfg.Count > 0 && n >= cfg.Count {
						cancel()
					}
				}
				if r.Status == client.PullOffsetIllegal || len(r.Messages) > 0 || r.Status == client.PullNoMatchedMessage {
					off = r.NextOffset
				}
			}
			if err != nil && ctx.Err() == nil {
				failed.Add(1)
				errMu.Lock()
				errs = append(errs, fmt.Errorf("queue %v: %w", q, err))
				errMu.Unlock()
			}
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer ccancel()
			if cerr := pc.CommitOffset(cctx, q, off); cerr != nil {
				errMu.Lock()
				errs = append(errs, fmt.Errorf("commit %v: %w", q, cerr))
				errMu.Unlock()
			}
		})
	}
	// Progress and the idle stop.
	done := make(chan struct{})
	var pwg sync.WaitGroup
	pwg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := int64(0)
		for {
			select {
			case <-done:
				return
			case <-t.C:
				n := got.Load()
				if cfg.Progress != nil {
					of := ""
					if cfg.Count > 0 {
						of = fmt.Sprintf("/%d", cfg.Count)
					}
					cfg.Progress(fmt.Sprintf("%5.0fs  received %d%s  %.0f msgs/s", time.Since(start).Seconds(), n, of, float64(n-last)))
				}
				last = n
				if time.Since(time.Unix(0, lastMsg.Load())) > cfg.Idle {
					cancel()
				}
			}
		}
	})
	wg.Wait()
	res.Elapsed = time.Since(start)
	if idle := time.Since(time.Unix(0, lastMsg.Load())); cfg.Count == 0 || got.Load() < cfg.Count {
		res.Elapsed -= min(idle, res.Elapsed) // the wait for more that never came is not throughput
	}
	close(done)
	pwg.Wait()
	res.Msgs, res.Bytes, res.Errors = got.Load(), bytes.Load(), failed.Load()
	return res, errors.Join(errs...)
}

// PushConfig configures a push-consumer run.
type PushConfig struct {
	ConsumeConfig
	// PullBatch is the push consumer's pull batch size (default: the
	// client's, 256).
	PullBatch int
	// FailEvery > 0 makes the handler fail the first delivery of every
	// FailEvery-th message (by sequence number), which the consumer sends
	// back for a retry 10 s later: a retry storm. Only the other, healthy
	// messages are counted (Count is then the healthy messages to wait
	// for).
	FailEvery int64
}

// latencySample is how many push handler calls share one latency sample.
const latencySample = 8

// ConsumePush reads topic from each queue's first message with a push
// consumer of group (one member, concurrent consumption, a handler that
// only feeds v) until it has cfg.Count messages, cfg.Duration passed or
// nothing arrived for cfg.Idle. The group's offsets are committed at the
// end like any push consumer's. Result.Errors counts the consumer's
// failed pulls (which it retries); when there were some and messages are
// missing (or none came), the error says so with the last failure.
func ConsumePush(ctx context.Context, ccfg client.Config, group, topic string, cfg PushConfig, v *Verifier) (Result, error) {
	if cfg.Idle <= 0 {
		cfg.Idle = 3 * time.Second
	}
	res := Result{Op: "push consume", Latency: &histogram.Histogram{}}
	var got, bytes atomic.Int64
	var lastMsg atomic.Int64
	full := make(chan struct{})
	var once sync.Once
	var calls atomic.Int64
	h := func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		// The clock is read on one call in latencySample (a handler call
		// is usually one message; the pull side reads it once a pull).
		sampled := calls.Add(1)%latencySample == 0
		var now time.Time
		if sampled {
			now = time.Now()
		}
		if cfg.FailEvery > 0 {
			for _, m := range msgs {
				if _, seq, _, ok := ParseBody(m.Body); ok && seq%cfg.FailEvery == 0 {
					if m.ReconsumeTimes == 0 {
						return client.ConsumeRetryLater // sent back
					}
					return client.ConsumeSuccess // a retry: not counted
				}
			}
		}
		for _, m := range msgs {
			v.Add(m.Body)
			if sampled {
				res.Latency.Record(now.Sub(m.BornTimestamp))
			}
			bytes.Add(int64(len(m.Body)))
		}
		if sampled {
			lastMsg.Store(now.UnixNano())
		}
		if n := got.Add(int64(len(msgs))); cfg.Count > 0 && n >= cfg.Count {
			once.Do(func() { close(full) })
		}
		return client.ConsumeSuccess
	}
	opts := []client.PushConsumerOption{client.WithConsumeFrom(client.ConsumeFromFirstOffset), client.WithFetchHold(time.Second)}
	if cfg.PullBatch > 0 {
		opts = append(opts, client.WithFetchBatchSize(cfg.PullBatch))
	}
	pc, err := client.NewPushConsumer(ctx, ccfg, group, h, opts...)
	if err != nil {
		return res, err
	}
	if err := pc.Subscribe(topic, "*"); err != nil {
		return res, err
	}
	start := time.Now()
	lastMsg.Store(start.UnixNano())
	if err := pc.Start(ctx); err != nil {
		return res, err
	}
	var deadline <-chan time.Time
	if cfg.Duration > 0 {
		deadline = time.After(cfg.Duration)
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := int64(0)
	active := start
wait:
	for {
		select {
		case <-full:
			break wait
		case <-deadline:
			break wait
		case <-ctx.Done():
			break wait
		case now := <-t.C:
			n := got.Load()
			if cfg.Progress != nil {
				line := fmt.Sprintf("%5.0fs  received %d  %.0f msgs/s", time.Since(start).Seconds(), n, float64(n-last))
				if errs, lastErr := pc.PullErrors(); errs > 0 {
					line += fmt.Sprintf("  pull errors %d (last: %v)", errs, lastErr)
				}
				cfg.Progress(line)
			}
			if n != last { // messages came since the last tick, maybe none of them sampled
				active = now
			}
			last = n
			if time.Since(active) > cfg.Idle {
				break wait
			}
		}
	}
	res.Elapsed = time.Since(start)
	if idle := time.Since(time.Unix(0, lastMsg.Load())); cfg.Count == 0 || got.Load() < cfg.Count {
		res.Elapsed -= min(idle, res.Elapsed)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err = pc.Shutdown(sctx)
	res.Msgs, res.Bytes = got.Load(), bytes.Load()
	var lastErr error
	res.Errors, lastErr = pc.PullErrors()
	if res.Errors > 0 && (res.Msgs == 0 || res.Msgs < cfg.Count) {
		err = errors.Join(err, fmt.Errorf("%d pulls failed, the last: %w", res.Errors, lastErr))
	}
	return res, err
}
