package dedup

import (
	"context"
	"fmt"
	"time"

	"github.com/gantrymq/gantry/broker/store"
)

// First attempts (docs/BROKER.md, "De-duplication of sends").
//
// Gantry's producer numbers the attempts of a send (SendRequest.attempt)
// and makes a new UNIQ_KEY for every message it is asked to send, so the
// first attempt of a send carries keys that no earlier request can have
// stored. Of a first attempt whose messages are keyed by their UNIQ_KEY
// (none has an IDEMPOTENCY_KEY), a copy can be stored already only if a
// retry of it overtook it: a retry goes out after the first attempt
// failed or timed out, and the first attempt may still be waiting in the
// broker. So such a send makes no claim and no index look-up, the larger
// part of what de-duplication costs a produce
// (docs/decisions/0014-de-duplication-through-the-index-first-attempts-skip.md),
// provided retries do the work instead:
//
//   - a retry (attempt 2 and up) registers its keys in the table for the
//     window before anything else, so that a first attempt arriving after
//     it finds a key registered and goes the checked way (claim, look-up),
//     which finds the retry's copy;
//   - it then waits for every first attempt that started before it
//     registered to land, and for the dispatcher to index their records,
//     and only then claims and looks its keys up: whatever such a first
//     attempt stored is in the index by then.
//
// A first attempt and a retry take the table's mutex to start, so one of
// the two always sees the other. Requests that do not say (attempt 0: the
// remoting protocol, other gRPC clients) go the checked way and register
// nothing: their keys are not the producer's. A retry's registration
// outlives it by the window, so the table holds the keys of the window's
// retries, at most maxRetried; past that a retry registers nothing, and
// first attempts go the checked way until a window has passed since.

// maxRetried bounds the keys of retries the table holds (about 64 bytes
// each with their queue entry).
const maxRetried = 1 << 16

// retriedRef is a key a retry registered, and the unix ms at which it
// stops mattering; the table's queue of them is in that order.
type retriedRef struct {
	id    keyID
	until int64
}

// dispatchPoll is how often a retry looks whether the dispatcher has
// indexed the first attempts it waits for: the dispatcher trails the log
// closely, so the wait is short and a poll is cheaper than a wake-up hook.
const dispatchPoll = 200 * time.Microsecond

// startFirstAttempt starts a first attempt of keys to topic and returns its
// sequence number, or reports false if it must go the checked way: a key
// of it is a retry's, or retries overflowed the table within the window.
func startFirstAttempt[K Key](t *Table, topic string, keys []K) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now().UnixMilli()
	t.expireRetried(now)
	if now < t.retriedFullUntil {
		return 0, false
	}
	if len(t.retried) > 0 {
		tid := topicPart(t, topic)
		for _, k := range keys {
			if _, ok := t.retried[idOf(t, tid, k)]; ok {
				return 0, false
			}
		}
	}
	seq := t.firstNext
	t.firstNext++
	t.firsts[seq] = struct{}{}
	return seq, true
}

// landFirstAttempt ends the first attempt seq, which stored res (nothing when
// empty), and wakes the retries waiting for first attempts to land.
func (t *Table) landFirstAttempt(seq uint64, res []store.PutResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.firsts, seq)
	if len(res) > 0 { // stored in order: the last is the furthest on
		t.firstLastPhys = max(t.firstLastPhys, res[len(res)-1].PhysicalOffset)
	}
	if t.firstLanded != nil {
		close(t.firstLanded)
		t.firstLanded = nil
	}
}

// waitFirstAttempts registers the keys of a retry to topic for the window, then
// waits until every first attempt that started before that has landed
// and the dispatcher has indexed what they stored (see above), or ctx
// ends.
func waitFirstAttempts[K Key](ctx context.Context, t *Table, topic string, keys []K) error {
	t.mu.Lock()
	now := t.now().UnixMilli()
	t.expireRetried(now)
	tid := topicPart(t, topic)
	for _, k := range keys {
		if len(k) == 0 {
			continue
		}
		if len(t.retriedQ)-t.retriedHead >= maxRetried {
			t.retriedFullUntil = now + t.window
			break
		}
		kid := idOf(t, tid, k)
		t.retried[kid] = now + t.window
		t.retriedQ = append(t.retriedQ, retriedRef{id: kid, until: now + t.window})
	}
	before := t.firstNext // first attempts numbered below it started before
	t.mu.Unlock()
	for {
		t.mu.Lock()
		var landed chan struct{}
		for seq := range t.firsts {
			if seq < before {
				if t.firstLanded == nil {
					t.firstLanded = make(chan struct{})
				}
				landed = t.firstLanded
				break
			}
		}
		t.mu.Unlock()
		if landed == nil {
			break
		}
		select {
		case <-landed:
		case <-ctx.Done():
			return fmt.Errorf("broker: send to %q: waiting for first attempts in flight: %w", topic, ctx.Err())
		}
	}
	// Landed: the dispatcher is to pass the last record a first attempt
	// stored. (Not the log's end: a filler may end it, which the
	// dispatch position stays short of until more records come.)
	t.mu.Lock()
	last := t.firstLastPhys
	t.mu.Unlock()
	for t.dispatched() <= last {
		if t.refusal != nil {
			if err := t.refusal(); err != nil {
				return err // stalled: it would not index them, and the store refuses the retry anyway
			}
		}
		select {
		case <-time.After(dispatchPoll):
		case <-ctx.Done():
			return fmt.Errorf("broker: send to %q: waiting for the dispatcher to index the record at %d (at %d): %w", topic, last, t.dispatched(), ctx.Err())
		}
	}
	return nil
}

// expireRetried drops the retries' keys whose window has passed. Under
// mu.
func (t *Table) expireRetried(now int64) {
	for t.retriedHead < len(t.retriedQ) && t.retriedQ[t.retriedHead].until <= now {
		ref := t.retriedQ[t.retriedHead]
		if until, ok := t.retried[ref.id]; ok && until <= now { // else registered again since: a later entry drops it
			delete(t.retried, ref.id)
		}
		t.retriedHead++
	}
	t.retriedQ, t.retriedHead = compactQueue(t.retriedQ, t.retriedHead)
}
