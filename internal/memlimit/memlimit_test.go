package memlimit_test

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/memlimit"
)

const meminfo = "MemTotal:       16384000 kB\nMemFree:  1000 kB\n"

func TestMachine(t *testing.T) {
	total := int64(16384000) << 10
	tests := []struct {
		name  string
		files map[string]string
		want  int64
		src   string
	}{
		{"no cgroup", nil, total, "physical memory"},
		{"v2 max", map[string]string{"sys/fs/cgroup/memory.max": "max\n"}, total, "physical memory"},
		{"v2 limit", map[string]string{"sys/fs/cgroup/memory.max": "2147483648\n"}, 2 << 30, "cgroup limit"},
		{"v1 unlimited", map[string]string{"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, total, "physical memory"},
		{"v1 limit", map[string]string{"sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"}, 1 << 30, "cgroup limit"},
		{"limit above physical", map[string]string{"sys/fs/cgroup/memory.max": "99999999999999\n"}, total, "physical memory"},
		{"garbage", map[string]string{"sys/fs/cgroup/memory.max": "lots\n"}, total, "physical memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{"proc/meminfo": {Data: []byte(meminfo)}}
			for p, v := range tt.files {
				fsys[p] = &fstest.MapFile{Data: []byte(v)}
			}
			n, src, err := memlimit.Machine(fsys)
			require.NoError(t, err)
			assert.Equal(t, tt.want, n)
			assert.Equal(t, tt.src, src)
			d, note, err := memlimit.Default(fsys)
			require.NoError(t, err)
			assert.Equal(t, tt.want/2, d, "half of it")
			assert.Contains(t, note, tt.src)
		})
	}
}

func TestMachineWithoutMeminfo(t *testing.T) {
	_, _, err := memlimit.Machine(fstest.MapFS{})
	assert.Error(t, err)
	_, _, err = memlimit.Machine(fstest.MapFS{"proc/meminfo": {Data: []byte("MemFree: 3 kB\n")}})
	assert.ErrorContains(t, err, "no MemTotal")
}

func TestParse(t *testing.T) {
	good := map[string]int64{"0": 0, "1048576": 1 << 20, "512MiB": 512 << 20, "2GiB": 2 << 30, "2g": 2 << 30,
		"64 MiB": 64 << 20, "1TiB": 1 << 40, "100B": 100, "off": memlimit.Off, "OFF": memlimit.Off}
	for s, want := range good {
		got, err := memlimit.Parse(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "-1", "2 lots", "1.5GiB", "GiB", "99999999999TiB", "9223372036854775808"} {
		_, err := memlimit.Parse(s)
		assert.Error(t, err, s)
	}
}
