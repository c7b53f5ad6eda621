package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A broker.conf with an unknown key or a bad value is refused before
// anything starts, naming the line and the key.
func TestBrokerRejectsBadConfig(t *testing.T) {
	tests := []struct{ name, conf, want string }{
		{"unknown key", "brokerName=b\nflushDiskTyp=SYNC_FLUSH\n", `line 2: unknown key "flushDiskTyp"`},
		{"bad value", "flushDiskType=SOMETIMES\n", "SOMETIMES"},
		{"sync master", "brokerRole=SYNC_MASTER\n", "brokerRole SYNC_MASTER is not supported: Gantry has no replication yet; use ASYNC_MASTER"},
		{"slave", "brokerRole=SLAVE\nbrokerId=1\n", "brokerRole SLAVE is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf := filepath.Join(t.TempDir(), "broker.conf")
			assert.NoError(t, os.WriteFile(conf, []byte(tt.conf), 0o644))
			code, _, errOut := execute(t, "broker", "-c", conf)
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, errOut, tt.want)
		})
	}
	code, _, errOut := execute(t, "broker", "-c", filepath.Join(t.TempDir(), "missing.conf"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "missing.conf")
}

func TestAdminAndBenchNeedTheirFlags(t *testing.T) {
	code, _, errOut := execute(t, "admin", "updateTopic")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `"topic"`)
	code, _, errOut = execute(t, "admin", "resetOffsetByTime", "-g", "g", "-t", "T")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `"timestamp"`)
}
