package checker

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/test/reliability/history"
)

// hist builds a hand-made history on a fake clock (1 ms a step).
type hist struct {
	now    int64
	events []history.Event
}

func (h *hist) tick() int64 { h.now += int64(time.Millisecond); return h.now }

// send records an attempt and its outcome; q and off matter for OK.
func (h *hist) send(id string, out history.Outcome, q int32, off int64) {
	h.events = append(h.events, history.Event{Kind: history.Send, ID: id, Key: id, Outcome: history.Invoke, Time: h.tick()})
	if out == history.Invoke {
		return // the producer died before the outcome
	}
	e := history.Event{Kind: history.Send, ID: id, Outcome: out, Time: h.tick()}
	if out == history.OK {
		e.Broker, e.Queue, e.Offset, e.Phys = "b", q, off, 1000+off
	}
	h.events = append(h.events, e)
}

func (h *hist) read(kind history.Kind, id string, q int32, off int64) {
	body := history.Body(id)
	h.events = append(h.events, history.Event{Kind: kind, ID: id, Broker: "b", Queue: q, Offset: off,
		Len: len(body), CRC: history.CRC(body), Time: h.tick()})
}

func (h *hist) drain(id string, q int32, off int64) { h.read(history.Drain, id, q, off) }

func (h *hist) queue(q int32, lo, hi int64) {
	h.events = append(h.events, history.Event{Kind: history.Queue, Broker: "b", Queue: q, Offset: lo, Max: hi, Time: h.tick()})
}

func (h *hist) fault() {
	h.events = append(h.events, history.Event{Kind: history.Fault, Note: "kill", Time: h.tick()})
}

func (h *hist) heal() {
	h.events = append(h.events, history.Event{Kind: history.Heal, Note: "broker serving", Time: h.tick()})
}

func (h *hist) start() {
	h.events = append(h.events, history.Event{Kind: history.Start, Note: "broker started", Time: h.tick()})
}

// clean is a run where everything went right: three acked messages in
// queue 0, one definite failure, one indeterminate that was stored, one
// pending that was not.
func clean() *hist {
	h := &hist{}
	h.send("p-1", history.OK, 0, 0)
	h.send("p-2", history.OK, 0, 1)
	h.send("p-3", history.Definite, 0, 0)
	h.send("p-4", history.Indeterminate, 0, 0)
	h.send("p-5", history.OK, 0, 3)
	h.send("p-6", history.Invoke, 0, 0)
	h.drain("p-1", 0, 0)
	h.drain("p-2", 0, 1)
	h.drain("p-4", 0, 2)
	h.drain("p-5", 0, 3)
	h.queue(0, 0, 4)
	return h
}

func TestCleanRunPasses(t *testing.T) {
	r := Check(clean().events, Options{Name: "clean", Seed: 7, MinAcked: 3})
	assert.True(t, r.Passed(), "%v", r.Problems)
	assert.Equal(t, "PASS clean seed=7 ids=6 ok=3 definite=1 indeterminate=1 pending=1 stored=4 "+
		"lost=0 unexpected=0 duplicated=0 reordered=0 gaps=0 corrupt=0", r.Verdict())
	assert.Equal(t, 6, r.Attempts)
}

