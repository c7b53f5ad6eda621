package metadata_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/internal/fsx"
)

func TestLoadSources(t *testing.T) {
	good, other, garbage := `{"v": 1}`, `{"v": 2}`, `{"v": 1`
	tests := []struct {
		name       string
		files      map[string]string // base name -> content
		wantSource metadata.Source
		wantValue  string // what into accepted
		wantErr    bool
	}{
		{"neither", nil, metadata.SourceNone, "", false},
		{"main", map[string]string{"f.json": good, "f.json.bak": other}, metadata.SourceMain, good, false},
		{"backup only", map[string]string{"f.json.bak": good}, metadata.SourceBackup, good, false},
		{"garbage main", map[string]string{"f.json": garbage, "f.json.bak": good}, metadata.SourceBackup, good, false},
		{"empty main", map[string]string{"f.json": " \n", "f.json.bak": good}, metadata.SourceBackup, good, false},
		{"rejected main", map[string]string{"f.json": `{"v": -1}`, "f.json.bak": good}, metadata.SourceBackup, good, false},
		{"trailing data", map[string]string{"f.json": good + "{}", "f.json.bak": other}, metadata.SourceBackup, other, false},
		{"leftover tmp ignored", map[string]string{"f.json.tmp": good, "f.json.bak.tmp": good}, metadata.SourceNone, "", false},
		{"main and garbage tmp", map[string]string{"f.json": good, "f.json.tmp": garbage}, metadata.SourceMain, good, false},
		{"garbage main, no backup", map[string]string{"f.json": garbage}, "", "", true},
		{"no main, garbage backup", map[string]string{"f.json.bak": garbage}, "", "", true},
		{"both garbage", map[string]string{"f.json": garbage, "f.json.bak": garbage}, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
			}
			var accepted string
			src, err := metadata.Load(fsx.OS, filepath.Join(dir, "f.json"), func(b []byte) error {
				var v struct{ V int }
				if err := json.Unmarshal(b, &v); err != nil {
					return err
				}
				if v.V < 0 {
					return errors.New("negative")
				}
				accepted = string(b)
				return nil
			})
			if tt.wantErr {
				require.ErrorIs(t, err, metadata.ErrDamaged)
				assert.ErrorContains(t, err, filepath.Join(dir, "f.json"))
				assert.ErrorContains(t, err, filepath.Join(dir, "f.json.bak"))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantSource, src)
			assert.Equal(t, tt.wantValue, accepted)
		})
	}
}

func TestSaveBackupRules(t *testing.T) {
	tests := []struct {
		name, main, bak string
		wantBak         string // "" means no backup file
	}{
		{"no main", "", "", ""},
		{"good main", `{"v":1}`, `{"v":0}`, `{"v":1}`},
		{"garbage main keeps good backup", `{"v":`, `{"v":0}`, `{"v":0}`},
		{"unchanged main keeps backup", `{"v":2}`, `{"v":0}`, `{"v":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.json")
			if tt.main != "" {
				require.NoError(t, os.WriteFile(path, []byte(tt.main), 0o644))
			}
			if tt.bak != "" {
				require.NoError(t, os.WriteFile(metadata.BackupPath(path), []byte(tt.bak), 0o644))
			}
			require.NoError(t, metadata.Save(fsx.OS, path, []byte(`{"v":2}`)))
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.JSONEq(t, `{"v":2}`, string(b))
			if tt.wantBak == "" {
				assert.NoFileExists(t, metadata.BackupPath(path))
				return
			}
			b, err = os.ReadFile(metadata.BackupPath(path))
			require.NoError(t, err)
			assert.Equal(t, tt.wantBak, string(b))
		})
	}
}

// FuzzOpen puts arbitrary bytes in one metadata file with no backup: Open
// must either accept them as valid tables or refuse with ErrDamaged, and
// never panic.
func FuzzOpen(f *testing.F) {
	f.Add(uint8(0), []byte(`{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":8,"writeQueueNums":8,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false,"attributes":{}}},"dataVersion":{"timestamp":1,"counter":1}}`))
	f.Add(uint8(1), []byte(`{"subscriptionGroupTable":{"G":{"groupName":"G","retryMaxTimes":3}},"dataVersion":{"timestamp":0,"counter":0}}`))
	f.Add(uint8(2), []byte(`{"offsetTable":{"T@G":{"0":12,"1":40}}}`))
	f.Add(uint8(3), []byte(`{"offsetTable":{"1":0,"2":17}}`))
	f.Add(uint8(2), []byte(`{"offsetTable":{"T@G":{"-1":12}}}`))
	f.Add(uint8(0), []byte(`{"topicConfigTable":{"T":{"topicName":"U"}}}`))
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		mem := fsx.NewMemFS()
		require.NoError(t, mem.MkdirAll("/c", 0o755))
		require.NoError(t, fsx.WriteFileAtomic(mem, filepath.Join("/c", files[int(which)%len(files)]), b))
		m, err := metadata.Open(metadata.Config{Dir: "/c", FS: mem})
		if err != nil {
			require.ErrorIs(t, err, metadata.ErrDamaged)
			return
		}
		for _, tc := range m.Topics() {
			require.NoError(t, m.PutTopic(tc), "accepted topics are valid")
		}
		for _, g := range m.Groups() {
			require.NoError(t, m.PutGroup(g), "accepted groups are valid")
		}
	})
}
