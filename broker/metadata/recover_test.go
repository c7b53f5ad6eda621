package metadata_test

import (
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/internal/fsx"
)

// damage changes a file the way a disk or an operator might.
type damage struct {
	name string
	do   func(t *testing.T, path string)
}

func rewrite(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, f(b), 0o644))
}

func put(content string) func(t *testing.T, path string) {
	return func(t *testing.T, path string) { rewrite(t, path, func([]byte) []byte { return []byte(content) }) }
}

var damages = []damage{
	{"truncated", func(t *testing.T, path string) { rewrite(t, path, func(b []byte) []byte { return b[:len(b)/2] }) }},
	{"garbage byte", func(t *testing.T, path string) {
		rewrite(t, path, func(b []byte) []byte { b[len(b)/2] = 0; return b })
	}},
	{"empty", put("")},
	{"deleted", func(t *testing.T, path string) { require.NoError(t, os.Remove(path)) }},
	{"trailing data", func(t *testing.T, path string) { rewrite(t, path, func(b []byte) []byte { return append(b, "{}"...) }) }},
	{"unknown field", put(`{"somethingElse": {}}`)},
	{"null", put(`null`)},
}

// invalid holds, per file, valid JSON with values the file must not hold.
var invalid = map[string][]damage{
	metadata.TopicsFile: {
		{"bad topic name", put(`{"topicConfigTable": {"bad topic!": {"topicName": "bad topic!", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": false, "attributes": {}}}, "dataVersion": {"timestamp": 0, "counter": 0}}`)},
		{"key is not topicName", put(`{"topicConfigTable": {"A": {"topicName": "B", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": false, "attributes": {}}}, "dataVersion": {"timestamp": 0, "counter": 0}}`)},
		{"no queues", put(`{"topicConfigTable": {"A": {"topicName": "A", "readQueueNums": 0, "writeQueueNums": 8, "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": false, "attributes": {}}}, "dataVersion": {"timestamp": 0, "counter": 0}}`)},
	},
	metadata.GroupsFile: {
		{"retryMaxTimes", put(`{"subscriptionGroupTable": {"G": {"groupName": "G", "retryMaxTimes": 5000}}, "dataVersion": {"timestamp": 0, "counter": 0}}`)},
		{"key is not groupName", put(`{"subscriptionGroupTable": {"G": {"groupName": "H"}}, "dataVersion": {"timestamp": 0, "counter": 0}}`)},
	},
	metadata.OffsetsFile: {
		{"negative offset", put(`{"offsetTable": {"T@G": {"0": -5}}}`)},
		{"bad key", put(`{"offsetTable": {"TG": {"0": 5}}}`)},
		{"bad queue id", put(`{"offsetTable": {"T@G": {"x": 5}}}`)},
		{"client offset key without a client", put(`{"offsetTable": {}, "clientOffsetTable": {"T@G": {"0": 5}}}`)},
		{"client offset key with an empty client", put(`{"offsetTable": {}, "clientOffsetTable": {"T@G@": {"0": 5}}}`)},
		{"negative client offset", put(`{"offsetTable": {}, "clientOffsetTable": {"T@G@10.0.0.1@7": {"0": -1}}}`)},
	},
	metadata.DelayOffsetsFile: {
		{"level 0", put(`{"offsetTable": {"0": 5}}`)},
		{"negative offset", put(`{"offsetTable": {"1": -1}}`)},
	},
}

func TestOpenFallsBackToBackup(t *testing.T) {
	for _, file := range files {
		for _, d := range append(append([]damage(nil), damages...), invalid[file]...) {
			t.Run(file+"/"+d.name, func(t *testing.T) {
				dir := savedTwice(t)
				path := filepath.Join(dir, file)
				d.do(t, path)

				var logs syncBuffer
				cfg := testConfig(t, dir, nil)
				cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				m := open(t, cfg)

				wantSrc := allSources(metadata.SourceMain)
				wantSrc[file] = metadata.SourceBackup
				assert.Equal(t, wantSrc, sourcesOf(m.Report()))
				for _, r := range m.Report().Files {
					if r.Source == metadata.SourceBackup {
						assert.Equal(t, path, r.Path)
						assert.NotEmpty(t, r.Reason)
						assert.Contains(t, logs.String(), "err=")
					}
				}
				assert.Contains(t, logs.String(), "level=WARN")
				assert.Contains(t, logs.String(), path)
				v := same(2)
				v[fileIndex(file)] = 1
				assert.Equal(t, want(v), stateOf(m), "the damaged table holds the previous version")

				m2 := open(t, testConfig(t, dir, nil))
				assert.Equal(t, allSources(metadata.SourceMain), sourcesOf(m2.Report()), "the main file was rewritten")
				assert.Equal(t, want(v), stateOf(m2))
			})
		}
	}
}

