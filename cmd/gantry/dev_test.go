package main

import (
	"bytes"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGINT)) // run catches it
	select {
	case code := <-done:
		assert.Equal(t, exitOK, code, errOut.String())
	case <-time.After(20 * time.Second):
		t.Fatal("gantry dev did not stop on SIGINT")
	}
	assert.Contains(t, out.String(), "stopped")
}
