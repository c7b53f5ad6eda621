// Package checker turns the histories of a reliability run (package
// history) into counts and a verdict, following the contract of
// RELIABILITY.md §1: an acknowledged message is not lost, a definitely
// failed one is never read back, nothing is invented, duplicated, reordered
// within its queue, or corrupted, queue offsets are dense, and a consumer's
// committed offset never passes a message it did not handle.
//
// Counts (see docs/RELIABILITY.md for how each is computed):
//
//	lost         acknowledged, absent from the final drain
//	unexpected   read back (drain or consumer) but definitely failed, or never sent
//	duplicated   extra copies of an id at other queue positions
//	reordered    ids stored elsewhere than their ack said, or stored before a message acked before they were sent
//	             (not a message sent with a delay: its ack, history.NoteDelayed, names the parked record)
//	gaps         queue offsets between a queue's min and max with no message
//	corrupt      a body read that is not Body(id), or that names no id
//	unhandled    acknowledged, never handled by a consumer (when consumption is expected)
//	commitAhead  queue positions below a committed offset not handled before the commit was read
//
// An async-flush run may allow a bounded loss (Options.LossAllowance): a
// lost message acknowledged at most that long before the next fault, in a
// per-queue suffix of what was acknowledged before that fault, counts as
// lostAllowed; any other loss counts as lost.
package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gantrymq/gantry/test/reliability/history"
)

// Options says what a run must satisfy.
type Options struct {
	// Name names the run in the verdict line.
	Name string
	// Seed is the run's seed, printed so the run can be replayed.
	Seed uint64
	// ExpectHandled makes every acknowledged message that must have been
	// handled by a consumer (Recv events) count as unhandled when it was
	// not; after a drain, one the drain did not find counts as lost (or
	// lostAllowed) only, not also as unhandled.
	ExpectHandled bool
	// LossAllowance allows, for async flush under power loss, the loss of
	// a per-queue suffix acknowledged at most this long before the next
	// fault: no message acknowledged later in the same queue by the same
	// broker process (before the fault, or before the broker's next Start
	// event) survived. Zero: every loss counts.
	LossAllowance time.Duration
	// MinAcked fails a run that acknowledged fewer messages (a run that
	// did nothing proves nothing).
	MinAcked int
	// MaxProblems bounds the examples kept in Result.Problems. Default 20.
	MaxProblems int
	// Drained says the run ended with a drain even if it recorded nothing
	// (a topic that vanished): every acknowledged message then counts as
	// lost. Drain and Queue events imply it.
	Drained bool
}

// Result is what Check found.
type Result struct {
	Name string
	Seed uint64

	Attempts      int // send attempts
	IDs           int // distinct ids sent
	OK            int // ids acknowledged
	Definite      int // ids whose every attempt failed definitely
	Indeterminate int // ids with an indeterminate outcome and no ack
	Pending       int // ids sent without an outcome (the producer died) and no ack
	Stored        int // distinct ids in the final drain
	Handled       int // distinct ids handled by consumers
	Redelivered   int // handlings beyond the first of a queue position
	Commits       int // committed offsets checked
	Faults        int // faults injected

	Lost        int
	LostAllowed int
	Unexpected  int
	Duplicated  int
	Reordered   int
	Gaps        int
	Corrupt     int
	Unhandled   int
	CommitAhead int
	// MaxLossAge is the longest time between the ack of a lost message
	// and the next fault (-1 when a lost message had no fault after it).
	MaxLossAge time.Duration

	// Extra holds key=value figures the harness adds to the verdict line.
	Extra []string
	// Problems holds examples of what failed, and harness errors.
	Problems []string
	// Errors counts harness-level failures added with Fail.
	Errors int

	drained, consumed bool
	maxProblems       int
}

// Passed reports whether every count the contract forbids is zero.
func (r *Result) Passed() bool {
	return r.Lost == 0 && r.Unexpected == 0 && r.Duplicated == 0 && r.Reordered == 0 && r.Gaps == 0 &&
		r.Corrupt == 0 && r.Unhandled == 0 && r.CommitAhead == 0 && r.Errors == 0
}

// Fail records a harness-level failure (the run could not be checked as
// planned); the verdict becomes FAIL.
func (r *Result) Fail(format string, args ...any) {
	r.Errors++
	r.Problems = append(r.Problems, "error: "+fmt.Sprintf(format, args...))
}

// Add appends key=value figures to the verdict line.
func (r *Result) Add(key string, value any) {
	r.Extra = append(r.Extra, fmt.Sprintf("%s=%v", key, value))
}

