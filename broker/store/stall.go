package store

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// ErrDispatchStalled means PutBatch refused the messages, storing nothing: the
// dispatcher has failed to bring the consume queues and the index up to
// the log's end for longer than Config.MaxDispatchStall, or lags it by more
// than Config.MaxDispatchLagBytes, so messages acknowledged now could not
// be read. It is transient: PutBatch accepts messages again once the dispatcher
// has caught up (typically once disk space is freed).
var ErrDispatchStalled = errors.New("store: dispatch stalled")

// Defaults of the dispatch bounds.
const (
	DefaultMaxDispatchStall    = 2 * time.Second
	DefaultMaxDispatchLagBytes = 256 << 20
)

// DispatchStatus says how far the dispatcher is behind the log and why.
type DispatchStatus struct {
	// Dispatched is the log offset below which every record is in its
	// consume queue and the index.
	Dispatched int64
	// LogEnd is the log's readable end; LagBytes = LogEnd - Dispatched,
	// less Held.
	LogEnd, LagBytes int64
	// Held is how many bytes below LogEnd Config.DispatchLimit holds back
	// (a controller-mode master's records its in-sync slaves do not hold
	// yet): not a lag of the dispatcher's, and never a reason to refuse.
	Held int64
	// Stalled is true while the dispatcher's last attempt failed; Since is
	// when its failures began, For how long ago that was, and Err the last
	// failure.
	Stalled bool
	Since   time.Time
	For     time.Duration
	Err     error
	// Refusing is true when PutBatch refuses messages with ErrDispatchStalled.
	Refusing bool
}

// String says what the status means, "" when the dispatcher is healthy and
// PutBatch accepts messages.
func (d DispatchStatus) String() string {
	if d.Stalled {
		return "dispatch stalled " + d.detail()
	}
	return d.detail()
}

// detail is String without the leading "dispatch stalled" of a stall:
// what a refusal's ErrDispatchStalled is followed by.
func (d DispatchStatus) detail() string {
	switch {
	case d.Stalled:
		return fmt.Sprintf("for %s at log offset %d, %d bytes behind the log's end: %v",
			d.For.Round(time.Millisecond), d.Dispatched, d.LagBytes, d.Err)
	case d.Refusing:
		return fmt.Sprintf("dispatch is %d bytes behind the log's end", d.LagBytes)
	}
	return ""
}

// stall is the dispatcher's failure state: written by the dispatcher, read
// by PutBatch, DispatchState and the metrics.
type stall struct {
	since atomic.Int64          // unix ns of the first failure of the current stall; 0: none
	err   atomic.Pointer[error] // the last failure
	// refuseNow makes PutBatch refuse at once, not after MaxDispatchStall: set
	// when Open could not dispatch the recovered log (a restart during a
	// stall), cleared when the dispatcher catches up.
	refuseNow atomic.Bool

	// The dispatcher's own (dispatchLoop): when it last logged the stall
	// and the pause until it logs again.
	loggedAt time.Time
	logPause time.Duration
}

// Stall logging: at the first failure, then after 1 s, 2 s, 4 s ... up to
// every minute while it lasts.
const (
	firstStallLog = time.Second
	maxStallLog   = time.Minute
)

// begin records err, a failed dispatch attempt at now, and reports
// whether it starts a stall (none was under way).
func (st *stall) begin(now time.Time, err error) bool {
	st.err.Store(&err)
	if st.since.Load() != 0 {
		return false
	}
	st.since.Store(now.UnixNano())
	st.loggedAt, st.logPause = now, firstStallLog
	return true
}

// failed records a failed dispatch attempt at now.
func (s *Store) failed(now time.Time, err error) {
	st := &s.stall
	if st.begin(now, err) {
		s.log.Error("dispatch stalled: records are acknowledged but not readable; retrying, and refusing sends if it lasts",
			"offset", s.dispatched.Load(), "lagBytes", s.cl.MaxOffset()-s.dispatched.Load(),
			"refuseAfter", s.cfg.MaxDispatchStall, "err", err)
		return
	}
	if now.Sub(st.loggedAt) < st.logPause {
		return
	}
	st.loggedAt, st.logPause = now, min(2*st.logPause, maxStallLog)
	since := time.Unix(0, st.since.Load())
	s.log.Error("dispatch still stalled; sends are refused until it catches up", "offset", s.dispatched.Load(),
		"lagBytes", s.cl.MaxOffset()-s.dispatched.Load(), "for", now.Sub(since).Round(time.Millisecond), "err", err)
}

// resumed records a dispatch attempt that reached the log's end at now.
func (s *Store) resumed(now time.Time) {
	st := &s.stall
	since := st.since.Swap(0)
	st.refuseNow.Store(false)
	if since != 0 {
		s.log.Info("dispatch resumed: every record is readable again", "offset", s.dispatched.Load(),
			"stalledFor", now.Sub(time.Unix(0, since)).Round(time.Millisecond))
	}
}

// DispatchState returns how far the dispatcher is behind the log and
// whether PutBatch refuses messages for it. Safe for concurrent use.
func (s *Store) DispatchState() DispatchStatus {
	d := DispatchStatus{Dispatched: s.dispatched.Load(), LogEnd: s.cl.MaxOffset()}
	bound := min(d.LogEnd, max(s.limitAt.Load(), d.Dispatched))
	d.Held, d.LagBytes = d.LogEnd-bound, max(bound-d.Dispatched, 0)
	if since := s.stall.since.Load(); since != 0 {
		d.Stalled, d.Since = true, time.Unix(0, since)
		d.For = max(s.cfg.Now().Sub(d.Since), 0)
		if p := s.stall.err.Load(); p != nil {
			d.Err = *p
		}
	}
	d.Refusing = s.refusing(d)
	return d
}

// refusing decides, from a status with every other field set, whether
// PutBatch refuses messages.
func (s *Store) refusing(d DispatchStatus) bool {
	if lim := s.cfg.MaxDispatchLagBytes; lim > 0 && d.LagBytes > lim {
		return true
	}
	if !d.Stalled || s.cfg.MaxDispatchStall < 0 {
		return false
	}
	return s.stall.refuseNow.Load() || d.For >= s.cfg.MaxDispatchStall
}

// Refusal returns the error PutBatch would refuse messages with now (wrapping
// ErrDispatchStalled, saying why), nil when it takes them. Safe for
// concurrent use; PutBatch asks it first.
func (s *Store) Refusal() error {
	if s.stall.since.Load() == 0 {
		lim := s.cfg.MaxDispatchLagBytes
		if lim <= 0 || min(s.cl.MaxOffset(), s.limitAt.Load())-s.dispatched.Load() <= lim {
			return nil // the common case, without building a status
		}
	}
	d := s.DispatchState()
	if !d.Refusing {
		return nil
	}
	return fmt.Errorf("%w: %s; sends are refused until the consume queues catch up with the log (retry later)", ErrDispatchStalled, d.detail())
}
