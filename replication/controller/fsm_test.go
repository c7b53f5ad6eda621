package controller

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// applyCmd encodes cmd and applies it the way raft does.
func applyCmd(t *testing.T, f *FSM, cmd any) (GroupState, error) {
	t.Helper()
	b, err := encodeCommand(cmd)
	require.NoError(t, err)
	switch r := f.Apply(&raft.Log{Type: raft.LogCommand, Data: b}).(type) {
	case GroupState:
		return r, nil
	case error:
		return GroupState{}, r
	default:
		t.Fatalf("Apply returned %T", r)
		return GroupState{}, nil
	}
}

func mustApply(t *testing.T, f *FSM, cmds ...any) GroupState {
	t.Helper()
	var g GroupState
	for _, c := range cmds {
		var err error
		g, err = applyCmd(t, f, c)
		require.NoError(t, err, "%#v", c)
	}
	return g
}

func reg(id int64) RegisterReplica {
	return RegisterReplica{Group: "g", ID: id, Addr: "10.0.0." + string(rune('0'+id)) + ":10912"}
}

// threeReplicas: replicas 1, 2, 3 registered, 1 elected (epoch 1), then the
// in-sync set grown to {1, 2, 3} (in-sync epoch 2).
func threeReplicas(t *testing.T) *FSM {
	f := NewFSM()
	mustApply(t, f, reg(1), reg(2), reg(3), ElectMaster{Group: "g", Candidate: 1})
	g := mustApply(t, f, AlterInSync{Group: "g", MasterID: 1, MasterEpoch: 1, InSyncEpoch: 1, InSync: []int64{1, 2, 3}})
	require.Equal(t, []int64{1, 2, 3}, g.InSync)
	require.EqualValues(t, 2, g.InSyncEpoch)
	return f
}

// fsmCase applies cmds in order to the FSM setup returns; all but the
// last must succeed.
type fsmCase struct {
	name  string
	setup func(t *testing.T) *FSM
	cmds  []any
	err   error // of the last command
	check func(t *testing.T, g GroupState)
}

