package store_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/broker/verify"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/testutil"
)

// crashStates is how many crash states TestCrashStates checks: 150 by
// default, GANTRY_STORE_CRASH_STATES (the long tier) when set.
func crashStates(t *testing.T) int { return testutil.EnvInt(t, "GANTRY_STORE_CRASH_STATES", 150) }

// lookups answers every key query of the workload: phys offsets, newest first.
func lookups(t *testing.T, s *store.Store, res []store.PutResult) map[string][]int64 {
	t.Helper()
	out := map[string][]int64{}
	far := time.Now().Add(time.Hour).UnixMilli()
	query := func(topic, key string) {
		ms, err := s.MessagesByKey(topic, key, 0, far, 1000)
		require.NoError(t, err)
		q := topic + "#" + key
		out[q] = []int64{}
		for _, m := range ms {
			out[q] = append(out[q], m.PhysicalOffset)
		}
	}
	for i, r := range res {
		query(topics[i%3], r.UniqKey)
		query(topics[i%3], fmt.Sprintf("k%d", i))
		if i%10 == 0 {
			for _, topic := range topics {
				query(topic, fmt.Sprintf("order-%d", i/10))
			}
		}
	}
	return out
}

// The store crashes (MemFS power cut: durable data plus a random prefix of
// each file's unsynced bytes and of pending directory changes) with records
// dispatched, half dispatched and not dispatched at all, with and without
// a recent dispatch checkpoint. After reopening, every consume queue equals
// the reference built from the recovered log, and every key lookup returns
// what it returned before the crash for the records that survived.
func TestCrashStates(t *testing.T) {
	n := crashStates(t)
	for seed := range n {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		mem := fsx.NewMemFS()
		cfg := testConfig(t, "/store", mem)
		cfg.FlushInterval = []time.Duration{3 * time.Millisecond, time.Hour}[rng.IntN(2)]
		if rng.IntN(3) == 0 {
			cfg.Log.FlushMode = commitlog.SyncFlush
		}
		cfg.Log.FlushInterval = time.Duration(1+rng.IntN(20)) * time.Millisecond
		s := openStore(t, cfg)
		res := putAll(t, s, 0, 50+rng.IntN(300))
		waitDispatched(t, s)
		time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
		release := s.HoldDispatch()
		res = append(res, putAll(t, s, len(res), rng.IntN(100))...)
		crashed := mem.Crash(rng)
		release()
		waitDispatched(t, s)
		before := lookups(t, s, res)
		require.NoError(t, s.Close())

		ccfg := cfg
		ccfg.FS = crashed
		s2, err := store.Open(t.Context(), ccfg)
		require.NoError(t, err, "seed %d", seed)
		require.True(t, equalQueues(s2, reference(t, s2)), "seed %d: consume queues equal the log", seed)
		end := s2.CommitLog().MaxOffset()
		after := lookups(t, s2, res)
		for q, offs := range before {
			want := slices.DeleteFunc(slices.Clone(offs), func(o int64) bool { return o >= end })
			require.Equal(t, want, after[q], "seed %d: lookup %s", seed, q)
		}
		require.NoError(t, s2.Close())
		rep, err := verify.Run(t.Context(), crashed, "/store", verify.Options{})
		require.NoError(t, err)
		require.True(t, rep.Clean, "seed %d: gantry verify after recovery: %v", seed, rep.Errors)
	}
}
