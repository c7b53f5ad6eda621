package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/broker/verify"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// makeStore writes n messages with the real store and closes it.
func makeStore(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := store.Open(t.Context(), store.Config{
		Root: dir, QueueEntriesPerFile: 64, IndexSlots: 101, IndexEntries: 400,
		Log:    commitlog.Config{SegmentBytes: 64 << 10, CleanInterval: -1},
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	for i := range n {
		batch, err := s.Encode([]*message.Message{{
			Topic: []string{"Orders", "Payments"}[i%2], QueueID: int32(i % 3),
			Body: fmt.Appendf(nil, "body-%d-%s", i, strings.Repeat("y", 200)),
			Properties: message.Properties{
				{Key: message.PropTags, Value: "Tag" + string(rune('A'+i%3))},
				{Key: message.PropKeys, Value: fmt.Sprintf("k%d", i)},
			},
		}})
		require.NoError(t, err)
		_, err = s.PutBatch(t.Context(), batch)
		batch.Release()
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	return dir
}

func decodeReport(t *testing.T, out string) verify.Report {
	t.Helper()
	var rep verify.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	return rep
}

func TestVerifyClean(t *testing.T) {
	dir := makeStore(t, 300)
	code, out, errOut := execute(t, "verify", dir)
	require.Equal(t, exitOK, code, errOut)
	rep := decodeReport(t, out)
	assert.True(t, rep.Clean)
	assert.Equal(t, int64(300), rep.CommitLog.Records)
	assert.Equal(t, int64(300), rep.ConsumeQueues.Entries)
	assert.Equal(t, int64(600), rep.Index.Entries)
	assert.Equal(t, fmt.Sprintf("verify %s: clean, 300 records, 300 queue entries, 600 index entries\n", dir), errOut)
	assert.True(t, strings.HasPrefix(out, "{\n  \"dir\": "), "indented JSON: %s", out[:min(len(out), 40)])
}

func TestVerifyProblems(t *testing.T) {
	dir := makeStore(t, 300)
	seg := filepath.Join(dir, "commitlog", fsx.OffsetName(0))
	b, err := os.ReadFile(seg)
	require.NoError(t, err)
	b[100] ^= 0xFF // inside the first record's body
	require.NoError(t, os.WriteFile(seg, b, 0o644))

	code, out, errOut := execute(t, "verify", dir)
	require.Equal(t, exitProblems, code, errOut)
	rep := decodeReport(t, out)
	require.False(t, rep.Clean)
	require.NotEmpty(t, rep.Errors)
	first := rep.Errors[0]
	assert.Equal(t, verify.KindRecord, first.Kind)
	assert.Equal(t, seg, first.File)
	assert.Zero(t, first.Offset)
	assert.True(t, strings.HasPrefix(errOut, fmt.Sprintf("verify %s: %d errors; first: %s at offset 0: ", dir, rep.ErrorCount, seg)), errOut)
	assert.Equal(t, 1, strings.Count(errOut, "\n"))

	code, out, errOut = execute(t, "verify", "--quiet", dir)
	assert.Equal(t, exitProblems, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "errors; first: ")

	code, out, _ = execute(t, "verify", "--max-errors", "0", dir)
	assert.Equal(t, exitProblems, code)
	rep = decodeReport(t, out)
	assert.Empty(t, rep.Errors)
	assert.Positive(t, rep.ErrorCount)

	code, out, _ = execute(t, "verify", "--max-errors", "1", dir)
	assert.Equal(t, exitProblems, code)
	assert.Len(t, decodeReport(t, out).Errors, 1)
}

func TestVerifyMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	code, out, errOut := execute(t, "verify", dir)
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out)
	assert.Equal(t, fmt.Sprintf("gantry: verify: cannot read store directory %s: no such file or directory\n", dir), errOut)

	code, _, errOut = execute(t, "verify", t.TempDir())
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "not a store directory")
	assert.Contains(t, errOut, "give the broker's storePathRootDir", "it says what it expects")
	assert.Contains(t, errOut, "the data directory of gantry dev")
}

// gantry verify takes the data directory of gantry dev (./gantry-data,
// the store below it in store/) as well as the store itself.
func TestVerifyDevDataDir(t *testing.T) {
	dir := makeStore(t, 30)
	code, out, errOut := execute(t, "verify", filepath.Dir(dir))
	require.Equal(t, exitOK, code, errOut)
	rep := decodeReport(t, out)
	assert.True(t, rep.Clean)
	assert.Equal(t, dir, rep.Dir, "the store it checked")
	assert.Equal(t, int64(30), rep.CommitLog.Records)
	assert.Contains(t, errOut, "verify "+dir+": clean")
}

func TestVerifyProgress(t *testing.T) {
	dir := makeStore(t, 20)
	code, _, errOut := execute(t, "verify", "--quiet", "--verbose", dir)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, errOut, "commitlog: scanning ")
	assert.Contains(t, errOut, "consumequeue: Orders/0")
}

// TestVerifyDamageExitCode checks the exit status and the summary line for
// damage in each part of the store.
func TestVerifyDamageExitCode(t *testing.T) {
	tests := []struct {
		name   string
		file   func(dir string) string
		damage func(b []byte) []byte
		kind   verify.Kind
	}{
		{"record", func(dir string) string { return filepath.Join(dir, "commitlog", fsx.OffsetName(0)) },
			func(b []byte) []byte { b[5000] ^= 1; return b }, verify.KindRecord},
		{"truncated segment", func(dir string) string { return filepath.Join(dir, "commitlog", fsx.OffsetName(0)) },
			func(b []byte) []byte { return b[:10_000] }, verify.KindSegment},
		{"consume queue", func(dir string) string { return filepath.Join(dir, "consumequeue", "Orders", "0", fsx.OffsetName(0)) },
			func(b []byte) []byte { b[20+7] ^= 4; return b }, verify.KindConsumeQueue},
		{"index", func(dir string) string {
			names, _ := os.ReadDir(filepath.Join(dir, "index"))
			return filepath.Join(dir, "index", names[0].Name())
		}, func(b []byte) []byte { b[40+101*4+20*3+11] ^= 1; return b }, verify.KindIndex},
	}
	clean := makeStore(t, 300)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			require.NoError(t, os.CopyFS(dir, os.DirFS(clean)))
			p := tt.file(dir)
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, tt.damage(b), 0o644))

			code, out, errOut := execute(t, "verify", dir)
			require.Equal(t, exitProblems, code, errOut)
			rep := decodeReport(t, out)
			require.NotEmpty(t, rep.Errors)
			assert.Equal(t, tt.kind, rep.Errors[0].Kind)
			assert.Equal(t, p, rep.Errors[0].File)
			assert.Contains(t, errOut, "; first: "+p+" at offset ")
		})
	}
}
