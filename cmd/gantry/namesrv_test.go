package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/remoting"
)

// runUntilReady runs a long-running command line until its output
// matches ready, and returns the output's submatches and a function that
// waits for its exit code (after a SIGINT, which every run catches).
func runUntilReady(t *testing.T, ready *regexp.Regexp, args ...string) ([]string, func() int) {
	t.Helper()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(args, &out, &errOut) }()
	var m []string
	exited := false
	require.Eventually(t, func() bool {
		select {
		case code := <-done:
			done <- code
			exited = true
			return true
		default:
		}
		m = ready.FindStringSubmatch(out.String())
		return m != nil
	}, 20*time.Second, 5*time.Millisecond, "stderr: %s", errOut.String())
	require.False(t, exited, "exited early; stdout: %s stderr: %s", out.String(), errOut.String())
	return m, func() int {
		select {
		case code := <-done:
			return code
		case <-time.After(20 * time.Second):
			t.Fatal("did not stop on SIGINT")
			return -1
		}
	}
}

// routeCode asks a nameserver's remoting port for a topic's route.
func routeCode(t *testing.T, addr, topic string) remoting.ResponseCode {
	t.Helper()
	cl, err := remoting.Dial(t.Context(), addr, remoting.DialOptions{})
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, remoting.NewRequest(remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": topic}))
	require.NoError(t, err)
	return resp.ResponseCode()
}

// gantry namesrv serves gRPC and RocketMQ remoting; a broker registered
// over gRPC is routed to RocketMQ clients at its remoting address (its
// listenPort from broker.conf).
func TestNamesrvAndBrokerServeRemoting(t *testing.T) {
	m, stopNS := runUntilReady(t, regexp.MustCompile(`gRPC (\S+), RocketMQ remoting (\S+)`),
		"namesrv", "--listen", "127.0.0.1:0", "--remoting-listen", "127.0.0.1:0")
	grpcAddr, remotingAddr := m[1], m[2]
	assert.Equal(t, remoting.ResTopicNotExist, routeCode(t, remotingAddr, "TBW102"))

	port := freePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "broker.conf")
	require.NoError(t, os.WriteFile(conf, []byte("bindAddress=127.0.0.1\nlistenPort="+strconv.Itoa(port)+"\n"+
		"haListenPort="+strconv.Itoa(freePort(t))+"\n"+ // not listenPort+1, which may be taken
		"grpcListenAddr=127.0.0.1:0\nhttpListenAddr=127.0.0.1:0\nautoCreateTopicEnable=true\n"+
		"storePathRootDir="+filepath.Join(dir, "store")+"\nnamesrvAddr="+grpcAddr+"\n"), 0o644))
	m, stopBroker := runUntilReady(t, regexp.MustCompile(`RocketMQ remoting (\S+),`), "broker", "-c", conf)
	assert.Equal(t, "127.0.0.1:"+strconv.Itoa(port), m[1])
	require.Eventually(t, func() bool { return routeCode(t, remotingAddr, "TBW102") == remoting.ResSuccess },
		10*time.Second, 10*time.Millisecond)

	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGINT)) // both runs catch it
	assert.Equal(t, exitOK, stopBroker())
	assert.Equal(t, exitOK, stopNS())
}

// freePort returns a TCP port free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}