// Each verdict from a hand-made history: the one thing wrong is counted,
// and nothing else.
func TestEachVerdict(t *testing.T) {
	tests := []struct {
		name   string
		damage func(h *hist) // applied to a clean run
		want   func(r *Result) int
		text   string
	}{
		{"lost ack", func(h *hist) {
			h.send("p-7", history.OK, 1, 0) // acknowledged, never drained
			h.queue(1, 0, 0)
		}, func(r *Result) int { return r.Lost }, "lost: p-7"},
		{"aborted read", func(h *hist) {
			h.drain("p-3", 0, 4) // the definite failure is in the log
			h.queue(0, 0, 5)
		}, func(r *Result) int { return r.Unexpected }, "p-3 at b/q0@4 failed definitely"},
		{"never sent", func(h *hist) {
			h.drain("ghost-1", 0, 4)
			h.queue(0, 0, 5)
		}, func(r *Result) int { return r.Unexpected }, "ghost-1 at b/q0@4 was never sent"},
		{"duplicate", func(h *hist) {
			h.drain("p-2", 0, 4)
			h.queue(0, 0, 5)
		}, func(r *Result) int { return r.Duplicated }, "p-2 stored 2 times"},
		{"reorder", func(h *hist) {
			h.send("p-8", history.OK, 1, 1)
			h.send("p-9", history.OK, 1, 0) // sent after p-8's ack, stored before it
			h.drain("p-9", 1, 0)
			h.drain("p-8", 1, 1)
			h.queue(1, 0, 2)
		}, func(r *Result) int { return r.Reordered }, "p-9 (offset 0) was sent after p-8"},
		{"misplaced ack", func(h *hist) {
			h.send("p-8", history.OK, 0, 2) // the ack names p-4's place
			h.drain("p-8", 0, 4)
			h.queue(0, 0, 5)
		}, func(r *Result) int { return r.Reordered }, "p-8 acknowledged at b/q0@2 but stored at [b/q0@4]"},
		{"gap", func(h *hist) {
			h.send("p-10", history.OK, 0, 5)
			h.drain("p-10", 0, 5) // offset 4 has nothing
			h.queue(0, 0, 6)
		}, func(r *Result) int { return r.Gaps }, "1 offsets without a message in [0, 6), the first at 4"},
		{"corrupt body", func(h *hist) {
			for i := range h.events {
				if h.events[i].Kind == history.Drain && h.events[i].ID == "p-2" {
					h.events[i].CRC ^= 1
				}
			}
		}, func(r *Result) int { return r.Corrupt }, "corrupt: drain at b/q0@1"},
		{"corrupt, no id", func(h *hist) { // the record names no id: p-2 is lost too
			for i := range h.events {
				if h.events[i].Kind == history.Drain && h.events[i].ID == "p-2" {
					h.events[i].ID = ""
				}
			}
		}, func(r *Result) int { return r.Corrupt + r.Lost - 1 }, "corrupt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := clean()
			tt.damage(h)
			r := Check(h.events, Options{Name: tt.name})
			assert.False(t, r.Passed())
			assert.Equal(t, 1, tt.want(r), "%s", r.Verdict())
			assert.True(t, strings.HasPrefix(r.Verdict(), "FAIL "+tt.name+" "), r.Verdict())
			require.NotEmpty(t, r.Problems)
			assert.Contains(t, strings.Join(r.Problems, "\n"), tt.text)
			// Nothing else is counted.
			total := r.Lost + r.Unexpected + r.Duplicated + r.Reordered + r.Gaps + r.Corrupt + r.Unhandled + r.CommitAhead
			assert.Equal(t, 1, total-(r.Corrupt+r.Lost-1)*boolInt(tt.name == "corrupt, no id"), "%s %v", r.Verdict(), r.Problems)
		})
	}
}

