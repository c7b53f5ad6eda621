package controller

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// FuzzCommandRoundTrip: any log entry decodes to a command or a typed error,
// and a decoded command survives another encoding unchanged.
func FuzzCommandRoundTrip(f *testing.F) {
	for _, c := range []any{reg(1), AlterInSync{Group: "g", MasterID: 1, InSync: []int64{1, 2}},
		ElectMaster{Group: "g", Candidate: 2, Unclean: true}, ReplicaDead{Group: "g", ID: 3}} {
		b, err := encodeCommand(c)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte{commandVersion, byte(kindAlterInSync), 'n', 'u', 'l', 'l'})
	f.Fuzz(func(t *testing.T, b []byte) {
		cmd, err := decodeCommand(b)
		if err != nil {
			if !errors.Is(err, ErrUnsupportedVersion) {
				require.ErrorIs(t, err, ErrBadCommand)
			}
			return
		}
		again, err := encodeCommand(cmd)
		if errors.Is(err, ErrLimit) {
			return // JSON escapes made it longer than the limit
		}
		require.NoError(t, err)
		cmd2, err := decodeCommand(again)
		require.NoError(t, err)
		require.Equal(t, cmd, cmd2)
	})
}

// FuzzFSMInvariants applies a command script to the FSM and checks after
// every command what elections and fencing rely on: a master is an alive
// registered replica inside the in-sync set; the in-sync set holds
// registered replicas only, sorted and without repeats; epochs never go
// back; a refused command changes nothing; a snapshot restores the same
// state.
func FuzzFSMInvariants(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 0, 3, 2, 1, 1, 7, 3, 1, 2, 0})
	f.Add([]byte{0, 1, 0, 2, 2, 0, 3, 1, 2, 0, 2, 128, 1, 3})
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > 128 {
			script = script[:128] // 64 commands on two groups of four replicas; longer scripts only slow the fuzzer
		}
		fsm := NewFSM()
		epochs := map[string][2]int32{}
		for len(script) >= 2 {
			cmd := scriptCommand(fsm, script[0], script[1])
			script = script[2:]
			b, err := encodeCommand(cmd)
			require.NoError(t, err)
			before := fsm.Groups()
			r := fsm.Apply(&raft.Log{Type: raft.LogCommand, Data: b})
			if _, refused := r.(error); refused {
				require.Equal(t, before, fsm.Groups(), "refused %#v changed the state", cmd)
			}
			for _, g := range fsm.Groups() {
				checkGroup(t, g, epochs[g.Name])
				epochs[g.Name] = [2]int32{g.MasterEpoch, g.InSyncEpoch}
			}
		}
		snap, err := fsm.Snapshot()
		require.NoError(t, err)
		var buf bytes.Buffer
		require.NoError(t, snap.Persist(&bufSink{Buffer: &buf}))
		restored := NewFSM()
		require.NoError(t, restored.Restore(io.NopCloser(&buf)))
		require.Equal(t, fsm.Groups(), restored.Groups())
	})
}

// scriptCommand turns two script bytes into a command on one of two
// groups, with ids 1..4 and epochs near the current ones, so most
// commands are valid and the rest are near misses.
func scriptCommand(fsm *FSM, op, arg byte) any {
	group := []string{"g", "h"}[op>>7]
	id := int64(arg&3) + 1
	g, _ := fsm.Group(group)
	switch op & 3 {
	case 0:
		return RegisterReplica{Group: group, ID: id, Addr: "a:1"}
	case 1:
		return ReplicaDead{Group: group, ID: id}
	case 2:
		var cand int64
		if arg&4 != 0 {
			cand = id
		}
		return ElectMaster{Group: group, Candidate: cand, Unclean: arg&8 != 0}
	default:
		c := AlterInSync{Group: group, MasterID: g.MasterID, MasterEpoch: g.MasterEpoch, InSyncEpoch: g.InSyncEpoch}
		if op&4 != 0 {
			c.MasterID = id
		}
		if op&8 != 0 {
			c.InSyncEpoch--
		}
		for i := range int64(4) {
			if arg&(16<<i) != 0 {
				c.InSync = append(c.InSync, i+1)
			}
		}
		return c
	}
}

func checkGroup(t *testing.T, g GroupState, prev [2]int32) {
	t.Helper()
	require.True(t, slices.IsSortedFunc(g.Replicas, func(a, b Replica) int { return int(a.ID - b.ID) }))
	require.True(t, slices.IsSorted(g.InSync))
	require.Len(t, slices.Compact(slices.Clone(g.InSync)), len(g.InSync), "in-sync set %v repeats", g.InSync)
	for _, id := range g.InSync {
		_, ok := g.Replica(id)
		require.True(t, ok, "in-sync replica %d unknown", id)
	}
	if g.MasterID != 0 {
		m, ok := g.Replica(g.MasterID)
		require.True(t, ok && m.Alive, "master %d not an alive replica", g.MasterID)
		require.Contains(t, g.InSync, g.MasterID)
		require.Positive(t, g.MasterEpoch)
	}
	require.GreaterOrEqual(t, g.MasterEpoch, prev[0])
	require.GreaterOrEqual(t, g.InSyncEpoch, prev[1])
}

// bufSink is a raft.SnapshotSink writing to a buffer.
type bufSink struct{ *bytes.Buffer }

func (bufSink) ID() string    { return "fuzz" }
func (bufSink) Cancel() error { return nil }
func (bufSink) Close() error  { return nil }
