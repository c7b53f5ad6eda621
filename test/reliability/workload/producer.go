package workload

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/test/reliability/history"
)

// ProducerSpec configures a producer worker.
type ProducerSpec struct {
	// Worker prefixes the ids ("p0" sends p0-000000, p0-000001, ...); it
	// must be unique in the run, across restarts of the worker.
	Worker      string
	NameServers []string
	Topic       string
	// History is the file the worker appends its events to.
	History string
	// Concurrency is how many sends are in flight in each round. Default 8.
	Concurrency int
	// Count stops the worker after this many ids; 0 runs until ctx ends.
	Count int
	// Rate caps the sends per second; 0 is no cap.
	Rate int
	// SendTimeout is the client's per-attempt timeout. Default 3 s.
	SendTimeout time.Duration
	// CallTimeout bounds each Send, retries included. Default 10 s.
	CallTimeout time.Duration
	// Retries is the client's retry count for definite transient
	// failures. Default client.DefaultRetries; negative: none.
	Retries int
	// DelayEvery, when > 0, sends every DelayEvery-th id (sequence number
	// divisible by it) with delay level DelayLevel (default 1: 1 s). Its
	// ack names the parked record, so the checker does not compare it with
	// where the message is delivered (history.NoteDelayed).
	DelayEvery, DelayLevel int
	// Dial rewrites connection addresses (a broker's to its fault proxy).
	Dial map[string]string
	// RouteRefresh is the client's route refresh period; 0: its default.
	RouteRefresh time.Duration
	// OnStarted, if set, is called once the history file and the producer
	// exist, before the first send.
	OnStarted func() `json:"-"`
}

func (s ProducerSpec) withDefaults() ProducerSpec {
	if s.Concurrency <= 0 {
		s.Concurrency = 8
	}
	if s.SendTimeout <= 0 {
		s.SendTimeout = 3 * time.Second
	}
	if s.CallTimeout <= 0 {
		s.CallTimeout = 10 * time.Second
	}
	switch {
	case s.Retries == 0:
		s.Retries = client.DefaultRetries
	case s.Retries < 0:
		s.Retries = 0
	}
	return s
}

// Stats counts a worker's outcomes.
type Stats struct {
	Sent, OK, Definite, Indeterminate int
}

func (s Stats) String() string {
	return fmt.Sprintf("sent=%d ok=%d definite=%d indeterminate=%d", s.Sent, s.OK, s.Definite, s.Indeterminate)
}

// RunProducer sends ids in rounds of Concurrency concurrent Sends until
// Count ids were sent or ctx ends (the round in flight finishes: its
// sends are not cancelled). Before a round it writes an Invoke event per
// id; after it, one outcome event per id, then syncs the history.
func RunProducer(ctx context.Context, spec ProducerSpec) (Stats, error) {
	spec = spec.withDefaults()
	var st Stats
	w, err := history.Create(spec.History)
	if err != nil {
		return st, err
	}
	defer w.Close()
	cfg := ClientConfig(spec.NameServers, spec.Dial)
	cfg.RouteRefresh = spec.RouteRefresh
	p, err := client.NewProducer(ctx, cfg,
		client.WithSendTimeout(spec.SendTimeout), client.WithRetries(spec.Retries),
		client.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		return st, err
	}
	defer p.Close(context.Background())
	if spec.OnStarted != nil {
		spec.OnStarted()
	}
	start := time.Now()
	for seq := 0; ctx.Err() == nil && (spec.Count == 0 || seq < spec.Count); {
		n := spec.Concurrency
		if spec.Count > 0 {
			n = min(n, spec.Count-seq)
		}
		if err := sendRound(p, w, spec, seq, n, &st); err != nil {
			return st, err
		}
		seq += n
		if spec.Rate > 0 {
			due := start.Add(time.Duration(seq) * time.Second / time.Duration(spec.Rate))
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(due)):
			}
		}
	}
	return st, w.Close()
}

// sendRound sends ids seq..seq+n-1 at once and records their outcomes.
func sendRound(p *client.Producer, w *history.Writer, spec ProducerSpec, seq, n int, st *Stats) error {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%06d", spec.Worker, seq+i)
		w.Add(history.Event{Kind: history.Send, ID: ids[i], Key: ids[i], Outcome: history.Invoke, Worker: spec.Worker,
			Topic: spec.Topic, Time: history.Now()})
	}
	if err := w.Flush(); err != nil { // written before any request goes out
		return err
	}
	events := make([]history.Event, n)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), spec.CallTimeout)
			defer cancel()
			m := Message(spec.Topic, id)
			delayed := spec.DelayEvery > 0 && (seq+i)%spec.DelayEvery == 0
			if delayed {
				m.DelayLevel = max(spec.DelayLevel, 1)
			}
			res, err := p.Send(ctx, m)
			if err == nil {
				events[i] = ackEvent(spec.Worker, spec.Topic, id, res)
				if delayed {
					events[i].Note = history.NoteDelayed
				}
				return
			}
			events[i] = history.Event{Kind: history.Send, ID: id, Outcome: Outcome(err), Worker: spec.Worker,
				Topic: spec.Topic, Err: err.Error(), Time: history.Now()}
		})
	}
	wg.Wait()
	for _, e := range events {
		st.Sent++
		switch e.Outcome {
		case history.OK:
			st.OK++
		case history.Definite:
			st.Definite++
		case history.Indeterminate:
			st.Indeterminate++
		}
	}
	return w.Append(events...)
}
