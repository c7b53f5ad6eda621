package store_test

import (
	"encoding/json"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

func readCheckpoint(t *testing.T, fsys fsx.FS) map[string]any {
	t.Helper()
	b, err := fsx.ReadFile(fsys, "/store/dispatch.json")
	require.NoError(t, err)
	var cp map[string]any
	require.NoError(t, json.Unmarshal(b, &cp))
	return cp
}

func writeCheckpoint(t *testing.T, fsys fsx.FS, cp map[string]any) {
	t.Helper()
	b, err := json.Marshal(cp)
	require.NoError(t, err)
	require.NoError(t, fsx.WriteFileAtomic(fsys, "/store/dispatch.json", b))
}

// Close marks the dispatch checkpoint clean and the next Open trusts every
// queue's recorded end; Open writes it again, not clean, before it changes
// a queue, so a crash after it is recovered by scanning.
func TestCleanStopTrustedOnce(t *testing.T) {
	mem := fsx.NewMemFS()
	cfg := testConfig(t, "/store", mem)
	s := openStore(t, cfg)
	putAll(t, s, 0, 300)
	require.NoError(t, s.Close())
	assert.Equal(t, true, readCheckpoint(t, mem)["clean"])

	s = openStore(t, cfg)
	assert.Equal(t, len(s.Queues()), s.TrustedQueues(), "every queue's end taken from the clean checkpoint")
	assert.Nil(t, readCheckpoint(t, mem)["clean"], "no longer clean once open")
	require.True(t, equalQueues(s, reference(t, s)))
	putAll(t, s, 300, 100)
	waitDispatched(t, s)
	crashed := mem.Crash(rand.New(rand.NewPCG(1, 2)))
	require.NoError(t, s.Close())

	s = openStore(t, testConfig(t, "/store", crashed))
	defer s.Close()
	assert.Zero(t, s.TrustedQueues(), "after a crash nothing is trusted")
	require.True(t, equalQueues(s, reference(t, s)))
}

// A queue holding fewer entries than the checkpoint recorded (a hint past
// what its files hold), clean or not, makes Open rebuild the queues from
// the log.
func TestCheckpointHintPastFilesRebuilds(t *testing.T) {
	for _, clean := range []bool{false, true} {
		t.Run(map[bool]string{false: "after a crash", true: "after a clean stop"}[clean], func(t *testing.T) {
			mem := fsx.NewMemFS()
			cfg := testConfig(t, "/store", mem)
			s := openStore(t, cfg)
			putAll(t, s, 0, 300)
			require.NoError(t, s.Close())
			cp := readCheckpoint(t, mem)
			queues := cp["queues"].(map[string]any)
			queues["Orders/1"] = queues["Orders/1"].(float64) + 7
			if clean {
				cp["clean"] = true
			} else {
				delete(cp, "clean")
			}
			writeCheckpoint(t, mem, cp)

			s = openStore(t, cfg)
			defer s.Close()
			r := s.Recovery()
			assert.True(t, r.Rebuilt)
			assert.Contains(t, r.RebuildReason, "Orders/1")
			require.True(t, equalQueues(s, reference(t, s)))
			minOff, maxOff := s.QueueOffsets("Orders", 1)
			assert.Zero(t, minOff)
			assert.Equal(t, int64(queues["Orders/1"].(float64)-7), maxOff)
		})
	}
}

// A torn entry after the checkpoint's hint and garbage in a queue file's
// reserved space after its end (real files): the queue ends at the torn
// entry, the garbage is zeroed, and re-dispatch from the checkpoint
// restores every entry.
func TestDamageAfterHintRecovered(t *testing.T) {
	mem := fsx.NewMemFS()
	cfg := testConfig(t, "/store", mem)
	s := openStore(t, cfg)
	putAll(t, s, 0, 120) // Orders/1: 10 entries, in its first file (64 per file)
	require.NoError(t, s.Close())
	cp := readCheckpoint(t, mem)
	delete(cp, "clean")
	queues := cp["queues"].(map[string]any)
	require.Equal(t, float64(10), queues["Orders/1"])
	queues["Orders/1"] = float64(6)
	cp["dispatched"] = float64(0) // the checkpoint of an earlier flush: everything is dispatched again
	writeCheckpoint(t, mem, cp)
	file := "/store/consumequeue/Orders/1/" + fsx.OffsetName(0)
	require.NoError(t, mem.Mutate(file, func(b []byte) []byte {
		copy(b[8*20+8:], []byte{0, 0, 0, 0}) // entry 8: size 0, torn
		copy(b[40*20:], "GARBAGE")           // after the end
		return b
	}))

	s = openStore(t, cfg)
	defer s.Close()
	require.True(t, equalQueues(s, reference(t, s)))
	_, maxOff := s.QueueOffsets("Orders", 1)
	assert.Equal(t, int64(10), maxOff)
	b, err := fsx.ReadFile(mem, file)
	require.NoError(t, err)
	assert.Equal(t, make([]byte, 64*20-10*20), b[10*20:], "nothing after the end")
}

// A start after a clean stop on a disk that cannot take the rewritten
// checkpoint removes the clean one instead: a crash then rebuilds.
func TestCleanCheckpointRemovedWhenNotRewritable(t *testing.T) {
	mem := fsx.NewMemFS()
	faults := &fsx.Faults{}
	cfg := testConfig(t, "/store", fsx.WithFaults(mem, faults))
	s := openStore(t, cfg)
	putAll(t, s, 0, 50)
	require.NoError(t, s.Close())
	remove := faults.Add(fsx.Fault{Op: fsx.OpWrite, Path: "dispatch.json", Err: syscall.ENOSPC})
	s = openStore(t, cfg)
	assert.False(t, fsx.Exists(mem, "/store/dispatch.json"), "no clean checkpoint left")
	remove()
	require.True(t, equalQueues(s, reference(t, s)))
	require.NoError(t, s.Close())
}