// Async flush: a lost suffix acknowledged shortly before a fault is
// allowed; the same loss with a survivor after it (a hole) or acknowledged
// too long before the fault is not.
func TestLossAllowance(t *testing.T) {
	h := &hist{}
	h.send("a-1", history.OK, 0, 0)
	h.now += int64(time.Second)
	h.send("a-2", history.OK, 0, 1)
	h.send("a-3", history.OK, 0, 2)
	h.fault() // a power cut: a-2 and a-3 are lost
	h.send("a-4", history.OK, 0, 1)
	h.drain("a-1", 0, 0)
	h.drain("a-4", 0, 1)
	h.queue(0, 0, 2)
	r := Check(h.events, Options{Name: "async", LossAllowance: 500 * time.Millisecond})
	assert.True(t, r.Passed(), "%s %v", r.Verdict(), r.Problems)
	assert.Equal(t, 2, r.LostAllowed)
	assert.Equal(t, 3*time.Millisecond, r.MaxLossAge)
	assert.Contains(t, r.Verdict(), "lostAllowed=2 maxLossAge=3ms faults=1")

	r = Check(h.events, Options{Name: "sync"})
	assert.Equal(t, 2, r.Lost, "no allowance")

	hole := &hist{}
	hole.send("a-1", history.OK, 0, 0)
	hole.send("a-2", history.OK, 0, 1)
	hole.fault()
	hole.drain("a-2", 0, 1) // a-1 lost, a-2 after it survived
	hole.queue(0, 1, 2)
	r = Check(hole.events, Options{LossAllowance: time.Second})
	assert.Equal(t, 1, r.Lost, "a hole is never allowed")

	old := &hist{}
	old.send("a-1", history.OK, 0, 0)
	old.now += int64(2 * time.Second)
	old.fault()
	old.queue(0, 0, 0)
	r = Check(old.events, Options{LossAllowance: time.Second})
	assert.Equal(t, 1, r.Lost)
	assert.Equal(t, 2*time.Second+time.Millisecond, r.MaxLossAge)

	// An ack recorded after a fault but before the heal (the broker was
	// down: a response read after it died) counts against that fault,
	// with age 0, and belongs to its suffix; without the heal it would be
	// measured against the next fault, 2 s later.
	late := &hist{}
	late.send("a-1", history.OK, 0, 0)
	late.send("a-2", history.OK, 0, 1)
	late.fault()
	late.events[len(late.events)-2], late.events[len(late.events)-1] = late.events[len(late.events)-1], late.events[len(late.events)-2]
	late.events[len(late.events)-1].Time = late.tick() // a-2's ack read after the fault
	late.heal()
	late.send("a-3", history.OK, 0, 1)
	late.now += int64(2 * time.Second)
	late.fault()
	late.heal()
	late.drain("a-1", 0, 0)
	late.drain("a-3", 0, 1)
	late.queue(0, 0, 2)
	r = Check(late.events, Options{LossAllowance: time.Second})
	assert.True(t, r.Passed(), "%s %v", r.Verdict(), r.Problems)
	assert.Equal(t, 1, r.LostAllowed)
	assert.Equal(t, time.Duration(0), r.MaxLossAge)
	noHeal := slices.DeleteFunc(slices.Clone(late.events), func(e history.Event) bool { return e.Kind == history.Heal })
	r = Check(noHeal, Options{LossAllowance: time.Second})
	assert.Equal(t, 1, r.Lost, "measured against the second fault without heals")

	// The restarted broker can answer before the harness sees it serve: a
	// surviving ack recorded after its Start and before the heal, above a
	// loss in the same queue, is no hole, as it may have come from the new
	// process (seen in CI: acked 0.4 ms before the heal). Recorded before
	// the Start, it can only have come from the process the fault killed:
	// then the loss is a hole.
	racing := &hist{}
	racing.send("a-1", history.OK, 0, 0)
	racing.send("a-2", history.OK, 0, 1) // lost at the cut
	racing.fault()
	racing.start()
	racing.send("a-3", history.OK, 0, 1) // the new broker's, before the heal
	racing.send("a-4", history.OK, 0, 2)
	racing.heal()
	racing.drain("a-1", 0, 0)
	racing.drain("a-3", 0, 1)
	racing.drain("a-4", 0, 2)
	racing.queue(0, 0, 3)
	r = Check(racing.events, Options{LossAllowance: time.Second})
	assert.True(t, r.Passed(), "%s %v", r.Verdict(), r.Problems)
	assert.Equal(t, 1, r.LostAllowed)
	noStart := slices.DeleteFunc(slices.Clone(racing.events), func(e history.Event) bool { return e.Kind == history.Start })
	r = Check(noStart, Options{LossAllowance: time.Second})
	assert.Equal(t, 1, r.Lost, "a-4 taken as the old broker's without the start")

	oldAck := &hist{}
	oldAck.send("a-1", history.OK, 0, 0)
	oldAck.send("a-2", history.OK, 0, 1) // lost
	oldAck.send("a-3", history.Invoke, 0, 0)
	oldAck.fault()
	oldAck.events = append(oldAck.events, history.Event{Kind: history.Send, ID: "a-3", Outcome: history.OK,
		Broker: "b", Queue: 0, Offset: 2, Phys: 1002, Time: oldAck.tick()}) // read after the kill
	oldAck.start()
	oldAck.heal()
	oldAck.drain("a-1", 0, 0)
	oldAck.drain("a-3", 0, 2)
	oldAck.queue(0, 0, 3)
	r = Check(oldAck.events, Options{LossAllowance: time.Second})
	assert.Equal(t, 1, r.Lost, "%s %v", r.Verdict(), r.Problems)
	assert.Contains(t, strings.Join(r.Problems, "\n"), "lost: a-2 acknowledged at b/q0@1 (acknowledged 2ms before fault 1), not in the drain; a hole: a-3, acknowledged later at b/q0@2 before the same fault, survived")

	nofault := &hist{}
	nofault.send("a-1", history.OK, 0, 0)
	nofault.queue(0, 0, 0)
	r = Check(nofault.events, Options{LossAllowance: time.Second})
	assert.Equal(t, 1, r.Lost)
	assert.Equal(t, time.Duration(-1), r.MaxLossAge)
}