func TestFSMRegisterAlterDeath(t *testing.T) {
	runFSMCases(t, []fsmCase{
		{
			name:  "register creates the group without a master",
			setup: func(*testing.T) *FSM { return NewFSM() },
			cmds:  []any{reg(2), reg(1)},
			check: func(t *testing.T, g GroupState) {
				assert.Equal(t, []int64{1, 2}, ids(g.Replicas))
				assert.Zero(t, g.MasterID)
				assert.Zero(t, g.MasterEpoch)
				assert.Empty(t, g.InSync)
			},
		},
		{
			name:  "register again updates the address and revives",
			setup: threeReplicas,
			cmds:  []any{ReplicaDead{Group: "g", ID: 2}, RegisterReplica{Group: "g", ID: 2, Addr: "new:1", ServiceAddr: "new:2"}},
			check: func(t *testing.T, g GroupState) {
				r, _ := g.Replica(2)
				assert.Equal(t, Replica{ID: 2, Addr: "new:1", ServiceAddr: "new:2", Alive: true}, r)
			},
		},
		{name: "register refuses a long service address", setup: func(*testing.T) *FSM { return NewFSM() },
			cmds: []any{RegisterReplica{Group: "g", ID: 1, Addr: "a:1", ServiceAddr: strings.Repeat("a", MaxAddrLen+1)}}, err: ErrBadCommand},
		{name: "register refuses id 0", setup: func(*testing.T) *FSM { return NewFSM() },
			cmds: []any{RegisterReplica{Group: "g", ID: 0, Addr: "a:1"}}, err: ErrBadCommand},
		{name: "register refuses an empty group", setup: func(*testing.T) *FSM { return NewFSM() },
			cmds: []any{RegisterReplica{Group: "", ID: 1, Addr: "a:1"}}, err: ErrBadCommand},
		{name: "register refuses a long address", setup: func(*testing.T) *FSM { return NewFSM() },
			cmds: []any{RegisterReplica{Group: "g", ID: 1, Addr: strings.Repeat("a", MaxAddrLen+1)}}, err: ErrBadCommand},
		{
			name:  "the master shrinks the in-sync set",
			setup: threeReplicas,
			cmds:  []any{AlterInSync{Group: "g", MasterID: 1, MasterEpoch: 1, InSyncEpoch: 2, InSync: []int64{3, 1}}},
			check: func(t *testing.T, g GroupState) {
				assert.Equal(t, []int64{1, 3}, g.InSync)
				assert.EqualValues(t, 3, g.InSyncEpoch)
			},
		},
		{name: "alter from a replica that is not the master", setup: threeReplicas,
			cmds: []any{AlterInSync{Group: "g", MasterID: 2, MasterEpoch: 1, InSyncEpoch: 2, InSync: []int64{2}}}, err: ErrNotMaster},
		{name: "alter with no master", setup: threeReplicas,
			cmds: []any{ReplicaDead{Group: "g", ID: 1}, AlterInSync{Group: "g", MasterID: 0, MasterEpoch: 1, InSyncEpoch: 2, InSync: []int64{2}}}, err: ErrNotMaster},
		{name: "alter with a stale master epoch", setup: threeReplicas,
			cmds: []any{AlterInSync{Group: "g", MasterID: 1, MasterEpoch: 0, InSyncEpoch: 2, InSync: []int64{1}}}, err: ErrStaleEpoch},
		{name: "alter with a stale in-sync epoch", setup: threeReplicas,
			cmds: []any{AlterInSync{Group: "g", MasterID: 1, MasterEpoch: 1, InSyncEpoch: 1, InSync: []int64{1}}}, err: ErrStaleEpoch},
		{name: "alter without the master in the set", setup: threeReplicas,
			cmds: []any{AlterInSync{Group: "g", MasterID: 1, MasterEpoch: 1, InSyncEpoch: 2, InSync: []int64{2, 3}}}, err: ErrBadCommand},
		{name: "alter with a repeated replica", setup: threeReplicas,
			cmds: []any{AlterInSync{Group: "g", MasterID: 1, MasterEpoch: 1, InSyncEpoch: 2, InSync: []int64{1, 2, 2}}}, err: ErrBadCommand},
		{name: "alter with an unknown replica", setup: threeReplicas,
			cmds: []any{AlterInSync{Group: "g", MasterID: 1, MasterEpoch: 1, InSyncEpoch: 2, InSync: []int64{1, 7}}}, err: ErrUnknownReplica},
		{name: "alter with a dead replica", setup: threeReplicas,
			cmds: []any{ReplicaDead{Group: "g", ID: 3}, AlterInSync{Group: "g", MasterID: 1, MasterEpoch: 1, InSyncEpoch: 2, InSync: []int64{1, 3}}}, err: ErrReplicaDead},
		{name: "the old master's alter after an election is stale", setup: threeReplicas,
			cmds: []any{ReplicaDead{Group: "g", ID: 1}, ElectMaster{Group: "g"}, RegisterReplica{Group: "g", ID: 1, Addr: "a:1"},
				AlterInSync{Group: "g", MasterID: 1, MasterEpoch: 1, InSyncEpoch: 2, InSync: []int64{1}}}, err: ErrNotMaster},
		{name: "death of an unknown replica", setup: threeReplicas,
			cmds: []any{ReplicaDead{Group: "g", ID: 8}}, err: ErrUnknownReplica},
	})
}

