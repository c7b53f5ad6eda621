package reliability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/test/reliability/checker"
	"github.com/gantrymq/gantry/test/reliability/history"
	"github.com/gantrymq/gantry/test/reliability/workload"
)

// Disk full (RELIABILITY.md §4): the store lives on a 64 MiB (long: 256 MiB) tmpfs that a
// ballast file fills while a producer sends under SYNC_FLUSH. Pass: the
// broker survives (no SIGBUS), refuses sends with a definite disk-full
// error before appending (none of them is ever read back: unexpected =
// 0), keeps serving reads, and accepts sends again once the ballast is
// deleted, without a restart; then the usual lost = 0 and dense offsets.
//
// Two ways to be full: "enospc" turns the broker's disk-use ratios off
// (1.0) so only the failure to allocate the next segment (fallocate:
// ENOSPC) stops the writes; "ratio" keeps diskFullRatio at 0.90 (forced
// cleaning off) so the broker refuses writes before the disk is full.
func TestDiskFullTmpfs(t *testing.T) {
	for _, tt := range []struct {
		name     string
		fullRate float64
		leave    int64 // free bytes the ballast leaves
	}{
		{"enospc", 1.0, 5 << 20},
		{"ratio", 0.90, 9 << 20}, // 86 % used: about 2.6 MiB more and the broker refuses
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Long runs write more than 64 MiB in their three cycles: a
			// bigger tmpfs so that deleting the ballast gives space back
			// (in 64 MiB the store itself filled the disk again).
			mnt := MountTmpfs(t, Pick(int64(64<<20), int64(256<<20)))
			e := NewEnv(t, "disk-full-"+tt.name)
			e.Spec.Store = filepath.Join(mnt, "store")
			e.Spec.SegmentBytes = 1 << 20
			e.Spec.DiskFullRatio, e.Spec.DiskForceCleanRatio = tt.fullRate, 1.0
			e.Spec.CleanInterval = 200 * time.Millisecond
			runDiskFull(t, e, mnt, tt.leave)
		})
	}
}

// resumeBound is how soon after the space came back sends must succeed.
const resumeBound = time.Minute

func runDiskFull(t *testing.T, e *Env, mnt string, leave int64) {
	e.StartNameServer()
	e.StartBroker()
	e.CreateTopic(4)
	e.WaitTopicSaved()
	prod := e.Producer("p0", func(s *workload.ProducerSpec) { s.Concurrency = 32 })
	cycles := Pick(1, 3)
	var read, corrupt int
	var resumed time.Duration
	for range cycles {
		r, c, res := fillAndFree(t, e, mnt, leave)
		read, corrupt, resumed = read+r, corrupt+c, max(resumed, res)
	}
	e.StopWorkers(prod)
	r := e.DrainAndCheck(checker.Options{MinAcked: 200})
	r.Add("fullCycles", cycles)
	r.Add("diskFullErrors", countDiskFull(e.Events()))
	r.Add("readWhileFull", read)
	r.Add("resumedWithin", resumed.Round(100*time.Millisecond))
	if resumed > resumeBound {
		r.Fail("sends resumed %s after the space came back (limit %s)", resumed.Round(100*time.Millisecond), resumeBound)
	}
	if corrupt > 0 {
		r.Fail("%d corrupt messages read while the disk was full", corrupt)
	}
	if e.Broker.Exited() {
		r.Fail("the broker exited: %v", e.Broker.ExitErr())
	}
	e.StopBroker()
	e.Verify(r)
	e.Report(r)
}

// fillAndFree fills the tmpfs with a ballast leaving leave bytes, waits
// for disk-full refusals, reads everything back while full, deletes the
// ballast and waits for sends to succeed again. It returns what it read,
// how much of it was corrupt and how long writes took to resume.
func fillAndFree(t *testing.T, e *Env, mnt string, leave int64) (read, corrupt int, resumed time.Duration) {
	free, err := FreeBytes(mnt)
	require.NoError(t, err)
	ballast := filepath.Join(mnt, "ballast")
	require.NoError(t, Ballast(ballast, max(0, free-leave)))
	e.Fault(fmt.Sprintf("ballast: %d MiB of %d MiB free left", leave>>20, free>>20))
	before := countDiskFull(e.Events())

	// Full: sends fail with a definite disk-full error, the broker lives.
	require.Eventually(t, func() bool {
		return countDiskFull(e.Events()) >= before+50 || e.Broker.Exited()
	}, 2*time.Minute, 100*time.Millisecond, "the disk never filled up")
	require.False(t, e.Broker.Exited(), "the broker died on a full disk (log %s)", e.Broker.Log)

	// Reads keep working while full.
	read, corrupt, err = readAll(e)
	require.NoError(t, err, "reading while the disk is full")

	// Space comes back: sends succeed again, without a restart. How long
	// that took is read from the history (when the 200th send after the
	// space came back was acknowledged), not from when this loop noticed:
	// with hundreds of thousands of events each look at the history takes
	// seconds. The run's verdict bounds it.
	require.NoError(t, os.Remove(ballast))
	freed := history.Now()
	require.Eventually(t, func() bool {
		if at := nthAfter(e.Events(), history.Send, history.OK, freed, 200); at > 0 {
			resumed = time.Duration(at - freed)
			return true
		}
		return false
	}, 3*time.Minute, 500*time.Millisecond, "sends did not succeed again after the space came back")
	return read, corrupt, resumed
}

// nthAfter returns the time of the n-th event of kind and outcome after t,
// in time order, or 0 if there are fewer.
func nthAfter(evs []history.Event, kind history.Kind, outcome history.Outcome, t int64, n int) int64 {
	var ts []int64
	for _, e := range evs {
		if e.Kind == kind && e.Outcome == outcome && e.Time > t {
			ts = append(ts, e.Time)
		}
	}
	if len(ts) < n {
		return 0
	}
	slices.Sort(ts)
	return ts[n-1]
}

// countDiskFull counts the definite send failures that say the disk is full.
func countDiskFull(evs []history.Event) int { return countRefused(evs, "disk full") }

// countRefused counts the definite send failures whose error says why
// (case aside).
func countRefused(evs []history.Event, why string) int {
	n := 0
	for _, e := range evs {
		if e.Kind == history.Send && e.Outcome == history.Definite && strings.Contains(strings.ToLower(e.Err), why) {
			n++
		}
	}
	return n
}

// readAll reads every queue of the topic now, into a scratch history,
// and returns how many messages it read and how many had a wrong body.
func readAll(e *Env) (read, corrupt int, err error) {
	w, err := history.Create(filepath.Join(e.Dir, "read-while-full.jsonl"))
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(e.T.Context(), time.Minute)
	defer cancel()
	n, err := workload.Drain(ctx, workload.ClientConfig([]string{e.NSAddr}, nil), e.Topic, w)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, 0, err
	}
	evs, err := history.Read(filepath.Join(e.Dir, "read-while-full.jsonl"))
	for _, ev := range evs {
		if ev.Kind == history.Drain && !history.Verify(ev.ID, ev.Len, ev.CRC) {
			corrupt++
		}
	}
	return n, corrupt, err
}
