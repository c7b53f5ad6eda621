package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/fsx"
)

// A broker whose commit log is damaged in the middle refuses to start
// with an error that says how to start anyway, and gantry broker
// --skip-corrupt (or skipCorrupt=true) does: the valid records after the
// damage are kept, the lost one is stepped over, and the store verifies
// clean.
func TestBrokerSkipCorrupt(t *testing.T) {
	storeDir := makeStore(t, 300) // 64 KiB segments: the records reach the second
	seg := filepath.Join(storeDir, "commitlog", fsx.OffsetName(64<<10))
	b, err := os.ReadFile(seg)
	require.NoError(t, err)
	copy(b[120:], "DAMAGED!") // inside the segment's first record; valid ones follow
	require.NoError(t, os.WriteFile(seg, b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(storeDir, "abort"), nil, 0o644)) // as after a crash: recovery checks it

	conf := filepath.Join(t.TempDir(), "broker.conf")
	require.NoError(t, os.WriteFile(conf, []byte("bindAddress=127.0.0.1\nlistenPort="+strconv.Itoa(freePort(t))+"\n"+
		"haListenPort="+strconv.Itoa(freePort(t))+"\n"+ // not listenPort+1, which may be taken
		"grpcListenAddr=127.0.0.1:0\nhttpListenAddr=127.0.0.1:0\nmappedFileSizeCommitLog=65536\n"+
		"maxHashSlotNum=101\nmaxIndexNum=400\nstorePathRootDir="+storeDir+"\n"), 0o644))
	code, _, errOut := execute(t, "broker", "-c", conf)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "commitlog: corrupt record in "+seg)
	assert.Contains(t, errOut, "set skipCorrupt=true in broker.conf or run gantry broker --skip-corrupt")

	_, stop := runUntilReady(t, regexp.MustCompile(`broker broker-a ready`), "broker", "-c", conf, "--skip-corrupt")
	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGINT))
	require.Equal(t, exitOK, stop())

	code, out, errOut := execute(t, "verify", storeDir)
	require.Equal(t, exitOK, code, errOut)
	rep := decodeReport(t, out)
	assert.Equal(t, 1, rep.CommitLog.Holes)
	assert.Equal(t, int64(1), rep.ConsumeQueues.Lost, "the damaged record's queue entry steps over it")
	assert.Equal(t, int64(299), rep.CommitLog.Records)
}
