package delivery

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

// A master's dead-letter state and timer progress, restored as files in a
// slave's directory, load there as the master has them; every change moves
// the version.
func TestStateSnapshotRestoresAsFiles(t *testing.T) {
	fsys := fsx.OS
	master, _, err := openDLQState(fsys, t.TempDir())
	require.NoError(t, err)
	v0 := master.version()
	master.recordResend("G", 3, 1_700_000_000_000)
	master.purge("G", []int64{0, 1, 5})
	v1 := master.version()
	assert.Greater(t, v1, v0)
	gen, dlq, err := master.snapshot()
	require.NoError(t, err)
	assert.Equal(t, v1, gen)

	timer := []byte(`{"lowWater": 4, "delivered": [[6, 9]]}`)
	dir := t.TempDir()
	require.NoError(t, RestoreStateFiles(fsys, dir, StateSnapshot{DLQ: dlq, Timer: timer}))
	slave, _, err := openDLQState(fsys, dir)
	require.NoError(t, err)
	assert.Equal(t, master.groups, slave.groups)
	got, err := fsx.ReadFile(fsys, filepath.Join(dir, TimerProgressFile))
	require.NoError(t, err)
	assert.Equal(t, timer, got)
}

// A bad snapshot writes nothing; a huge delivered range is checked without
// being expanded.
func TestRestoreStateFilesRefusesBadSnapshots(t *testing.T) {
	good, err := json.Marshal(dlqStateDoc{Groups: map[string]*dlqGroup{"G": {MinOffset: 2}}})
	require.NoError(t, err)
	cases := []struct {
		name string
		snap StateSnapshot
		want string
	}{
		{"bad dlq JSON", StateSnapshot{DLQ: []byte(`{"groups":`)}, "dead-letter state snapshot"},
		{"negative dlq offset", StateSnapshot{DLQ: []byte(`{"groups":{"G":{"minOffset":-1}}}`)}, "negative offset"},
		{"bad timer", StateSnapshot{DLQ: good, Timer: []byte(`{"lowWater":5,"delivered":[[3,4]]}`)}, "want ascending ranges"},
		{"unknown timer field", StateSnapshot{DLQ: good, Timer: []byte(`{"lowWater":5,"x":1}`)}, "timer progress snapshot"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			err := RestoreStateFiles(fsx.OS, dir, tc.snap)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NoFileExists(t, filepath.Join(dir, DLQStateFile))
			assert.NoFileExists(t, filepath.Join(dir, TimerProgressFile))
		})
	}
	huge := []byte(`{"lowWater":0,"delivered":[[1,9000000000000000000]]}`)
	require.NoError(t, RestoreStateFiles(fsx.OS, t.TempDir(), StateSnapshot{DLQ: good, Timer: huge}))
}
