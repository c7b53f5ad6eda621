package store_test

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/internal/fsx"
)

// Damaged consume-queue entries are found by cross-checking them against
// the log, and the queue is rebuilt from the log: on read (position and
// size fields) or at start with CheckQueues (every field, tags code too).
func TestDamagedQueueEntriesRebuilt(t *testing.T) {
	tests := []struct {
		name        string
		field, bit  int // byte within the 20-byte entry, bit to flip
		checkOnOpen bool
	}{
		{"offset high bit, found on read", 2, 0, false},
		{"offset low bit, found on read", 7, 3, false},
		{"size, found on read", 11, 1, false},
		{"offset, found at start", 6, 5, true},
		{"size, found at start", 10, 4, true},
		{"tags code, found at start", 19, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := fsx.NewMemFS()
			cfg := testConfig(t, "/store", mem)
			s := openStore(t, cfg)
			putAll(t, s, 0, 1200) // 100 per queue
			require.NoError(t, s.Close())

			// Flip a bit in entry 70 of Orders/1 (in its second file: 64 entries per file).
			file := filepath.Join("/store/consumequeue/Orders/1", fsx.OffsetName(64*20))
			pos := (70-64)*20 + tt.field
			require.NoError(t, mem.Mutate(file, func(b []byte) []byte { b[pos] ^= 1 << tt.bit; return b }))

			cfg.CheckQueues = tt.checkOnOpen
			s = openStore(t, cfg)
			defer s.Close()
			if tt.checkOnOpen {
				assert.Equal(t, []string{"Orders/1"}, s.Recovery().RepairedQueues)
			}
			ref := reference(t, s)
			k := store.QueueKey{Topic: "Orders", QueueID: 1}
			var got []int64
			for off := int64(0); off < int64(len(ref[k])); {
				g, err := s.Get(k.Topic, k.QueueID, off, 32, 1<<20, nil)
				require.NoError(t, err)
				require.Equal(t, store.Found, g.Status)
				for _, r := range g.Records {
					got = append(got, int64(binary.BigEndian.Uint64(r.B[28:])))
				}
				g.Release()
				off = g.NextOffset
			}
			var want []int64
			for _, e := range ref[k] {
				want = append(want, e.Offset)
			}
			assert.Equal(t, want, got)
			assert.True(t, equalQueues(s, ref))
			assert.Equal(t, int64(1), s.QueueRepairs())
			kept, err := mem.ReadDir("/store/corrupt/consumequeue/Orders/1")
			require.NoError(t, err)
			assert.Len(t, kept, 1, "the damaged files are kept")
		})
	}
}
