package controller

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Heartbeat is what a broker last reported to the leader.
type Heartbeat struct {
	At             time.Time // when the leader received it (Config.Now)
	MasterEpoch    int32     // the master epoch the broker follows or leads
	LogEnd         int64     // the end of its commit log
	LastEpoch      int32     // its epoch file's last entry
	LastEpochStart int64
}

type replicaKey struct {
	group string
	id    int64
}

// liveness is the leader's memory of when it last heard from each broker
// (a heartbeat or a registration), for one raft term. It is not in the raft
// log: a new leader starts empty and counts every broker's silence from
// the moment it noticed its leadership, so no broker is judged on
// heartbeats another leader received.
type liveness struct {
	mu    sync.Mutex
	term  uint64 // the term this state belongs to; 0: not leading
	since time.Time
	heard map[replicaKey]time.Time
	beats map[replicaKey]Heartbeat
}

// sync makes the state belong to term when leading, else clears it, and
// returns whether it was reset.
func (l *liveness) sync(term uint64, leading bool, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.syncLocked(term, leading, now)
}

func (l *liveness) syncLocked(term uint64, leading bool, now time.Time) bool {
	if !leading {
		reset := l.term != 0
		l.term, l.heard, l.beats = 0, nil, nil
		return reset
	}
	if l.term == term {
		return false
	}
	l.term, l.since = term, now
	l.heard = make(map[replicaKey]time.Time)
	l.beats = make(map[replicaKey]Heartbeat)
	return true
}

// touch records that the leader of term heard from a broker; hb, when not
// nil, is its heartbeat.
func (l *liveness) touch(term uint64, k replicaKey, now time.Time, hb *Heartbeat) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncLocked(term, true, now)
	l.heard[k] = now
	if hb != nil {
		hb.At = now
		l.beats[k] = *hb
	}
}

// lastHeard is when the broker was last heard from in this term, or when
// the term's leadership was noticed if later (its grace).
func (l *liveness) lastHeard(k replicaKey) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.heard[k]; ok && t.After(l.since) {
		return t
	}
	return l.since
}

// group returns the heartbeats of a group's brokers this term.
func (l *liveness) group(name string, ids []int64) map[int64]Heartbeat {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int64]Heartbeat)
	for _, id := range ids {
		if hb, ok := l.beats[replicaKey{name, id}]; ok {
			out[id] = hb
		}
	}
	return out
}

// pickMaster is the election policy (RocketMQ's DefaultElectPolicy): among
// the alive brokers eligible to win, the one with the highest last epoch,
// then the greatest log end, then the lowest id. Eligible are the in-sync
// brokers, or every alive one in a group that never had a master; with
// unclean, every alive one when no in-sync broker is alive. A broker with
// no heartbeat this term ranks below those with one. It returns 0 when
// none is eligible, and whether the winner is outside the in-sync set.
func pickMaster(g GroupState, beats map[int64]Heartbeat, unclean bool) (id int64, outside bool) {
	fresh := g.MasterEpoch == 0
	best := func(eligible func(int64) bool) int64 {
		var cands []int64
		for _, r := range g.Replicas {
			if r.Alive && eligible(r.ID) {
				cands = append(cands, r.ID)
			}
		}
		if len(cands) == 0 {
			return 0
		}
		rank := func(id int64) (int32, int64) {
			hb, ok := beats[id]
			if !ok {
				return -1, -1
			}
			return hb.LastEpoch, hb.LogEnd
		}
		return slices.MinFunc(cands, func(a, b int64) int {
			ea, la := rank(a)
			eb, lb := rank(b)
			return cmp.Or(cmp.Compare(eb, ea), cmp.Compare(lb, la), cmp.Compare(a, b))
		})
	}
	if id := best(func(id int64) bool { return fresh || slices.Contains(g.InSync, id) }); id != 0 {
		return id, false
	}
	if unclean {
		return best(func(int64) bool { return true }), true
	}
	return 0, false
}
