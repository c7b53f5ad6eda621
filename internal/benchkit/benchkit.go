// Package benchkit is the load generator behind `gantry bench` and the
// peer benchmark in test/bench: a produce loop with a window of messages
// in flight, a consume loop, latency histograms, progress lines, and
// message bodies that carry their own identity so that a consumer can say
// whether anything was lost or duplicated.
package benchkit

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/internal/histogram"
)

// Body layout: magic, run id, sequence number, run size (0 when the run is
// bounded by time), padding to the message size.
const (
	magic      = "GNTB"
	headerSize = 4 + 8 + 8 + 8
)

// RunID identifies one produce run.
type RunID [8]byte

func (r RunID) String() string { return hex.EncodeToString(r[:]) }

// NewRunID returns a random run id.
func NewRunID() RunID {
	var r RunID
	_, _ = rand.Read(r[:])
	return r
}

// Body returns message seq of a run of total messages (0: unbounded), size
// bytes long (at least the header).
func Body(run RunID, seq, total int64, size int) []byte {
	return fillBody(make([]byte, bodyLen(size)), run, seq, total)
}

// bodyLen is the length of a Body asked to be size bytes long.
func bodyLen(size int) int { return max(size, headerSize) }

// fillBody writes the header of Body into b, a buffer of Body's length
// whose other bytes are zero, and returns it.
func fillBody(b []byte, run RunID, seq, total int64) []byte {
	copy(b, magic)
	copy(b[4:], run[:])
	binary.BigEndian.PutUint64(b[12:], uint64(seq))
	binary.BigEndian.PutUint64(b[20:], uint64(total))
	return b
}

// ParseBody reads a body Body made; ok is false for any other body.
func ParseBody(b []byte) (run RunID, seq, total int64, ok bool) {
	if len(b) < headerSize || string(b[:4]) != magic {
		return run, 0, 0, false
	}
	copy(run[:], b[4:12])
	return run, int64(binary.BigEndian.Uint64(b[12:])), int64(binary.BigEndian.Uint64(b[20:])), true
}

// Result is what a run measured.
type Result struct {
	Op      string // "produce" or "consume"
	Msgs    int64  // messages acknowledged (produce) or received (consume)
	Bytes   int64
	Errors  int64
	Elapsed time.Duration
	Latency *histogram.Histogram // per message: send to acknowledgement, or born to receipt
}

// MsgsPerSec returns the message rate (0 for a run that took no time).
func (r Result) MsgsPerSec() float64 { return perSec(float64(r.Msgs), r.Elapsed) }

// perSec is n per second over d, 0 when d is not positive (not NaN).
func perSec(n float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return n / d.Seconds()
}

// String is the summary line.
func (r Result) String() string {
	s := fmt.Sprintf("%s: %d msgs in %.2fs = %.0f msgs/s, %.1f MB/s, %d errors",
		r.Op, r.Msgs, r.Elapsed.Seconds(), r.MsgsPerSec(), perSec(float64(r.Bytes), r.Elapsed)/1e6, r.Errors)
	if h := r.Latency; h != nil && h.Count() > 0 {
		s += fmt.Sprintf("; latency p50 %v p99 %v p999 %v max %v", round(h.Quantile(0.5)), round(h.Quantile(0.99)), round(h.Quantile(0.999)), round(h.Max()))
	}
	return s
}

func round(d time.Duration) time.Duration {
	switch {
	case d > 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d > 100*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d
}

// AsyncSender sends one message and calls done exactly once with the
// outcome. It must not block for long (the window bounds what is in flight).
type AsyncSender func(ctx context.Context, body []byte, done func(error))

// ProduceConfig configures Produce.
type ProduceConfig struct {
	Count    int64         // messages to send; 0 with Duration
	Duration time.Duration // how long to send when Count is 0
	Size     int           // body size in bytes
	Inflight int           // messages in flight at most
	Run      RunID
	Progress io.Writer // a line a second; nil for none
	// Fatal, if set, says which send errors end the run at once: those no
	// later send can avoid (a topic that does not exist). Other failures
	// are counted and the run goes on.
	Fatal func(error) bool
}

// Produce sends bodies through send with at most Inflight in flight and
// measures each acknowledgement's latency.
func Produce(ctx context.Context, send AsyncSender, cfg ProduceConfig) (Result, error) {
	if cfg.Count <= 0 && cfg.Duration <= 0 {
		return Result{}, errors.New("benchkit: give a count or a duration")
	}
	if cfg.Inflight <= 0 {
		cfg.Inflight = 1
	}
	start := time.Now() // before the deadline: a run of Duration lasts at least that long
	if cfg.Duration > 0 && cfg.Count == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	ctx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	res := Result{Op: "produce", Latency: &histogram.Histogram{}}
	var acked, failed atomic.Int64
	var firstErr, fatal atomic.Pointer[error]
	// A slot of window is taken before each send and given back by its
	// callback, as its last step; taking every slot at the end waits for
	// the sends out. (A WaitGroup besides would cost a contended atomic add
	// a message: docs/decisions/0022-benchkit-produce-loop.md.)
	window := make(chan struct{}, cfg.Inflight)
	// A body's buffer is used again once its send is answered, as nats
	// bench and Kafka's producer-perf-test send one payload over and over:
	// the measure is the systems', not this loop's garbage (a body per
	// message: docs/decisions/0022-benchkit-produce-loop.md).
	free := make(chan []byte, cfg.Inflight)
	size := bodyLen(cfg.Size)
	stop := progress(cfg.Progress, "sent", &acked, &failed, cfg.Count)
	for seq := int64(0); cfg.Count == 0 || seq < cfg.Count; seq++ {
		took := false
		select {
		case window <- struct{}{}:
			took = true
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			if took { // both were ready: give the slot back unused
				<-window
			}
			break
		}
		var body []byte
		select {
		case body = <-free:
			body = fillBody(body, cfg.Run, seq, cfg.Count)
		default:
			body = Body(cfg.Run, seq, cfg.Count, cfg.Size)
		}
		t0 := time.Now()
		send(ctx, body, func(err error) {
			res.Latency.Record(time.Since(t0))
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, &err)
				if cfg.Fatal != nil && cfg.Fatal(err) && fatal.CompareAndSwap(nil, &err) {
					stopRun()
				}
			} else {
				acked.Add(1)
			}
			free <- body // never blocks: at most Inflight bodies exist
			<-window
		})
	}
	for range cfg.Inflight {
		window <- struct{}{}
	}
	res.Elapsed = time.Since(start)
	stop()
	res.Msgs, res.Errors = acked.Load(), failed.Load()
	res.Bytes = res.Msgs * int64(size)
	if p := fatal.Load(); p != nil {
		return res, fmt.Errorf("stopped at the first send that no retry can help: %w", *p)
	}
	if p := firstErr.Load(); p != nil {
		return res, fmt.Errorf("%d sends failed, the first: %w", res.Errors, *p)
	}
	return res, nil
}

