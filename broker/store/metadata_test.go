package store_test

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/internal/fsx"
)

// The store keeps its metadata in Root/config; a damaged file falls back to
// its .bak with a warning naming the file, and a store whose file and
// backup are both damaged refuses to open rather than start empty.
func TestMetadataFallsBackToBackup(t *testing.T) {
	mem := fsx.NewMemFS()
	cfg := testConfig(t, "/store", mem)
	s := openStore(t, cfg)
	require.NoError(t, s.Metadata().PutTopic(metadata.TopicConfig{TopicName: "Orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}))
	require.NoError(t, s.Metadata().CommitOffset("billing", "Orders", 2, 41))
	require.NoError(t, s.Metadata().Save())
	require.NoError(t, s.Metadata().CommitOffset("billing", "Orders", 2, 42))
	require.NoError(t, s.Metadata().PutTopic(metadata.TopicConfig{TopicName: "Orders", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}))
	require.NoError(t, s.Close())

	for _, file := range []string{"/store/config/topics.json", "/store/config/consumerOffset.json"} {
		require.NoError(t, mem.Mutate(file, func(b []byte) []byte { return b[:len(b)/2] }))
	}
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s = openStore(t, cfg)
	tc, ok := s.Metadata().Topic("Orders")
	assert.True(t, ok)
	assert.Equal(t, int32(4), tc.ReadQueueNums, "the backup holds the previous save")
	off, ok := s.Metadata().Offset("billing", "Orders", 2)
	assert.True(t, ok)
	assert.Equal(t, int64(41), off)
	assert.Contains(t, logs.String(), "/store/config/topics.json")
	assert.Contains(t, logs.String(), "/store/config/consumerOffset.json")
	var sources []metadata.Source
	for _, f := range s.Recovery().Metadata.Files {
		sources = append(sources, f.Source)
	}
	assert.Equal(t, []metadata.Source{metadata.SourceBackup, metadata.SourceNone, metadata.SourceBackup, metadata.SourceNone}, sources)
	require.NoError(t, s.Close())

	for _, file := range []string{"/store/config/topics.json", "/store/config/topics.json.bak"} {
		require.NoError(t, mem.Mutate(file, func(b []byte) []byte { return append(b[:len(b)/2], "garbage"...) }))
	}
	_, err := store.Open(t.Context(), cfg)
	require.ErrorIs(t, err, metadata.ErrDamaged)
	assert.Contains(t, err.Error(), "/store/config/topics.json")
	assert.Contains(t, err.Error(), "/store/config/topics.json.bak")
}
