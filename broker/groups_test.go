package broker_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
)

// DeleteGroup removes a group's config and, unless asked to keep them, its
// offsets (its broadcasting clients' too), and saves both at once; an
// unknown group or a bad name is an error naming it.
func TestDeleteGroup(t *testing.T) {
	cfg := testConfig(t)
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 2)
	createTopic(t, b, "U", 1)
	require.NoError(t, b.CommitOffset("G", "T", 0, 5))
	require.NoError(t, b.CommitOffset("G", "U", 0, 1))
	require.NoError(t, b.CommitClientOffset("G", "c1", "T", 1, 2))
	require.NoError(t, b.CommitOffset("Other", "T", 0, 3))

	require.NoError(t, b.DeleteGroup("G", true))
	_, ok := b.Store().Metadata().Group("G")
	assert.False(t, ok)
	_, ok = b.QueryOffset("G", "T", 0)
	assert.True(t, ok, "offsets kept")
	err := b.DeleteGroup("G", true)
	assert.True(t, errors.Is(err, broker.ErrGroupNotFound), "%v", err)

	require.NoError(t, b.DeleteGroup("G", false), "the offsets of a group without config are deleted")
	for _, q := range []struct {
		topic string
		id    int32
	}{{"T", 0}, {"U", 0}} {
		_, ok = b.QueryOffset("G", q.topic, q.id)
		assert.False(t, ok, "%s/%d", q.topic, q.id)
	}
	_, ok = b.QueryClientOffset("G", "c1", "T", 1)
	assert.False(t, ok, "broadcast offsets too")
	off, ok := b.QueryOffset("Other", "T", 0)
	assert.True(t, ok, "other groups keep theirs")
	assert.Equal(t, int64(3), off)
	saved, err := os.ReadFile(filepath.Join(cfg.StorePathRootDir, "config", metadata.OffsetsFile))
	require.NoError(t, err)
	assert.False(t, strings.Contains(string(saved), "@G"), "saved at once: %s", saved)

	err = b.DeleteGroup("G", false)
	assert.True(t, errors.Is(err, broker.ErrGroupNotFound), "%v", err)
	assert.Contains(t, err.Error(), `"G"`)
	err = b.DeleteGroup("a b", false)
	assert.True(t, errors.Is(err, broker.ErrInvalidArgument), "%v", err)
}

// A group is known by its config, its offsets or its live clients;
// PutGroup creates one, saved at once, and refuses a bad one.
func TestGroupKnownAndPutGroup(t *testing.T) {
	cfg := testConfig(t)
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)
	assert.False(t, b.GroupKnown("Admin"))
	require.NoError(t, b.PutGroup(metadata.DefaultSubscriptionGroup("Admin")))
	assert.True(t, b.GroupKnown("Admin"), "by its config")
	saved, err := os.ReadFile(filepath.Join(cfg.StorePathRootDir, "config", metadata.GroupsFile))
	require.NoError(t, err)
	assert.Contains(t, string(saved), `"Admin"`, "saved at once")
	require.ErrorIs(t, b.PutGroup(metadata.DefaultSubscriptionGroup("a b")), broker.ErrInvalidArgument)

	require.NoError(t, b.CommitOffset("G", "T", 0, 1))
	require.NoError(t, b.DeleteGroup("G", true))
	assert.True(t, b.GroupKnown("G"), "by its offsets")
	require.NoError(t, b.Heartbeat(broker.Heartbeat{ClientID: "c", Group: "H"}))
	require.NoError(t, b.DeleteGroup("H", true))
	assert.True(t, b.GroupKnown("H"), "by its live client")
	assert.False(t, b.GroupKnown("Nope"))
}