func TestOpenRefusesWhenBothDamaged(t *testing.T) {
	truncate := damages[0].do
	tests := []struct {
		name  string
		setup func(t *testing.T, file string) string // returns the config dir
	}{
		{"both truncated", func(t *testing.T, file string) string {
			dir := savedTwice(t)
			truncate(t, filepath.Join(dir, file))
			truncate(t, filepath.Join(dir, file+".bak"))
			return dir
		}},
		{"main invalid, backup garbage", func(t *testing.T, file string) string {
			dir := savedTwice(t)
			invalid[file][0].do(t, filepath.Join(dir, file))
			damages[1].do(t, filepath.Join(dir, file+".bak"))
			return dir
		}},
		{"main garbage, no backup", func(t *testing.T, file string) string {
			dir := t.TempDir()
			m := open(t, testConfig(t, dir, nil))
			fill(t, m, 1)
			require.NoError(t, m.Close())
			truncate(t, filepath.Join(dir, file))
			return dir
		}},
		{"main deleted, backup empty", func(t *testing.T, file string) string {
			dir := savedTwice(t)
			require.NoError(t, os.Remove(filepath.Join(dir, file)))
			put("")(t, filepath.Join(dir, file+".bak"))
			return dir
		}},
	}
	for _, file := range files {
		for _, tt := range tests {
			t.Run(file+"/"+tt.name, func(t *testing.T) {
				dir := tt.setup(t, file)
				_, err := metadata.Open(testConfig(t, dir, nil))
				require.ErrorIs(t, err, metadata.ErrDamaged)
				var de *metadata.DamagedError
				require.ErrorAs(t, err, &de)
				assert.Equal(t, filepath.Join(dir, file), de.Path)
				assert.ErrorContains(t, err, filepath.Join(dir, file))
				assert.ErrorContains(t, err, filepath.Join(dir, file+".bak"))
			})
		}
	}
}

func TestOpenReportsEveryDamagedFile(t *testing.T) {
	dir := savedTwice(t)
	for _, f := range files[:2] {
		put("")(t, filepath.Join(dir, f))
		put("")(t, filepath.Join(dir, f+".bak"))
	}
	_, err := metadata.Open(testConfig(t, dir, nil))
	require.ErrorIs(t, err, metadata.ErrDamaged)
	assert.ErrorContains(t, err, filepath.Join(dir, files[0]))
	assert.ErrorContains(t, err, filepath.Join(dir, files[1]))
}

func TestOpenEmpty(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store", "config")
	m := open(t, testConfig(t, dir, nil))
	assert.DirExists(t, dir)
	assert.Equal(t, allSources(metadata.SourceNone), sourcesOf(m.Report()))
	for _, r := range m.Report().Files {
		assert.Empty(t, r.Reason)
	}
	assert.Equal(t, state{Topics: []metadata.TopicConfig{}, Groups: []metadata.SubscriptionGroup{},
		Offsets: map[int32]int64{}, ClientOffsets: map[int32]int64{}, Delays: map[int]int64{}}, stateOf(m))
	require.NoError(t, m.Close())
	for _, f := range files {
		assert.NoFileExists(t, filepath.Join(dir, f), "nothing changed, nothing written")
	}
}

// TestCrashDuringSave cuts the power at a random step of saving version k+1
// over version k, many times: reopening must find each table at k or k+1.
func TestCrashDuringSave(t *testing.T) {
	const dir, rounds = "/store/config", 300
	rng := rand.New(rand.NewPCG(1, 2))
	mem := fsx.NewMemFS()
	m := open(t, testConfig(t, dir, mem))
	fill(t, m, 0)
	require.NoError(t, m.Save())
	seen := map[versions]int{}
	for k := range rounds {
		fill(t, m, k+1)
		var crashed *fsx.MemFS
		step, crashAt := 0, rng.IntN(45)
		mem.SetHook(func(fsx.Op, string) {
			if step == crashAt {
				crashed = mem.Crash(rng)
			}
			step++
		})
		require.NoError(t, m.Save())
		mem.SetHook(nil)
		if crashed == nil {
			crashed = mem.Crash(rng)
		}

		m2, err := metadata.Open(testConfig(t, dir, crashed))
		require.NoError(t, err, "round %d, crash at step %d", k, crashAt)
		got := versionOf(m2)
		for i, v := range got {
			require.True(t, v == k || v == k+1, "round %d, crash at step %d: %s at version %d", k, crashAt, files[i], v)
		}
		fromV := [4]int{}
		for i, v := range got {
			fromV[i] = v - k
		}
		seen[versions(fromV)]++
		require.NoError(t, m2.Close())
	}
	assert.Len(t, seen, 5, "crashes landed before, between and after the tables' writes: %v", seen)
}

func TestSaveWriteFaults(t *testing.T) {
	file := metadata.OffsetsFile
	tests := []struct {
		name  string
		fault fsx.Fault
	}{
		{"ENOSPC writing the new file", fsx.Fault{Op: fsx.OpWrite, Path: file + ".tmp", Err: syscall.ENOSPC}},
		{"EIO syncing the new file", fsx.Fault{Op: fsx.OpSync, Path: file + ".tmp", Err: syscall.EIO}},
		{"EIO creating the new file", fsx.Fault{Op: fsx.OpOpen, Path: file + ".tmp", Err: syscall.EIO}},
		{"ENOSPC writing the backup", fsx.Fault{Op: fsx.OpWrite, Path: file + ".bak.tmp", Err: syscall.ENOSPC}},
		{"EIO renaming", fsx.Fault{Op: fsx.OpRename, Path: file, Err: syscall.EIO}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := savedTwice(t)
			path := filepath.Join(dir, file)
			v2, err := os.ReadFile(path)
			require.NoError(t, err)

			var faults fsx.Faults
			m := open(t, testConfig(t, dir, fsx.WithFaults(fsx.OS, &faults)))
			fill(t, m, 3)
			remove := faults.Add(tt.fault)
			err = m.Save()
			require.ErrorIs(t, err, tt.fault.Err)
			assert.ErrorContains(t, err, path)
			got, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			assert.Equal(t, string(v2), string(got), "the file still holds the previous version")

			remove()
			require.NoError(t, m.Save(), "the table stayed dirty and is retried")
			m2 := open(t, testConfig(t, dir, nil))
			assert.Equal(t, want(same(3)), stateOf(m2), "the other tables were saved by the failed Save, this one by the retry")
		})
	}
}
