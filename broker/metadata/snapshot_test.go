package metadata_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/metadata"
)

// A snapshot restored on another broker's metadata gives it the same
// state, saved: it survives that broker's restart.
func TestSnapshotRestore(t *testing.T) {
	master := open(t, testConfig(t, filepath.Join(t.TempDir(), "config"), nil))
	fill(t, master, 5)
	v, snap, err := master.Snapshot()
	require.NoError(t, err)
	assert.Equal(t, master.Version(), v)

	dir := filepath.Join(t.TempDir(), "config")
	slave := open(t, testConfig(t, dir, nil))
	fill(t, slave, 9) // replaced whole, not merged
	require.NoError(t, slave.CommitOffset("GroupB", "TopicB", 0, 4))
	require.NoError(t, slave.Restore(snap))
	assert.Equal(t, want(same(5)), stateOf(slave))
	assert.Empty(t, slave.Offsets("GroupB", "TopicB"))
	require.NoError(t, slave.Close())

	again := open(t, testConfig(t, dir, nil))
	assert.Equal(t, want(same(5)), stateOf(again))
	require.NoError(t, again.Close())
}

// Version moves with every change of any table, and not otherwise.
func TestSnapshotVersion(t *testing.T) {
	m := open(t, testConfig(t, filepath.Join(t.TempDir(), "config"), nil))
	v0 := m.Version()
	assert.Equal(t, v0, m.Version())
	require.NoError(t, m.CommitOffset("G", "T", 0, 1))
	v1 := m.Version()
	assert.Greater(t, v1, v0)
	require.NoError(t, m.SetDelayOffset(2, 9))
	assert.Greater(t, m.Version(), v1)
	require.NoError(t, m.Close())
}

// A snapshot with a document missing or invalid changes nothing.
func TestSnapshotRestoreRefusesBadDocuments(t *testing.T) {
	src := open(t, testConfig(t, filepath.Join(t.TempDir(), "config"), nil))
	fill(t, src, 5)
	_, good, err := src.Snapshot()
	require.NoError(t, err)
	cases := []struct {
		name string
		edit func(*metadata.Snapshot)
		want string
	}{
		{"no topics", func(s *metadata.Snapshot) { s.Topics = nil }, "snapshot has no topics document"},
		{"bad JSON", func(s *metadata.Snapshot) { s.Groups = json.RawMessage(`{"subscriptionGroupTable":`) }, "snapshot's groups document"},
		{"unknown field", func(s *metadata.Snapshot) { s.Delays = json.RawMessage(`{"offsetTable":{},"x":1}`) }, "snapshot's delays document"},
		{"bad value", func(s *metadata.Snapshot) { s.Delays = json.RawMessage(`{"offsetTable":{"0":5}}`) }, "delay level 0"},
		{"bad offsets", func(s *metadata.Snapshot) { s.Offsets = json.RawMessage(`{"offsetTable":{"T@G":{"0":-2}}}`) }, "snapshot's offsets document"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := open(t, testConfig(t, filepath.Join(t.TempDir(), "config"), nil))
			fill(t, m, 9)
			v := m.Version()
			snap := good
			tc.edit(&snap)
			err := m.Restore(snap)
			require.ErrorIs(t, err, metadata.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, want(same(9)), stateOf(m))
			assert.Equal(t, v, m.Version())
			require.NoError(t, m.Close())
		})
	}
	require.NoError(t, src.Close())
}

// Restoring a snapshot a slave holds already changes no table: nothing is
// saved again and the version stays; a change to one table changes only it.
func TestSnapshotRestoreSkipsUnchangedTables(t *testing.T) {
	master := open(t, testConfig(t, filepath.Join(t.TempDir(), "config"), nil))
	fill(t, master, 5)
	_, snap, err := master.Snapshot()
	require.NoError(t, err)
	slave := open(t, testConfig(t, filepath.Join(t.TempDir(), "config"), nil))
	require.NoError(t, slave.Restore(snap))
	v, topics := slave.Version(), slave.TopicsVersion()
	require.NoError(t, slave.Restore(snap))
	assert.Equal(t, v, slave.Version())

	require.NoError(t, master.CommitOffset("GroupA", "TopicA", 0, 99))
	_, snap, err = master.Snapshot()
	require.NoError(t, err)
	require.NoError(t, slave.Restore(snap))
	assert.Equal(t, v+1, slave.Version(), "only the offsets table changed")
	assert.Equal(t, topics, slave.TopicsVersion())
	off, ok := slave.Offset("GroupA", "TopicA", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(99), off)
	require.NoError(t, master.Close())
	require.NoError(t, slave.Close())
}