func TestFSMElect(t *testing.T) {
	runFSMCases(t, []fsmCase{
		{
			name: "first election of a fresh group may pick any alive replica",
			setup: func(t *testing.T) *FSM {
				f := NewFSM()
				mustApply(t, f, reg(1), reg(2), ReplicaDead{Group: "g", ID: 1})
				return f
			},
			cmds: []any{ElectMaster{Group: "g"}},
			check: func(t *testing.T, g GroupState) {
				assert.EqualValues(t, 2, g.MasterID)
				assert.EqualValues(t, 1, g.MasterEpoch)
				assert.Equal(t, []int64{2}, g.InSync)
				assert.EqualValues(t, 1, g.InSyncEpoch)
				assert.Equal(t, reg(2).Addr, g.MasterAddr())
			},
		},
		{
			name:  "election with a live master and no candidate changes nothing",
			setup: threeReplicas,
			cmds:  []any{ElectMaster{Group: "g"}},
			check: func(t *testing.T, g GroupState) {
				assert.EqualValues(t, 1, g.MasterID)
				assert.EqualValues(t, 1, g.MasterEpoch)
				assert.Equal(t, []int64{1, 2, 3}, g.InSync)
			},
		},
		{
			name:  "master death clears the master and keeps the in-sync set",
			setup: threeReplicas,
			cmds:  []any{ReplicaDead{Group: "g", ID: 1}},
			check: func(t *testing.T, g GroupState) {
				assert.Zero(t, g.MasterID)
				assert.Empty(t, g.MasterAddr())
				assert.EqualValues(t, 1, g.MasterEpoch)
				assert.Equal(t, []int64{1, 2, 3}, g.InSync)
			},
		},
		{
			name:  "after the master's death the lowest alive in-sync replica wins",
			setup: threeReplicas,
			cmds:  []any{ReplicaDead{Group: "g", ID: 1}, ReplicaDead{Group: "g", ID: 2}, ElectMaster{Group: "g"}},
			check: func(t *testing.T, g GroupState) {
				assert.EqualValues(t, 3, g.MasterID)
				assert.EqualValues(t, 2, g.MasterEpoch)
				assert.Equal(t, []int64{3}, g.InSync)
				assert.EqualValues(t, 3, g.InSyncEpoch)
			},
		},
		{
			name: "a replica outside the in-sync set is not elected",
			setup: func(t *testing.T) *FSM {
				f := NewFSM()
				mustApply(t, f, reg(1), reg(2), ElectMaster{Group: "g", Candidate: 1}, ReplicaDead{Group: "g", ID: 1})
				return f
			},
			cmds: []any{ElectMaster{Group: "g"}},
			err:  ErrNoCandidate,
		},
		{
			name: "an unclean election picks a replica outside the in-sync set",
			setup: func(t *testing.T) *FSM {
				f := NewFSM()
				mustApply(t, f, reg(1), reg(2), ElectMaster{Group: "g", Candidate: 1}, ReplicaDead{Group: "g", ID: 1})
				return f
			},
			cmds: []any{ElectMaster{Group: "g", Unclean: true}},
			check: func(t *testing.T, g GroupState) {
				assert.EqualValues(t, 2, g.MasterID)
				assert.EqualValues(t, 2, g.MasterEpoch)
			},
		},
		{
			name: "a named candidate outside the in-sync set is refused",
			setup: func(t *testing.T) *FSM {
				f := NewFSM()
				mustApply(t, f, reg(1), reg(2), ElectMaster{Group: "g", Candidate: 1})
				return f
			},
			cmds: []any{ElectMaster{Group: "g", Candidate: 2}},
			err:  ErrNotInSync,
		},
		{
			name:  "a named in-sync candidate takes over from a live master",
			setup: threeReplicas,
			cmds:  []any{ElectMaster{Group: "g", Candidate: 3}},
			check: func(t *testing.T, g GroupState) {
				assert.EqualValues(t, 3, g.MasterID)
				assert.EqualValues(t, 2, g.MasterEpoch)
				assert.Equal(t, []int64{3}, g.InSync)
			},
		},
		{name: "a dead candidate is refused", setup: threeReplicas,
			cmds: []any{ReplicaDead{Group: "g", ID: 2}, ElectMaster{Group: "g", Candidate: 2}}, err: ErrReplicaDead},
		{name: "an unknown candidate is refused", setup: threeReplicas,
			cmds: []any{ElectMaster{Group: "g", Candidate: 9}}, err: ErrUnknownReplica},
		{name: "election in an unknown group", setup: threeReplicas,
			cmds: []any{ElectMaster{Group: "h"}}, err: ErrUnknownGroup},
		{name: "no alive replica at all", setup: threeReplicas,
			cmds: []any{ReplicaDead{Group: "g", ID: 1}, ReplicaDead{Group: "g", ID: 2}, ReplicaDead{Group: "g", ID: 3},
				ElectMaster{Group: "g", Unclean: true}}, err: ErrNoCandidate},
	})
}

func runFSMCases(t *testing.T, tests []fsmCase) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.setup(t)
			last := len(tt.cmds) - 1
			mustApply(t, f, tt.cmds[:last]...)
			before := f.Groups()
			g, err := applyCmd(t, f, tt.cmds[last])
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				assert.Equal(t, before, f.Groups(), "a refused command changes nothing")
				return
			}
			require.NoError(t, err)
			stored, ok := f.Group(g.Name)
			require.True(t, ok)
			assert.Equal(t, stored, g, "Apply returns the stored state")
			tt.check(t, g)
		})
	}
}

func ids(rs []Replica) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func TestFSMLimits(t *testing.T) {
	f := NewFSM()
	for id := int64(1); id <= MaxReplicas; id++ {
		mustApply(t, f, RegisterReplica{Group: "g", ID: id, Addr: "a:1"})
	}
	_, err := applyCmd(t, f, RegisterReplica{Group: "g", ID: MaxReplicas + 1, Addr: "a:1"})
	require.ErrorIs(t, err, ErrLimit)

	_, err = applyCmd(t, f, AlterInSync{Group: "g", InSync: make([]int64, MaxReplicas+1)})
	require.ErrorIs(t, err, ErrNotMaster, "the master check comes first")
}

