package broker_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/delivery"
	"github.com/gantrymq/gantry/broker/metadata"
)

// A slave that restores its master's metadata snapshot has the master's
// topics, groups and offsets (and keeps them across a restart), and its
// delivery state files; MetaVersion moves with a change.
func TestMetaSnapshotRestore(t *testing.T) {
	master := openBroker(t, testConfig(t))
	createTopic(t, master, "T", 4)
	require.NoError(t, master.PutGroup(metadata.DefaultSubscriptionGroup("G")))
	send(t, master, newMsg("T", 1, "a", ""), newMsg("T", 1, "b", ""))
	waitVisible(t, master, "T", 1, 2)
	v0 := master.MetaVersion()
	require.NoError(t, master.CommitOffset("G", "T", 1, 2))
	assert.NotEqual(t, v0, master.MetaVersion())
	v, snap, err := master.MetaSnapshot()
	require.NoError(t, err)
	assert.Equal(t, master.MetaVersion(), v)

	scfg := testConfig(t)
	slave := openBroker(t, scfg)
	require.NoError(t, slave.RestoreMeta(snap))
	tc, ok := slave.Topic("T")
	require.True(t, ok)
	assert.Equal(t, int32(4), tc.WriteQueueNums)
	_, ok = slave.Group("G")
	assert.True(t, ok)
	off, ok := slave.QueryOffset("G", "T", 1)
	assert.True(t, ok)
	assert.Equal(t, int64(2), off)
	assert.FileExists(t, filepath.Join(scfg.StorePathRootDir, "config", delivery.DLQStateFile))

	closeBroker(t, slave)
	again := openBroker(t, scfg)
	off, ok = again.QueryOffset("G", "T", 1)
	assert.True(t, ok)
	assert.Equal(t, int64(2), off)
}

// A damaged snapshot is refused with an error naming the problem and
// changes nothing.
func TestRestoreMetaRefusesBadSnapshots(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 2)
	for _, bad := range []string{`{"metadata":`, `{"metadata":{},"x":1}`, `{"metadata":{"topics":{"topicConfigTable":{}}}}`} {
		err := b.RestoreMeta([]byte(bad))
		require.Error(t, err, bad)
		_, ok := b.Topic("T")
		assert.True(t, ok, "a refused snapshot removed a topic: %s", bad)
	}
	err := b.RestoreMeta([]byte(`{"metadata":`))
	assert.ErrorIs(t, err, broker.ErrInvalidArgument)
}
