package main

import (
	"bytes"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// gantry dev starts, prints its endpoints, and stops cleanly on Ctrl-C.
func TestDevStartsAndStopsOnInterrupt(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"dev", "--dir", t.TempDir(), "--namesrv-listen", "127.0.0.1:0",
			"--broker-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
			"--namesrv-remoting-listen", "127.0.0.1:0", "--broker-remoting-listen", "127.0.0.1:0"}, &out, &errOut)
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "Ctrl-C to stop") }, 10*time.Second, 5*time.Millisecond, errOut.String())
	assert.Contains(t, out.String(), "Gantry dev ready in")
	assert.Contains(t, out.String(), "nameserver  127.0.0.1:")
	assert.Regexp(t, `nameserver  127\.0\.0\.1:\d+   \(RocketMQ remoting`, out.String())
	assert.Regexp(t, `broker      127\.0\.0\.1:\d+   \(RocketMQ remoting\)`, out.String())
	assert.Regexp(t, `cpus        Go code on (\d+|\d+-\d+, by load,) of \d+ \(--procs\)`, out.String())
	m := regexp.MustCompile(`metrics     http://(127\.0\.0\.1:\d+)/metrics`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	for path, want := range map[string]int{"/metrics": http.StatusOK, "/debug/pprof/": http.StatusNotFound} {
		resp, err := http.Get("http://" + m[1] + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, "%s: profiles only with --pprof", path)
	}
	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGINT)) // run catches it
	select {
	case code := <-done:
		assert.Equal(t, exitOK, code, errOut.String())
	case <-time.After(20 * time.Second):
		t.Fatal("gantry dev did not stop on SIGINT")
	}
	assert.Contains(t, out.String(), "stopped")
	assert.Equal(t, procs, runtime.GOMAXPROCS(0), "dev gives back the GOMAXPROCS it found")
}

func TestDevProcs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flag      int
		mode      commitlog.FlushMode
		env       string
		current   int
		low, high int
	}{
		{"async: half while quiet, all while busy", 0, commitlog.AsyncFlush, "", 8, 4, 8},
		{"async: at least one", 0, commitlog.AsyncFlush, "", 1, 1, 1},
		{"async, odd: rounded down", 0, commitlog.AsyncFlush, "", 3, 1, 3},
		{"sync: all", 0, commitlog.SyncFlush, "", 8, 8, 8},
		{"GOMAXPROCS set: kept", 0, commitlog.AsyncFlush, "6", 6, 6, 6},
		{"the flag wins", 3, commitlog.AsyncFlush, "6", 6, 3, 3},
		{"the flag under sync", 1, commitlog.SyncFlush, "", 8, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", tc.env) // read by devProcs only; the runtime read it at start
			low, high := devProcs(tc.flag, tc.mode, tc.current)
			assert.Equal(t, [2]int{tc.low, tc.high}, [2]int{low, high})
		})
	}
}

func TestDevRefusesNegativeProcs(t *testing.T) {
	var out, errOut syncBuffer
	code := run([]string{"dev", "--dir", t.TempDir(), "--procs", "-1"}, &out, &errOut)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut.String(), "--procs -1: want 0 (the default) or more")
}

// gantry dev listens on loopback only: its defaults are loopback
// addresses, and it refuses others (it runs without authentication).
func TestDevBindsLoopback(t *testing.T) {
	code, _, errOut := execute(t, "dev", "--dir", t.TempDir(), "--broker-listen", "0.0.0.0:0")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--broker-listen 0.0.0.0:0 (every interface): gantry dev runs without authentication and listens on loopback only")

	flags := newDevCmd().Flags()
	for _, name := range []string{"namesrv-listen", "namesrv-remoting-listen", "broker-listen", "broker-remoting-listen", "http-listen",
		"controller-listen", "controller-raft-listen"} {
		f := flags.Lookup(name)
		require.NotNil(t, f, name)
		assert.True(t, strings.HasPrefix(f.DefValue, "127.0.0.1:"), "--%s defaults to %s", name, f.DefValue)
	}
}