func TestDecodeCommandRefusesBadInput(t *testing.T) {
	good, err := encodeCommand(reg(1))
	require.NoError(t, err)
	tests := []struct {
		name string
		data []byte
		err  error
	}{
		{"empty", nil, ErrBadCommand},
		{"header only half", []byte{commandVersion}, ErrBadCommand},
		{"future version", append([]byte{commandVersion + 1}, good[1:]...), ErrUnsupportedVersion},
		{"unknown kind", append([]byte{commandVersion, 99}, good[2:]...), ErrBadCommand},
		{"bad json", []byte{commandVersion, byte(kindRegister), '{'}, ErrBadCommand},
		{"oversized", append([]byte{commandVersion, byte(kindRegister)}, make([]byte, maxCommandSize)...), ErrBadCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFSM()
			r := f.Apply(&raft.Log{Type: raft.LogCommand, Data: tt.data})
			err, ok := r.(error)
			require.True(t, ok, "Apply returned %T", r)
			require.ErrorIs(t, err, tt.err)
			assert.Empty(t, f.Groups())
		})
	}
	_, err = encodeCommand("not a command")
	require.ErrorIs(t, err, ErrBadCommand)
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func TestFSMSnapshotRestore(t *testing.T) {
	f := threeReplicas(t)
	mustApply(t, f, RegisterReplica{Group: "other", ID: 5, Addr: "b:1"}, ReplicaDead{Group: "g", ID: 1})
	snap, err := f.Snapshot()
	require.NoError(t, err)
	// Changes after Snapshot do not reach the snapshot.
	mustApply(t, f, ElectMaster{Group: "g"})
	var sink memSink
	require.NoError(t, snap.Persist(&sink))
	snap.Release()

	restored := NewFSM()
	mustApply(t, restored, RegisterReplica{Group: "gone", ID: 1, Addr: "c:1"})
	require.NoError(t, restored.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))))
	g, ok := restored.Group("g")
	require.True(t, ok)
	assert.Zero(t, g.MasterID)
	assert.EqualValues(t, 1, g.MasterEpoch)
	assert.Equal(t, []int64{1, 2, 3}, g.InSync)
	_, ok = restored.Group("gone")
	assert.False(t, ok, "Restore replaces the whole state")
	assert.Len(t, restored.Groups(), 2)
}

func TestFSMRestoreRefusesBadSnapshots(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{"not json", "{"},
		{"future version", `{"version":2,"groups":[]}`},
		{"empty name", `{"version":1,"groups":[{"name":""}]}`},
		{"duplicate group", `{"version":1,"groups":[{"name":"a"},{"name":"a"}]}`},
		{"unsorted replicas", `{"version":1,"groups":[{"name":"a","replicas":[{"id":2},{"id":1}]}]}`},
		{"too many replicas", `{"version":1,"groups":[{"name":"a","replicas":[` + strings.Repeat(`{"id":1},`, MaxReplicas) + `{"id":1}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := threeReplicas(t)
			before := f.Groups()
			err := f.Restore(io.NopCloser(strings.NewReader(tt.data)))
			require.ErrorIs(t, err, ErrBadSnapshot)
			assert.Equal(t, before, f.Groups(), "a refused snapshot changes nothing")
		})
	}
	t.Run("oversized", func(t *testing.T) {
		old := maxSnapshotSize
		maxSnapshotSize = 1 << 10
		t.Cleanup(func() { maxSnapshotSize = old })
		f := NewFSM()
		err := f.Restore(io.NopCloser(io.LimitReader(zeros{}, 1<<20)))
		require.ErrorIs(t, err, ErrBadSnapshot)
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range []any{reg(1), AlterInSync{Group: "g", MasterID: 1, InSync: []int64{1, 2}}, ElectMaster{Group: "g", Unclean: true}, ReplicaDead{Group: "g", ID: 1}} {
		b, err := encodeCommand(c)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fsm := threeReplicas(t)
		fsm.Apply(&raft.Log{Type: raft.LogCommand, Data: data}) // must not panic
		for _, g := range fsm.Groups() {
			assert.LessOrEqual(t, len(g.Replicas), MaxReplicas)
			if g.MasterID != 0 {
				assert.Contains(t, g.InSync, g.MasterID, "the master is always in the in-sync set")
			}
		}
	})
}
