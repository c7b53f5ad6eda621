package store_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/broker/verify"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// A store whose log is damaged in the middle opens with SkipCorrupt, and
// its queues step over the messages lost in the damaged range: every other
// message is read, in order, whether the queues were dispatched before the
// damage (their entries point into the range) or are rebuilt from the log
// (the lost offsets get entries in the range), instead of failing the
// first read of such a queue ("append would leave a gap") or refusing to
// open for a rebuild.
func TestSkipCorruptQueuesStepOverLostMessages(t *testing.T) {
	for _, rebuild := range []bool{false, true} {
		name := map[bool]string{false: "queues dispatched", true: "queues rebuilt"}[rebuild]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(t, dir, nil)
			s := openStore(t, cfg)
			res := putAll(t, s, 0, 600)
			require.NoError(t, s.Close())

			// Damage one record of the last segment (recovery checks the
			// segment holding the checkpoint onward) that valid ones follow,
			// and make the start a crash's.
			const segBytes = 64 << 10
			lastSeg := res[len(res)-1].PhysicalOffset / segBytes
			// A record followed by another of its queue in the segment.
			victim := len(res) - 2
			for ; msg(victim).Topic != msg(len(res)-1).Topic || msg(victim).QueueID != msg(len(res)-1).QueueID; victim-- {
			}
			require.Equal(t, lastSeg, res[victim].PhysicalOffset/segBytes, "valid records follow in its segment")
			v := res[victim]
			seg := filepath.Join(dir, "commitlog", fsx.OffsetName(lastSeg*segBytes))
			b, err := os.ReadFile(seg)
			require.NoError(t, err)
			copy(b[v.PhysicalOffset%segBytes+90:], "DAMAGED!")
			require.NoError(t, os.WriteFile(seg, b, 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "abort"), nil, 0o644))
			if rebuild {
				require.NoError(t, os.RemoveAll(filepath.Join(dir, "consumequeue")))
				require.NoError(t, os.Remove(filepath.Join(dir, "dispatch.json")))
			}

			_, err = store.Open(t.Context(), cfg)
			require.ErrorIs(t, err, commitlog.ErrCorrupt)
			cfg.Log.SkipCorrupt = true
			s = openStore(t, cfg)
			vm := msg(victim)
			lostQueue := store.QueueKey{Topic: vm.Topic, QueueID: vm.QueueID}
			got := map[store.QueueKey][]int64{}
			for _, k := range s.Queues() {
				minOff, maxOff := s.QueueOffsets(k.Topic, k.QueueID)
				for off := minOff; off < maxOff; {
					g, err := s.Get(k.Topic, k.QueueID, off, 7, 1<<20, nil)
					require.NoError(t, err, "queue %s offset %d", k, off)
					require.Greater(t, g.NextOffset, off, "queue %s moves on", k)
					for _, r := range g.Records {
						got[k] = append(got[k], message.QueueOffsetOf(r.B))
					}
					g.Release()
					off = g.NextOffset
				}
			}
			want := map[store.QueueKey][]int64{}
			for i, r := range res {
				k := store.QueueKey{Topic: msg(i).Topic, QueueID: msg(i).QueueID}
				if i != victim {
					want[k] = append(want[k], r.QueueOffset)
				}
			}
			assert.Equal(t, want, got, "every message but the lost one, in order")
			_, err = s.MessageByQueueOffset(lostQueue.Topic, lostQueue.QueueID, v.QueueOffset)
			require.ErrorIs(t, err, store.ErrLost)
			more := putAll(t, s, len(res), 20)
			assert.NotEmpty(t, more)
			require.NoError(t, s.Close())

			rep, err := verify.Run(t.Context(), fsx.OS, dir, verify.Options{})
			require.NoError(t, err)
			assert.True(t, rep.Clean, "%v", rep.Errors)
			assert.Equal(t, int64(1), rep.ConsumeQueues.Lost)
		})
	}
}
