package epoch_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/replication/epoch"
)

// rec stands for one record of a log: the epoch whose master wrote it and a
// number unique to that write, so that equal recs mean equal bytes.
type rec struct {
	epoch int32
	n     int
}

type replica struct {
	log    []rec
	file   *epoch.File
	joined bool  // compared its list with the current master's since its last change of role
	stale  int32 // the epoch it was master of until it rejoins; -1 if none
}

// TestSimulatedGroup runs a replica group through random writes,
// replication, elections (clean or not, epochs skipping numbers), writes
// by a deposed master that has not yet heard of the election, crashes that
// lose a log's unflushed tail, and rejoins that truncate a replica's log at
// LastCommonPoint. It checks that a rejoin keeps exactly the prefix the
// follower's log shares with the master's, that each list describes its log (the
// entry covering an offset names the epoch of the record there), and that
// a joined follower's log is always a prefix of the master's.
func TestSimulatedGroup(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { simulateGroup(t, seed, 600) })
	}
}

func simulateGroup(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 40))
	rs := make([]*replica, 3)
	for i := range rs {
		f, err := epoch.Open(fsx.NewMemFS(), "/epoch")
		require.NoError(t, err)
		rs[i] = &replica{file: f, stale: -1}
	}
	master, current, uniq := -1, int32(0), 0
	var stats struct{ rejoins, fromScratch, kept, shared int }

	elect := func() {
		n := rng.IntN(len(rs))
		current += 1 + int32(rng.IntN(3))
		r := rs[n]
		require.NoError(t, r.file.Append(current, int64(len(r.log))))
		if master >= 0 && master != n {
			rs[master].stale = rs[master].lastEpoch()
		}
		for _, o := range rs {
			o.joined = false
		}
		master, r.joined, r.stale = n, true, -1
	}
	write := func(r *replica, ep int32) {
		for range 1 + rng.IntN(4) {
			uniq++
			r.log = append(r.log, rec{ep, uniq})
		}
	}

	for step := range steps {
		switch k := rng.IntN(100); {
		case master < 0 || k < 6:
			elect()
		case k < 36:
			write(rs[master], current)
		case k < 41: // a deposed master writes on in its old epoch
			for _, r := range rs {
				if r.stale >= 0 && !r.joined {
					write(r, r.stale)
				}
			}
		case k < 71: // replication to a joined follower
			m := rs[master]
			for i, f := range rs {
				if i == master || !f.joined {
					continue
				}
				for range rng.IntN(6) {
					o := len(f.log)
					if o >= len(m.log) {
						break
					}
					d := m.log[o]
					// The frame carries the epoch of its data; the first
					// frame of a newer epoch starts at that epoch's start.
					ml := m.file.Entries()
					j, ok := epoch.IndexAt(ml, int64(o))
					require.True(t, ok, "step %d", step)
					require.Equal(t, d.epoch, ml[j].Epoch, "step %d: the master labels the frame with its data's epoch", step)
					if last, ok := f.file.Last(); !ok || d.epoch > last.Epoch {
						require.Equal(t, ml[j].StartOffset, int64(o), "step %d: the first frame of a newer epoch is at the epoch's start", step)
						require.NoError(t, f.file.Append(d.epoch, int64(o)), "step %d", step)
					}
					f.log = append(f.log, d)
				}
			}
		case k < 78: // a crash loses part of a log's tail; a crashed master loses its role
			i := rng.IntN(len(rs))
			r := rs[i]
			r.log = r.log[:len(r.log)-rng.IntN(min(len(r.log), 5)+1)]
			require.NoError(t, r.file.TruncateAfter(int64(len(r.log))))
			// It restarts as a follower: after losing a tail that others
			// may have copied, writing on in its epoch would put other
			// records at offsets they hold under the same epoch.
			if i == master {
				master = -1
			}
			r.joined, r.stale = false, -1
		default: // an unjoined replica rejoins the master
			m := rs[master]
			for i, f := range rs {
				if i == master || f.joined {
					continue
				}
				p, ok := epoch.LastCommonPoint(f.file.Entries(), m.file.Entries(), int64(len(f.log)), int64(len(m.log)))
				stats.rejoins++
				if !ok {
					p = 0
					stats.fromScratch++
				}
				require.True(t, slices.Equal(m.log[:p], f.log[:p]), "step %d: rejoin keeps %d records of %v against %v", step, p, f.file.Entries(), m.file.Entries())
				stats.kept += int(p)
				shared := 0
				for shared < min(len(f.log), len(m.log)) && f.log[shared] == m.log[shared] {
					shared++
				}
				stats.shared += shared
				require.Equal(t, shared, int(p), "step %d: the rejoin drops no record the master shares", step)
				f.log = f.log[:p]
				require.NoError(t, f.file.TruncateAfter(p))
				f.joined, f.stale = true, -1
				break
			}
		}
		for i, r := range rs {
			requireDescribes(t, r, fmt.Sprintf("step %d, replica %d", step, i))
			if i != master && r.joined && master >= 0 {
				require.True(t, len(r.log) <= len(rs[master].log) && slices.Equal(rs[master].log[:len(r.log)], r.log), "step %d, replica %d: a joined follower holds a prefix of the master's log", step, i)
			}
		}
	}
	t.Logf("rejoins %d (from scratch %d), records kept %d of the %d shared", stats.rejoins, stats.fromScratch, stats.kept, stats.shared)
	assert.Greater(t, stats.rejoins, 20)
	assert.Greater(t, stats.kept, 0)
}

func (r *replica) lastEpoch() int32 {
	last, _ := r.file.Last()
	return last.Epoch
}

// epochAt is the epoch of the last entry starting at or before off.
func epochAt(list []epoch.Entry, off int64) int32 {
	i := len(list) - 1
	for i >= 0 && list[i].StartOffset > off {
		i--
	}
	if i < 0 {
		return -1
	}
	return list[i].Epoch
}

// requireDescribes checks that r's list covers every record of its log
// with the record's epoch and starts nowhere beyond the log's end.
func requireDescribes(t *testing.T, r *replica, where string) {
	t.Helper()
	list := r.file.Entries()
	for _, e := range list {
		require.LessOrEqual(t, e.StartOffset, int64(len(r.log)), "%s: %v beyond the log's end %d", where, list, len(r.log))
	}
	for o, d := range r.log {
		if got := epochAt(list, int64(o)); got != d.epoch {
			require.Failf(t, "list does not describe the log", "%s: offset %d holds epoch %d's record, the list %v says %d",
				where, o, d.epoch, list, got)
		}
	}
	require.True(t, slices.IsSortedFunc(list, func(a, b epoch.Entry) int { return int(a.Epoch - b.Epoch) }))
}