// Verdict is the one-line summary: PASS or FAIL, the name, the seed and
// the counts.
func (r *Result) Verdict() string {
	var b strings.Builder
	if r.Passed() {
		b.WriteString("PASS")
	} else {
		b.WriteString("FAIL")
	}
	fmt.Fprintf(&b, " %s seed=%d ids=%d ok=%d definite=%d indeterminate=%d pending=%d", r.Name, r.Seed,
		r.IDs, r.OK, r.Definite, r.Indeterminate, r.Pending)
	if r.drained {
		fmt.Fprintf(&b, " stored=%d", r.Stored)
	}
	fmt.Fprintf(&b, " lost=%d unexpected=%d duplicated=%d reordered=%d gaps=%d corrupt=%d",
		r.Lost, r.Unexpected, r.Duplicated, r.Reordered, r.Gaps, r.Corrupt)
	if r.consumed {
		fmt.Fprintf(&b, " handled=%d redelivered=%d unhandled=%d commitAhead=%d commits=%d",
			r.Handled, r.Redelivered, r.Unhandled, r.CommitAhead, r.Commits)
	}
	if r.LostAllowed > 0 || r.MaxLossAge != 0 {
		fmt.Fprintf(&b, " lostAllowed=%d maxLossAge=%s", r.LostAllowed, r.MaxLossAge.Round(time.Millisecond))
	}
	if r.Faults > 0 {
		fmt.Fprintf(&b, " faults=%d", r.Faults)
	}
	if r.Errors > 0 {
		fmt.Fprintf(&b, " errors=%d", r.Errors)
	}
	for _, e := range r.Extra {
		b.WriteString(" " + e)
	}
	return b.String()
}