// progress prints a line a second until the returned func is called.
func progress(w io.Writer, verb string, ok, failed *atomic.Int64, total int64) func() {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last, start := int64(0), time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				n := ok.Load()
				of := ""
				if total > 0 {
					of = fmt.Sprintf("/%d", total)
				}
				fmt.Fprintf(w, "%5.0fs  %s %d%s  %.0f msgs/s  errors %d\n", time.Since(start).Seconds(), verb, n, of, float64(n-last), failed.Load())
				last = n
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// Verifier counts received bodies per run: missing and duplicated
// sequence numbers of every run whose size is known.
type Verifier struct {
	mu      sync.Mutex
	runs    map[RunID]*runState
	foreign int64
}

type runState struct {
	total int64
	seen  []uint64 // bitmap
	count int64
	dups  int64
}

// Add records a received body.
func (v *Verifier) Add(body []byte) {
	run, seq, total, ok := ParseBody(body)
	v.mu.Lock()
	defer v.mu.Unlock()
	if !ok || seq < 0 || total < 0 || (total > 0 && seq >= total) {
		v.foreign++
		return
	}
	if v.runs == nil {
		v.runs = map[RunID]*runState{}
	}
	r := v.runs[run]
	if r == nil {
		r = &runState{total: total}
		v.runs[run] = r
	}
	w := int(seq / 64)
	for len(r.seen) <= w {
		r.seen = append(r.seen, 0)
	}
	if r.seen[w]&(1<<(seq%64)) != 0 {
		r.dups++
		return
	}
	r.seen[w] |= 1 << (seq % 64)
	r.count++
}

// Report describes every run seen: received, missing and duplicates. ok is
// false when a bounded run misses messages.
func (v *Verifier) Report() (lines []string, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	ok = true
	for id, r := range v.runs {
		if r.total == 0 {
			lines = append(lines, fmt.Sprintf("run %s: %d distinct messages, %d duplicates (run bounded by time: no expected count)", id, r.count, r.dups))
			continue
		}
		missing := r.total - r.count
		verdict := "none lost"
		if missing > 0 {
			verdict, ok = fmt.Sprintf("%d LOST", missing), false
		}
		lines = append(lines, fmt.Sprintf("run %s: %d/%d received, %s, %d duplicates", id, r.count, r.total, verdict, r.dups))
	}
	if v.foreign > 0 {
		lines = append(lines, fmt.Sprintf("%d messages not written by gantry bench", v.foreign))
	}
	return lines, ok
}

// Received returns the distinct messages of bounded runs plus those of
// unbounded ones.
func (v *Verifier) Received() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	var n int64
	for _, r := range v.runs {
		n += r.count
	}
	return n
}

// OneAtATime sends count bodies of size bytes through send, each after the
// previous one was acknowledged, and measures each send's latency.
func OneAtATime(ctx context.Context, send func(ctx context.Context, body []byte) error, count, size int) (Result, error) {
	run := NewRunID()
	res := Result{Op: "produce one at a time", Latency: &histogram.Histogram{}}
	start := time.Now()
	for i := range count {
		body := Body(run, int64(i), int64(count), size)
		t0 := time.Now()
		if err := send(ctx, body); err != nil {
			res.Elapsed = time.Since(start)
			return res, err
		}
		res.Latency.Record(time.Since(t0))
		res.Msgs++
		res.Bytes += int64(len(body))
	}
	res.Elapsed = time.Since(start)
	return res, nil
}
