package verify_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/broker/verify"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

const numMessages = 400

func TestCleanStore(t *testing.T) {
	ts := makeStore(t, numMessages)
	var lines []string
	rep, err := verify.Run(t.Context(), fsx.OS, ts.dir, verify.Options{Progress: func(s string) { lines = append(lines, s) }})
	require.NoError(t, err)
	require.True(t, rep.Clean, describe(rep))

	assert.Equal(t, ts.dir, rep.Dir)
	assert.Empty(t, rep.Errors)
	assert.Zero(t, rep.ErrorCount)
	assert.False(t, rep.AbortMarker)
	last := ts.results[len(ts.results)-1].PhysicalOffset
	assert.GreaterOrEqual(t, rep.CommitLog.Segments, int(last/segBytes)+1)
	assert.GreaterOrEqual(t, rep.CommitLog.Segments, 3, "the test wants several segments")
	assert.Equal(t, int64(segBytes), rep.CommitLog.SegmentBytes)
	assert.Zero(t, rep.CommitLog.MinOffset)
	assert.Equal(t, int64(numMessages), rep.CommitLog.Records)
	assert.Greater(t, rep.CommitLog.LastValidOffset, last)
	assert.Positive(t, rep.CommitLog.Bytes)
	assert.Equal(t, 6, rep.ConsumeQueues.Queues) // 3 topics × 2 queues
	assert.Greater(t, rep.ConsumeQueues.Files, 6, "the test wants queues of several files")
	assert.Equal(t, int64(numMessages), rep.ConsumeQueues.Entries)
	assert.Zero(t, rep.ConsumeQueues.Expired)
	assert.Equal(t, int64(3*numMessages), rep.Index.Entries) // 2 KEYS + UNIQ_KEY each
	assert.Greater(t, rep.Index.Files, 1)
	assert.Zero(t, rep.Index.Expired)
	assert.NotEmpty(t, lines)

	b, err := json.Marshal(rep)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"dir", "clean", "commitLog", "consumeQueues", "index", "errors", "errorCount", "durationMs"} {
		assert.Contains(t, m, k)
	}
	assert.Equal(t, []any{}, m["errors"])
	for _, k := range []string{"segments", "minOffset", "lastValidOffset", "records", "bytes"} {
		assert.Contains(t, m["commitLog"], k)
	}
}

func TestVerifyChangesNothing(t *testing.T) {
	ts := makeStore(t, numMessages)
	damaged := copyDir(t, ts.dir)
	mutateFile(t, segPath(damaged, 0), func(b []byte) { b[1000] ^= 0x10 })
	for _, dir := range []string{ts.dir, damaged} {
		before := treeHash(t, dir)
		rep := runVerify(t, dir)
		assert.Equal(t, dir == ts.dir, rep.Clean)
		assert.Equal(t, before, treeHash(t, dir), "verify changed %s", dir)
	}
}

func TestExpiredEntries(t *testing.T) {
	ts := makeStore(t, numMessages)
	// Retention deleted the first segment: entries pointing into it are
	// expired, not errors.
	require.NoError(t, os.Remove(segPath(ts.dir, 0)))
	rep := runVerify(t, ts.dir)
	require.True(t, rep.Clean, describe(rep))
	assert.Equal(t, int64(segBytes), rep.CommitLog.MinOffset)
	var below int64
	for _, r := range ts.results {
		if r.PhysicalOffset < segBytes {
			below++
		}
	}
	require.Positive(t, below)
	assert.Equal(t, int64(numMessages)-below, rep.CommitLog.Records)
	assert.Equal(t, below, rep.ConsumeQueues.Expired)
	assert.Equal(t, int64(numMessages), rep.ConsumeQueues.Entries)
	assert.Equal(t, 3*below, rep.Index.Expired)
}

func TestMaxErrors(t *testing.T) {
	ts := makeStore(t, numMessages)
	// Every consume-queue entry of a queue points one byte into its record.
	dir := filepath.Join(ts.dir, "consumequeue", "Orders", "0")
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, n := range names {
		mutateFile(t, filepath.Join(dir, n.Name()), func(b []byte) {
			for i := 7; i < len(b); i += 20 {
				if b[i-7]|b[i-6]|b[i-5]|b[i-4]|b[i-3]|b[i-2]|b[i-1]|b[i] != 0 || b[i+4] != 0 {
					b[i]++
				}
			}
		})
	}
	rep, err := verify.Run(t.Context(), fsx.OS, ts.dir, verify.Options{MaxErrors: 5})
	require.NoError(t, err)
	assert.False(t, rep.Clean)
	assert.Len(t, rep.Errors, 5)
	assert.Greater(t, rep.ErrorCount, 50)

	rep, err = verify.Run(t.Context(), fsx.OS, ts.dir, verify.Options{})
	require.NoError(t, err)
	assert.Len(t, rep.Errors, min(rep.ErrorCount, verify.DefaultMaxErrors))
}

func TestNotAStore(t *testing.T) {
	_, err := verify.Run(t.Context(), fsx.OS, filepath.Join(t.TempDir(), "missing"), verify.Options{})
	require.ErrorIs(t, err, os.ErrNotExist)

	_, err = verify.Run(t.Context(), fsx.OS, t.TempDir(), verify.Options{})
	require.ErrorIs(t, err, verify.ErrNotStore)

	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	_, err = verify.Run(t.Context(), fsx.OS, f, verify.Options{})
	require.ErrorIs(t, err, verify.ErrNotStore)
}

func TestEmptyStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, err := store.Open(t.Context(), storeConfig(t, dir))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	rep := runVerify(t, dir)
	require.True(t, rep.Clean, describe(rep))
	assert.Zero(t, rep.CommitLog.Records)
}

func TestCancelled(t *testing.T) {
	ts := makeStore(t, 50)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := verify.Run(ctx, fsx.OS, ts.dir, verify.Options{})
	require.ErrorIs(t, err, context.Canceled)
}

// TestScheduleTopicName keeps verify's copy of the schedule topic's name
// in step with the store's.
func TestScheduleTopicName(t *testing.T) {
	assert.Equal(t, store.ScheduleTopic, verify.ScheduleTopic)
}

// Every index entry the store writes passes: an IDEMPOTENCY_KEY of its
// own, and a parked record's de-duplication key under its REAL_TOPIC.
func TestIndexEntriesOfEveryKind(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, err := store.Open(t.Context(), storeConfig(t, dir))
	require.NoError(t, err)
	prop := func(kv ...string) message.Properties {
		var p message.Properties
		for i := 0; i+1 < len(kv); i += 2 {
			p = append(p, message.Property{Key: kv[i], Value: kv[i+1]})
		}
		return p
	}
	_, err = putMsgs(t.Context(), s, []*message.Message{
		{Topic: "Orders", Body: []byte("a"), Properties: prop(message.PropKeys, "k1", message.PropIdempotencyKey, "pay-1")},
		{Topic: store.ScheduleTopic, Body: []byte("b"), Properties: prop(message.PropRealTopic, "Orders", message.PropRealQueueID, "0",
			message.PropDelay, "3", message.PropIdempotencyKey, "pay-2")},
		{Topic: store.ScheduleTopic, Body: []byte("c"), Properties: prop(message.PropRealTopic, "Orders", message.PropRealQueueID, "0",
			message.PropDelay, "3", message.PropKeys, "k3")},
	})

	require.NoError(t, err)
	require.NoError(t, s.Close())
	rep := runVerify(t, dir)
	assert.True(t, rep.Clean, describe(rep))
}