func (r *Result) problem(format string, args ...any) {
	if len(r.Problems) < r.maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// queueKey names a queue.
type queueKey struct {
	broker string
	queue  int32
}

func (q queueKey) String() string { return fmt.Sprintf("%s/q%d", q.broker, q.queue) }

// pos is a message's place in a queue.
type pos struct {
	q   queueKey
	off int64
}

func (p pos) String() string { return fmt.Sprintf("%s@%d", p.q, p.off) }

// sent is what the producers said about one id.
type sent struct {
	invokes, outcomes int
	firstInvoke       int64
	ok                *history.Event // the first acknowledgement
	definite, indet   int
}

func (s *sent) status() history.Outcome {
	switch {
	case s.ok != nil:
		return history.OK
	case s.indet > 0:
		return history.Indeterminate
	case s.invokes > s.outcomes:
		return history.Invoke // pending
	case s.definite > 0:
		return history.Definite
	}
	return history.Invoke
}

// run is the state of one Check.
type run struct {
	opts         Options
	res          *Result
	sends        map[string]*sent
	stored       map[string][]pos        // id -> drain positions
	at           map[pos]history.Event   // drain: position -> event
	queues       map[queueKey][2]int64   // min, max from Queue events
	recvAt       map[pos]int64           // earliest handling time per position
	recvID       map[string]bool         // ids handled
	faults       []int64                 // fault times, sorted
	heals        []int64                 // heal times, sorted
	starts       []int64                 // broker start times, sorted
	survivors    map[epochQueue]string   // see holeAbove
	commit       []history.Event         // committed offsets read
	reads        []history.Event         // drain and recv events
	corrupt      map[string]map[pos]bool // kind -> corrupt positions (counted once per kind)
	reorderedIDs map[string]bool
	recvs        int // Recv events
}

// Check counts what the events show (see the package doc).
func Check(events []history.Event, opts Options) *Result {
	if opts.MaxProblems == 0 {
		opts.MaxProblems = 20
	}
	r := &run{opts: opts, res: &Result{Name: opts.Name, Seed: opts.Seed, maxProblems: opts.MaxProblems},
		sends: map[string]*sent{}, stored: map[string][]pos{}, at: map[pos]history.Event{},
		queues: map[queueKey][2]int64{}, recvAt: map[pos]int64{}, recvID: map[string]bool{},
		corrupt: map[string]map[pos]bool{}, reorderedIDs: map[string]bool{}}
	r.res.drained = opts.Drained
	r.index(events)
	r.countSends()
	r.checkReads()
	if r.res.drained {
		r.checkDrain()
		r.checkOrder()
		r.checkGaps()
	}
	r.checkConsumers()
	if opts.MinAcked > 0 && r.res.OK < opts.MinAcked {
		r.res.Fail("only %d messages acknowledged, the run needs at least %d to mean something", r.res.OK, opts.MinAcked)
	}
	return r.res
}

// CheckFiles reads history files and checks them.
func CheckFiles(opts Options, paths ...string) (*Result, error) {
	events, err := history.ReadAll(paths...)
	if err != nil {
		return nil, err
	}
	return Check(events, opts), nil
}

func (r *run) index(events []history.Event) {
	for _, e := range events {
		q := queueKey{e.Broker, e.Queue}
		switch e.Kind {
		case history.Send:
			s := r.sends[e.ID]
			if s == nil {
				s = &sent{firstInvoke: math.MaxInt64}
				r.sends[e.ID] = s
			}
			switch e.Outcome {
			case history.Invoke:
				s.invokes++
				s.firstInvoke = min(s.firstInvoke, e.Time)
				r.res.Attempts++
			case history.OK:
				s.outcomes++
				if s.ok == nil {
					ev := e
					s.ok = &ev
				}
			case history.Definite:
				s.outcomes++
				s.definite++
			case history.Indeterminate:
				s.outcomes++
				s.indet++
			}
		case history.Drain:
			r.res.drained = true
			p := pos{q, e.Offset}
			if _, dup := r.at[p]; dup {
				continue // the same position read twice
			}
			r.at[p] = e
			r.stored[e.ID] = append(r.stored[e.ID], p)
			r.reads = append(r.reads, e)
		case history.Queue:
			r.res.drained = true
			r.queues[q] = [2]int64{e.Offset, e.Max}
		case history.Recv:
			r.res.consumed = true
			p := pos{q, e.Offset}
			if t, ok := r.recvAt[p]; !ok || e.Time < t {
				r.recvAt[p] = e.Time
			}
			r.recvs++
			r.recvID[e.ID] = true
			r.reads = append(r.reads, e)
		case history.Commit:
			r.res.consumed = true
			r.commit = append(r.commit, e)
		case history.Fault:
			r.faults = append(r.faults, e.Time)
		case history.Heal:
			r.heals = append(r.heals, e.Time)
		case history.Start:
			r.starts = append(r.starts, e.Time)
		}
	}
	slices.Sort(r.faults)
	slices.Sort(r.heals)
	slices.Sort(r.starts)
	r.res.Faults = len(r.faults)
	r.res.consumed = r.res.consumed || r.opts.ExpectHandled
}

func (r *run) countSends() {
	r.res.IDs = len(r.sends)
	for _, s := range r.sends {
		switch s.status() {
		case history.OK:
			r.res.OK++
		case history.Indeterminate:
			r.res.Indeterminate++
		case history.Invoke:
			r.res.Pending++
		case history.Definite:
			r.res.Definite++
		}
	}
}

// checkReads counts corrupt bodies and unexpected ids among every message
// read, by the drain or by consumers.
func (r *run) checkReads() {
	unexpected := map[string]bool{}
	for _, e := range r.reads {
		p := pos{queueKey{e.Broker, e.Queue}, e.Offset}
		if e.ID == "" || !history.Verify(e.ID, e.Len, e.CRC) {
			if r.corrupt[string(e.Kind)] == nil {
				r.corrupt[string(e.Kind)] = map[pos]bool{}
			}
			if !r.corrupt[string(e.Kind)][p] {
				r.corrupt[string(e.Kind)][p] = true
				r.res.Corrupt++
				r.problem("corrupt: %s at %s: id %q, body of %d bytes does not match", e.Kind, p, e.ID, e.Len)
			}
			continue
		}
		s := r.sends[e.ID]
		switch {
		case unexpected[e.ID]:
		case s == nil || s.invokes == 0:
			unexpected[e.ID] = true
			r.problem("unexpected: %s %s at %s was never sent", e.Kind, e.ID, p)
		case s.status() == history.Definite:
			unexpected[e.ID] = true
			r.problem("unexpected: %s %s at %s failed definitely (%d attempts) but was read back", e.Kind, e.ID, p, s.invokes)
		}
	}
	r.res.Unexpected = len(unexpected)
}

// checkDrain counts stored ids, duplicates, misplaced acks and losses.
func (r *run) checkDrain() {
	for id, ps := range r.stored {
		if r.sends[id] != nil {
			r.res.Stored++
		}
		if len(ps) > 1 {
			r.res.Duplicated += len(ps) - 1
			r.problem("duplicated: %s stored %d times: %v", id, len(ps), ps)
		}
	}
	var lost []string
	for id, s := range r.sends {
		if s.ok == nil {
			continue
		}
		ack := pos{queueKey{s.ok.Broker, s.ok.Queue}, s.ok.Offset}
		ps, ok := r.stored[id]
		if !ok {
			lost = append(lost, id)
			continue
		}
		if !slices.Contains(ps, ack) && s.ok.Note != history.NoteDelayed { // a delayed ack names the parked record
			r.reordered(id, "reordered: %s acknowledged at %s but stored at %v", id, ack, ps)
		}
	}
	slices.Sort(lost)
	for _, id := range lost {
		r.judgeLoss(id)
	}
}

// judgeLoss counts one lost id as allowed or not (see Options.LossAllowance).
func (r *run) judgeLoss(id string) {
	s := r.sends[id]
	ack := s.ok
	i := r.epoch(ack.Time)
	age := time.Duration(-1)
	if i < len(r.faults) {
		age = max(0, time.Duration(r.faults[i]-ack.Time))
	}
	switch {
	case r.res.MaxLossAge < 0: // already unbounded
	case age < 0, age > r.res.MaxLossAge:
		r.res.MaxLossAge = age
	}
	hole := ""
	if r.opts.LossAllowance > 0 && age >= 0 && age <= r.opts.LossAllowance {
		above, ok := r.holeAbove(id, i)
		if !ok {
			r.res.LostAllowed++
			return
		}
		o := r.sends[above].ok
		hole = fmt.Sprintf("; a hole: %s, acknowledged later at %s@%d before the same fault, survived", above, queueKey{o.Broker, o.Queue}, o.Offset)
	}
	r.res.Lost++
	ageText := "no fault after its ack"
	if age >= 0 {
		ageText = fmt.Sprintf("acknowledged %s before fault %d", age.Round(time.Millisecond), i+1)
	}
	r.problem("lost: %s acknowledged at %s@%d (%s), not in the drain%s", id, queueKey{ack.Broker, ack.Queue}, ack.Offset, ageText, hole)
}

// epoch returns the index of the fault an acknowledgement recorded at t
// precedes (len(faults) if none): the first fault at or after t, or, when
// t falls between a fault and the heal after it (an ack given before the
// fault and read afterwards, as far as a loss age goes), that fault.
func (r *run) epoch(t int64) int { return r.epochBy(t, r.heals) }

// writerEpoch is epoch for an acknowledgement that survived, as evidence
// that a loss before the same fault is a hole: such an ack must have come
// from the broker process the fault hit. One recorded after the next
// broker process started may have come from that one instead, which can
// answer before the harness sees it serve: it counts after the fault.
// Without Start events it is epoch.
func (r *run) writerEpoch(t int64) int {
	if len(r.starts) == 0 {
		return r.epoch(t)
	}
	return r.epochBy(t, r.starts)
}

// epochBy is the fault before which the acknowledgement recorded at t was
// given: the first fault at or after t, or the fault before t when t
// comes before the first of marks (sorted) after that fault and before
// the next one.
func (r *run) epochBy(t int64, marks []int64) int {
	i, _ := slices.BinarySearch(r.faults, t)
	if i > 0 {
		h, _ := slices.BinarySearch(marks, r.faults[i-1])
		if h < len(marks) && t < marks[h] && (i == len(r.faults) || marks[h] <= r.faults[i]) {
			return i - 1
		}
	}
	return i
}

// holeAbove returns a message acknowledged in the same queue as id
// before the same fault i (after the one before it, by the broker process
// that fault hit: writerEpoch), at a higher offset, that survived, if
// there is one: then the loss of id is a hole in the queue, not its tail.
func (r *run) holeAbove(id string, i int) (survivor string, ok bool) {
	if r.survivors == nil { // the highest surviving acked offset per queue and fault
		r.survivors = map[epochQueue]string{}
		for oid, s := range r.sends {
			o := s.ok
			if o == nil || o.Note == history.NoteDelayed {
				continue
			}
			if _, ok := r.stored[oid]; !ok {
				continue
			}
			k := epochQueue{queueKey{o.Broker, o.Queue}, r.writerEpoch(o.Time)}
			if hi, ok := r.survivors[k]; !ok || o.Offset > r.sends[hi].ok.Offset {
				r.survivors[k] = oid
			}
		}
	}
	ack := r.sends[id].ok
	hi, ok := r.survivors[epochQueue{queueKey{ack.Broker, ack.Queue}, i}]
	if !ok || r.sends[hi].ok.Offset <= ack.Offset {
		return "", false
	}
	return hi, true
}

// epochQueue is a queue between two faults.
type epochQueue struct {
	q     queueKey
	epoch int
}

// reordered counts id as reordered, once.
func (r *run) reordered(id, format string, args ...any) {
	if r.reorderedIDs[id] {
		return
	}
	r.reorderedIDs[id] = true
	r.res.Reordered++
	r.problem(format, args...)
}

// place is where an id counts as stored for ordering: where its ack said
// if it is there, else its first copy.
func (r *run) place(id string) pos {
	ps := r.stored[id]
	if s := r.sends[id]; s != nil && s.ok != nil {
		ack := pos{queueKey{s.ok.Broker, s.ok.Queue}, s.ok.Offset}
		if slices.Contains(ps, ack) {
			return ack
		}
	}
	return slices.MinFunc(ps, func(a, b pos) int { return cmp.Compare(a.off, b.off) })
}

// checkOrder counts, per queue, messages stored before a message that was
// acknowledged before they were even sent. Only each id's place counts
// (other copies are duplicates).
func (r *run) checkOrder() {
	byQueue := map[queueKey][]history.Event{}
	for id := range r.stored {
		p := r.place(id)
		byQueue[p.q] = append(byQueue[p.q], r.at[p])
	}
	for q, evs := range byQueue {
		slices.SortFunc(evs, func(a, b history.Event) int { return cmp.Compare(a.Offset, b.Offset) })
		minAck, minAckID := int64(math.MaxInt64), ""
		for i := len(evs) - 1; i >= 0; i-- {
			s := r.sends[evs[i].ID]
			if s == nil || s.ok != nil && s.ok.Note == history.NoteDelayed { // stored when due, after later sends
				continue
			}
			if s.invokes > 0 && minAck < s.firstInvoke {
				r.reordered(evs[i].ID, "reordered: in %s, %s (offset %d) was sent after %s, stored later, had been acknowledged",
					q, evs[i].ID, evs[i].Offset, minAckID)
			}
			if s.ok != nil && s.ok.Time < minAck {
				minAck, minAckID = s.ok.Time, evs[i].ID
			}
		}
	}
}

// checkGaps counts missing offsets between each drained queue's min and max.
func (r *run) checkGaps() {
	ranges := map[queueKey][2]int64{}
	for p := range r.at {
		rg, ok := ranges[p.q]
		if !ok {
			rg = [2]int64{p.off, p.off + 1}
		}
		ranges[p.q] = [2]int64{min(rg[0], p.off), max(rg[1], p.off+1)}
	}
	for q, rg := range r.queues {
		ranges[q] = rg
	}
	keys := slices.SortedFunc(func(yield func(queueKey) bool) {
		for q := range ranges {
			if !yield(q) {
				return
			}
		}
	}, func(a, b queueKey) int { return cmp.Or(cmp.Compare(a.broker, b.broker), cmp.Compare(a.queue, b.queue)) })
	for _, q := range keys {
		rg := ranges[q]
		missing, first := 0, int64(-1)
		for off := rg[0]; off < rg[1]; off++ {
			if _, ok := r.at[pos{q, off}]; !ok {
				if first < 0 {
					first = off
				}
				missing++
			}
		}
		if missing > 0 {
			r.res.Gaps += missing
			r.problem("gaps: %s has %d offsets without a message in [%d, %d), the first at %d", q, missing, rg[0], rg[1], first)
		}
	}
}

// checkConsumers counts unhandled acknowledged messages and committed
// offsets that passed a message not yet handled.
func (r *run) checkConsumers() {
	r.res.Handled = 0
	for id := range r.recvID {
		if r.sends[id] != nil {
			r.res.Handled++
		}
	}
	if r.opts.ExpectHandled {
		var ids []string
		for id, s := range r.sends {
			_, stored := r.stored[id]
			if s.ok != nil && !r.recvID[id] && (stored || !r.res.drained) {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		r.res.Unhandled = len(ids)
		for _, id := range ids {
			r.problem("unhandled: %s was acknowledged but no consumer handled it", id)
		}
	}
	ahead := map[pos]bool{}
	for _, c := range r.commit {
		q := queueKey{c.Broker, c.Queue}
		start := r.queues[q][0]
		for off := start; off < c.Offset; off++ {
			p := pos{q, off}
			if ahead[p] {
				continue
			}
			if _, stored := r.at[p]; r.res.drained && !stored {
				continue // a gap, counted there
			}
			if t, ok := r.recvAt[p]; ok && t <= c.Time {
				continue
			}
			ahead[p] = true
			r.problem("commitAhead: %s committed offset %d (read at %s) passes %s, not handled by then",
				q, c.Offset, c.At().Format("15:04:05.000"), p)
		}
	}
	r.res.CommitAhead = len(ahead)
	r.res.Commits = len(r.commit)
	r.res.Redelivered = r.recvs - len(r.recvAt)
}

func (r *run) problem(format string, args ...any) { r.res.problem(format, args...) }
