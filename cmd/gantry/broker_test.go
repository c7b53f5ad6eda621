package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gantrymq/gantry/embedded"
)

// A broker.conf with an unknown key or a bad value is refused before
// anything starts, naming the line and the key.
func TestBrokerRejectsBadConfig(t *testing.T) {
	tests := []struct{ name, conf, want string }{
		{"unknown key", "brokerName=b\nflushDiskTyp=SYNC_FLUSH\n", `line 2: unknown key "flushDiskTyp"`},
		{"bad value", "flushDiskType=SOMETIMES\n", "SOMETIMES"},
		{"unknown role", "brokerRole=MASTER\n", `brokerRole: bad value "MASTER": want ASYNC_MASTER, SYNC_MASTER or SLAVE`},
		{"sync master with a slave's id", "brokerRole=SYNC_MASTER\nbrokerId=1\n", "brokerId 1: a master's (SYNC_MASTER) brokerId is 0"},
		{"slave without an id", "brokerRole=SLAVE\n", "brokerId 0: a SLAVE's brokerId is above 0"},
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

// A broker.conf's errors name the file read, whatever its name: a line
// that does not parse, and a value out of range.
func TestBrokerConfigErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ conf, want string }{
		{"brokerName=b\nlistenPort=ten\n", `/b1.properties line 2: listenPort: bad value "ten"`},
		{"listenPort=99999\n", "/b1.properties: broker: invalid config: listenPort 99999: want 1..65535"},
		{"storePathRootDir=" + dir + "\nstorePathCommitLog=/elsewhere\n", `/b1.properties: broker: invalid config: storePathCommitLog "/elsewhere"`},
	} {
		conf := filepath.Join(dir, "b1.properties")
		assert.NoError(t, os.WriteFile(conf, []byte(tt.conf), 0o644))
		code, _, errOut := execute(t, "broker", "-c", conf)
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, errOut, dir+tt.want)
	}
}

// bench against a cluster without auto-creation: a missing topic stops
// produce at its first send, and neither verb prints a rate of NaN.
func TestBenchMissingTopic(t *testing.T) {
	c, err := embedded.Start(t.Context(), embedded.Options{NoAutoCreateTopics: true})
	assert.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close(context.Background())) })
	code, out, errOut := execute(t, "bench", "produce", "-n", c.NameServerAddr(), "-t", "Missing", "--count", "20000")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, `gantry: stopped at the first send that no retry can help: client: route Missing `+c.NameServerAddr()+
		`: NotFound: nameserver: no route for topic "Missing"`)
	assert.NotContains(t, out, "NaN")
	assert.NotContains(t, out, "produce: ", "no rate of a run that never started")
	code, out, errOut = execute(t, "bench", "consume", "-n", c.NameServerAddr(), "-t", "Missing", "--count", "5")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, `no route for topic "Missing"`)
	assert.NotContains(t, out, "NaN")
}

func TestAdminAndBenchNeedTheirFlags(t *testing.T) {
	code, _, errOut := execute(t, "admin", "updateTopic")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `"topic"`)
	code, _, errOut = execute(t, "admin", "resetOffsetByTime", "-g", "g", "-t", "T")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `"timestamp"`)
}