// Consumers: every acknowledged message handled at least once, and no
// committed offset past a message not handled when the offset was read.
func TestConsumerVerdicts(t *testing.T) {
	h := &hist{}
	for i, id := range []string{"c-1", "c-2", "c-3"} {
		h.send(id, history.OK, 0, int64(i))
		h.drain(id, 0, int64(i))
	}
	h.queue(0, 0, 3)
	h.read(history.Recv, "c-1", 0, 0)
	h.read(history.Recv, "c-2", 0, 1)
	h.read(history.Recv, "c-2", 0, 1) // redelivered: fine
	commit := history.Event{Kind: history.Commit, Broker: "b", Queue: 0, Offset: 2, Time: h.tick()}
	h.events = append(h.events, commit)
	h.read(history.Recv, "c-3", 0, 2)

	r := Check(h.events, Options{Name: "consumers", ExpectHandled: true})
	assert.True(t, r.Passed(), "%s %v", r.Verdict(), r.Problems)
	assert.Contains(t, r.Verdict(), "handled=3 redelivered=1 unhandled=0 commitAhead=0 commits=1")

	// The committed offset 3 was read before c-3 was handled.
	ahead := append([]history.Event(nil), h.events...)
	for i := range ahead {
		if ahead[i].Kind == history.Commit {
			ahead[i].Offset = 3
		}
	}
	r = Check(ahead, Options{ExpectHandled: true})
	assert.Equal(t, 1, r.CommitAhead, "%v", r.Problems)
	assert.Contains(t, r.Problems[0], "passes b/q0@2")

	// c-3 never handled.
	r = Check(h.events[:len(h.events)-1], Options{ExpectHandled: true})
	assert.Equal(t, 1, r.Unhandled)

	// A message lost is counted as lost, not also as unhandled.
	lost := &hist{}
	lost.send("c-1", history.OK, 0, 0)
	lost.send("c-2", history.OK, 0, 1)
	lost.drain("c-1", 0, 0)
	lost.queue(0, 0, 1)
	lost.read(history.Recv, "c-1", 0, 0)
	r = Check(lost.events, Options{ExpectHandled: true})
	assert.Equal(t, 1, r.Lost, "%v", r.Problems)
	assert.Zero(t, r.Unhandled, "%v", r.Problems)
}

func TestHarnessFailuresAndFiles(t *testing.T) {
	r := Check(nil, Options{Name: "empty", MinAcked: 1})
	assert.False(t, r.Passed())
	assert.Contains(t, r.Problems[0], "only 0 messages acknowledged")
	r.Add("kills", 3)
	assert.Contains(t, r.Verdict(), "errors=1 kills=3")

	dir := t.TempDir()
	h := clean()
	w, err := history.Create(filepath.Join(dir, "a.jsonl"))
	require.NoError(t, err)
	require.NoError(t, w.Append(h.events...))
	require.NoError(t, w.Close())
	r, err = CheckFiles(Options{Name: "files"}, filepath.Join(dir, "a.jsonl"))
	require.NoError(t, err)
	assert.True(t, r.Passed())
	_, err = CheckFiles(Options{}, filepath.Join(dir, "missing.jsonl"))
	assert.Error(t, err)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A message sent with a delay is acknowledged at its parked record and
// delivered later, after messages sent after it: neither counts as
// reordered, but its loss and its duplicates still count.
func TestDelayedAcks(t *testing.T) {
	h := &hist{}
	h.send("p-1", history.OK, 0, 0)
	h.send("d-2", history.OK, 0, 0) // the parked record's queue and offset
	h.events[len(h.events)-1].Note = history.NoteDelayed
	h.send("p-3", history.OK, 0, 1)
	h.send("d-4", history.OK, 0, 1)
	h.events[len(h.events)-1].Note = history.NoteDelayed
	h.drain("p-1", 0, 0)
	h.drain("p-3", 0, 1)
	h.drain("d-2", 0, 2) // delivered after p-3, sent after it
	h.drain("d-2", 0, 3) // and again
	h.queue(0, 0, 4)
	r := Check(h.events, Options{})
	assert.Zero(t, r.Reordered, r.Problems)
	assert.Equal(t, 1, r.Duplicated)
	assert.Equal(t, 1, r.Lost, "d-4 was never delivered")
}
