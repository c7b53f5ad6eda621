package replication_test

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/replication"
)

// A master confirms what every replica of a set holds: a slave hears
// nothing of data the other has not acknowledged, and the confirm follows
// the other's acks once it catches up.
func TestConfirmFollowsTheSlowestReplica(t *testing.T) {
	master := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	end := appendN(t, master, 0, 40, 300)
	var m atomic.Pointer[replication.Master]
	var acks atomic.Int64
	cfg := masterConfig(t)
	cfg.Confirmed = func() int64 {
		if mm := m.Load(); mm != nil {
			return mm.MinAcked([]int64{1, 2})
		}
		return 0
	}
	cfg.OnAck = func() { acks.Add(1) }
	m.Store(startMaster(t, cfg, master))
	assert.Equal(t, int64(math.MaxInt64), m.Load().MinAcked(nil))

	var heard atomic.Int64 // the largest confirm slave 1 heard
	one := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	sc := slaveConfig(t, m.Load().Addr().String())
	sc.ReplicaID = 1
	sc.OnConfirm = func(off int64) {
		assert.LessOrEqual(t, off, one.MaxOffset(), "a confirm never passes the replica's end")
		heard.Store(max(heard.Load(), off))
	}
	s1 := startSlave(t, sc, one)
	waitCaughtUp(t, master, one)
	require.Eventually(t, func() bool { return acks.Load() > 0 }, patience, 2*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // streams and acks go on: no confirm may come meanwhile
	assert.Zero(t, heard.Load(), "replica 2 holds nothing: nothing is confirmed")
	assert.Zero(t, m.Load().MinAcked([]int64{1, 2}))

	two := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	sc2 := slaveConfig(t, m.Load().Addr().String())
	sc2.ReplicaID = 2
	startSlave(t, sc2, two)
	require.Eventually(t, func() bool { return heard.Load() == end }, patience, 2*time.Millisecond,
		"slave 1 heard a confirm of %d, want %d", heard.Load(), end)
	assert.Equal(t, end, s1.Status().Confirmed)

	end = appendN(t, master, 40, 10, 300)
	m.Load().Notify()
	require.Eventually(t, func() bool { return heard.Load() == end }, patience, 2*time.Millisecond,
		"slave 1 heard a confirm of %d, want %d", heard.Load(), end)
}
