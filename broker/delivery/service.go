package delivery

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/gantrymq/gantry/internal/tick"
)

// Service delivers what the broker parks and takes back: delay levels
// (scheduler), delivery times (timer), send-backs to retry and dead-letter
// topics, and the dead-letter queues with their sweep and admin. Its
// methods are safe for concurrent use.
type Service struct {
	cfg       Config
	log       *slog.Logger
	store     Store
	commitLog CommitLog
	meta      Metadata
	topics    Topics
	send      Sender

	sched *scheduler // delivers messages parked with a delay level
	timer *timer     // delivers messages parked with a delivery time
	dlq   *dlqState  // dead letters resent and purged; DLQ counters

	resendPurgeMu sync.Mutex // one DLQ resend or purge at a time; taken before dlq's lock

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// Open reads the delivered offsets of the delay levels, loads the timer's
// progress and the dead-letter state (re-applying each dead-letter queue's
// min offset, which the store does not keep), and scans the timer's queue.
// The store is open and recovered. Start starts the loops.
func Open(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Service{cfg: cfg, log: cfg.Log, store: cfg.Store, commitLog: cfg.CommitLog, meta: cfg.Metadata,
		topics: cfg.Topics, send: cfg.Sender, stop: func() {}}
	d.sched = newScheduler(d)
	var err error
	if d.timer, err = openTimer(d); err != nil {
		return nil, err
	}
	if err := d.openDLQ(); err != nil {
		return nil, err
	}
	return d, nil
}

// Start starts the scheduler, the timer and the dead-letter sweep, each on
// a goroutine of its own, until Close.
func (d *Service) Start() {
	ctx, stop := context.WithCancel(context.Background())
	d.stop = stop
	d.wg.Go(func() { d.sched.run(ctx) })
	d.wg.Go(func() { d.timer.run(ctx) })
	d.wg.Go(func() { tick.Every(ctx, d.cfg.SweepInterval, d.SweepDLQ) })
}

// Close stops the loops and waits for them, then makes the delivered
// messages durable and records the progress: the delay levels' offsets
// (into Metadata, which the broker saves with its metadata), the timer's
// file and the dead-letter state. The store must stay open until Close
// returns.
func (d *Service) Close() error {
	d.stop()
	d.wg.Wait()
	return errors.Join(d.sched.finish(), d.timer.finish(), d.dlq.save())
}

// Pending returns the messages parked and not delivered: per delay level,
// and in the timer.
func (d *Service) Pending() (levels []int64, timer int64) {
	return d.sched.pending(), d.timer.pendingCount()
}
