package store_test

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// A DispatchLimit holds records back from the consume queues (consumers do
// not see them) without stalling the store, also across a restart, where
// the queues' next offsets still come from the held records.
func TestDispatchLimitHoldsRecordsBack(t *testing.T) {
	root := t.TempDir()
	var limit atomic.Int64
	cfg := testConfig(t, root, fsx.OS)
	cfg.DispatchLimit = limit.Load
	one := func(i int) *message.Message {
		m := msg(i)
		m.Topic, m.QueueID = "Orders", 0
		return m
	}
	s := openStore(t, cfg)
	var res []int64 // each record's end
	for i := range 10 {
		r, err := putMsgs(t.Context(), s, []*message.Message{one(i)})
		require.NoError(t, err)
		require.Equal(t, int64(i), r[0].QueueOffset)
		res = append(res, s.PutEnd())
	}
	dispatchedTo := func(off int64) {
		t.Helper()
		require.True(t, s.WaitDispatched(t.Context(), off, 5*time.Second), "dispatched %d, want %d", s.DispatchedOffset(), off)
	}

	_, maxOff := s.QueueOffsets("Orders", 0)
	assert.Zero(t, maxOff, "nothing is confirmed: no message is readable")
	d := s.DispatchState()
	assert.False(t, d.Refusing)
	assert.Zero(t, d.LagBytes, "held records are no lag")
	assert.Equal(t, res[9], d.Held)
	require.NoError(t, s.Refusal())

	limit.Store(res[4] + 1) // within the sixth record: five are readable
	s.Kick()
	dispatchedTo(res[4])
	_, maxOff = s.QueueOffsets("Orders", 0)
	assert.Equal(t, int64(5), maxOff)
	g, err := s.Get("Orders", 0, 0, 32, 1<<20, nil)
	require.NoError(t, err)
	assert.Len(t, g.Records, 5)
	g.Release()
	assert.Equal(t, res[4], s.DispatchedOffset(), "the sixth record is not cut")

	require.NoError(t, s.Close())
	s = openStore(t, cfg) // still limited at the sixth record
	_, maxOff = s.QueueOffsets("Orders", 0)
	assert.Equal(t, int64(5), maxOff)
	r, err := putMsgs(t.Context(), s, []*message.Message{one(10)})
	require.NoError(t, err)
	assert.Equal(t, int64(10), r[0].QueueOffset, "the held records keep their queue offsets")

	limit.Store(math.MaxInt64)
	s.Kick()
	dispatchedTo(s.PutEnd())
	g, err = s.Get("Orders", 0, 0, 32, 1<<20, nil)
	require.NoError(t, err)
	defer g.Release()
	require.Len(t, g.Records, 11)
	for i, rec := range g.Records {
		v, err := message.NewView(rec.B)
		require.NoError(t, err)
		assert.Equal(t, int64(i), v.QueueOffset())
		assert.Equal(t, one(i).Body, v.Body())
	}
	require.NoError(t, s.Close())
}
