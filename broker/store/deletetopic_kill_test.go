//go:build failpoint

package store_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/internal/failpoint"
)

const killChildEnv = "GANTRY_STORE_DELETE_CHILD"

// A process killed (SIGKILL, armed failpoint) at each durable step of a
// topic deletion leaves real files that the next Open finishes the
// deletion from: the topic's queue files are gone, its name starts at
// offset 0, the other topics are whole, and the deletion is pending.
func TestDeleteTopicKilled(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		s, err := store.Open(t.Context(), testConfig(t, dir, nil))
		require.NoError(t, err)
		putAll(t, s, 0, 120)
		require.Eventually(t, func() bool { return s.DispatchedOffset() >= s.CommitLog().MaxOffset() }, 5*time.Second, time.Millisecond)
		require.NoError(t, s.BeginDeleteTopic("Orders"))
		_ = s.DeleteTopic("Orders") // killed inside
		os.Exit(3)
	}
	for _, point := range []string{"store/delete-topic-fenced", "store/delete-topic-files-removed"} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestDeleteTopicKilled$")
			cmd.Env = append(os.Environ(), killChildEnv+"="+dir, failpoint.EnvVar+"="+point+"=kill")
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "the child was not killed: %v\n%s", err, out)
			ws := ee.Sys().(syscall.WaitStatus)
			require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "status %v\n%s", ws, out)

			s := openStore(t, testConfig(t, dir, nil))
			defer s.Close()
			assert.Equal(t, []string{"Orders"}, s.PendingTopicDeletions())
			_, err = os.Stat(filepath.Join(dir, "consumequeue", "Orders"))
			assert.True(t, os.IsNotExist(err), "%v", err)
			for q := range int32(4) {
				_, maxOff := s.QueueOffsets("Orders", q)
				assert.Zero(t, maxOff)
				_, maxOff = s.QueueOffsets("Payments", q)
				assert.Equal(t, int64(10), maxOff, "other topics are whole")
			}
			r := putOne(t, s, "Orders", 1, "new", "k")
			assert.Equal(t, int64(0), r.QueueOffset)
			require.NoError(t, s.EndDeleteTopic("Orders"))
		})
	}
}
