package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/replication/controller"
)

// writeACL writes an ACL file of a brokers' cluster user and an admin
// (none with empty) and returns its path.
func writeACL(t *testing.T, empty bool) string {
	t.Helper()
	f := auth.File{Users: []auth.User{
		{AccessKey: "broker-key", SecretKey: "broker-secret", Role: auth.RoleCluster},
		{AccessKey: "admin-key", SecretKey: "admin-secret", Role: auth.RoleAdmin},
	}}
	if empty {
		f.Users = nil
	}
	b, err := json.Marshal(f)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// gantry namesrv, controller and broker refuse to listen beyond loopback
// with authentication off, naming the addresses and the ways out, before
// they listen; the authentication flags are checked.
func TestClusterSafeDefaults(t *testing.T) {
	raft, grpcPort := freePort(t), freePort(t)
	peers := fmt.Sprintf("c1=127.0.0.1:%d=127.0.0.1:%d", raft, grpcPort)
	dir := t.TempDir()
	conf := filepath.Join(dir, "broker.conf")
	port := freePort(t)
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf("listenPort=%d\ngrpcListenAddr=127.0.0.1:0\nhttpListenAddr=127.0.0.1:0\nstorePathRootDir=%s\n",
		port, filepath.Join(dir, "store"))), 0o644))
	empty := writeACL(t, true)
	for _, tc := range []struct {
		name string
		args []string
		says []string
	}{
		{"a bare nameserver", []string{"namesrv"}, []string{"namesrv: refusing to listen beyond loopback with authentication off",
			"--listen :9877 (every interface), --remoting-listen :9876 (every interface)", "register a broker under another's name",
			"--auth --acl-file FILE", "127.0.0.1:port", "--allow-remote-without-auth"}},
		{"a controller on every interface", []string{"controller", "--id", "c1", "--peers", peers, "--data-dir", filepath.Join(dir, "c1"),
			"--listen", fmt.Sprintf("0.0.0.0:%d", grpcPort), "--raft-listen", fmt.Sprintf("0.0.0.0:%d", raft)},
			[]string{"controller: refusing", fmt.Sprintf("--listen (gRPC) 0.0.0.0:%d (every interface), --raft-listen (raft) 0.0.0.0:%d (every interface)", grpcPort, raft),
				"elect masters", "--allow-remote-without-auth"}},
		{"a nameserver's controller on every interface", []string{"namesrv", "--listen", "127.0.0.1:0", "--remoting-listen", "127.0.0.1:0",
			"--enable-controller", "--controller-id", "c1", "--controller-peers", peers, "--controller-data-dir", filepath.Join(dir, "c2"),
			"--controller-raft-listen", fmt.Sprintf(":%d", raft)},
			[]string{fmt.Sprintf("--controller-raft-listen (raft) :%d (every interface)", raft), "elect masters"}},
		{"a broker with bindAddress unset", []string{"broker", "-c", conf}, []string{"broker: listening beyond loopback with authentication off",
			fmt.Sprintf("remoting port (bindAddress, listenPort) on :%d (every interface)", port), "authenticationEnabled=true",
			"bindAddress=127.0.0.1", "allowRemoteWithoutAuth=true"}},
		{"--auth without a file", []string{"namesrv", "--auth"}, []string{"--auth needs --acl-file"}},
		{"a file without --auth", []string{"controller", "--acl-file", empty}, []string{"--acl-file " + empty + " without --auth"}},
		{"a nameserver without users", []string{"namesrv", "--auth", "--acl-file", empty}, []string{"authentication on with no users in " + empty}},
		{"a controller without users", []string{"controller", "--id", "c1", "--peers", peers, "--data-dir", filepath.Join(dir, "c3"),
			"--auth", "--acl-file", empty}, []string{"--auth with no users in " + empty}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := execute(t, tc.args...)
			assert.Equal(t, exitUsage, code)
			for _, s := range tc.says {
				assert.Contains(t, errOut, s)
			}
			assert.NotContains(t, out, "ready")
		})
	}
	for _, p := range []int{raft, grpcPort, port} { // nothing was listened on: each is free still
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		require.NoError(t, err)
		l.Close()
	}
}

// --allow-remote-without-auth lets the nameserver listen beyond loopback
// with a loud warning, logged before it listens; with --auth it listens
// beyond loopback without one. (192.0.2.1 is a documentation address no
// host has: the listen then fails, so the test binds nothing.)
func TestNamesrvBeyondLoopback(t *testing.T) {
	code, _, errOut := execute(t, "namesrv", "--allow-remote-without-auth", "--listen", "192.0.2.1:9877", "--remoting-listen", "127.0.0.1:-1")
	assert.Equal(t, exitUsage, code, "the listen fails, after the warning")
	assert.Contains(t, errOut, "LISTENING BEYOND LOOPBACK WITH AUTHENTICATION OFF (--allow-remote-without-auth)")
	assert.Contains(t, errOut, "--listen 192.0.2.1:9877")
	assert.Contains(t, errOut, "nameserver listen: listen tcp 192.0.2.1:9877")

	code, _, errOut = execute(t, "namesrv", "--auth", "--acl-file", writeACL(t, false), "--listen", "192.0.2.1:9877", "--remoting-listen", "127.0.0.1:-1")
	assert.Equal(t, exitUsage, code)
	assert.NotContains(t, errOut, "LISTENING BEYOND LOOPBACK")
	assert.NotContains(t, errOut, "refusing")
	assert.Contains(t, errOut, "nameserver listen: listen tcp 192.0.2.1:9877")
}

// gantry namesrv --auth: a broker signing with its
// innerClientAuthenticationCredentials registers, and clients read the
// cluster without credentials.
func TestNamesrvAuthRegistersSignedBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	acl := writeACL(t, false)
	m := gantryServe(t, regexp.MustCompile(`gRPC (\S+), RocketMQ remoting`),
		"namesrv", "--auth", "--acl-file", acl, "--listen", "127.0.0.1:0", "--remoting-listen", "127.0.0.1:0")
	ns := m[1]
	dir := t.TempDir()
	conf := filepath.Join(dir, "broker.conf")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`namesrvAddr=%s
bindAddress=127.0.0.1
listenPort=%d
haListenPort=%d
grpcListenAddr=127.0.0.1:0
httpListenAddr=127.0.0.1:0
storePathRootDir=%s
innerClientAuthenticationCredentials={"accessKey":"broker-key","secretKey":"broker-secret"}
`, ns, freePort(t), freePort(t), filepath.Join(dir, "store"))), 0o644))
	m = gantryServe(t, regexp.MustCompile(`gRPC (\S+), RocketMQ remoting`), "broker", "-c", conf)
	require.Eventually(t, func() bool {
		code, out, _ := gantryRun(t, "admin", "-n", ns, "clusterList")
		return code == exitOK && strings.Contains(out, m[1])
	}, 20*time.Second, 50*time.Millisecond, "the signed broker is registered")
}

// gantry controller --auth: a broker's calls need a cluster user, the
// members' metadata nothing; an unsigned admin verb is refused with a
// message naming why, and runs with an admin's keys.
func TestControllerAuth(t *testing.T) {
	raftAddr, grpcAddr := "127.0.0.1:"+strconv.Itoa(freePort(t)), "127.0.0.1:"+strconv.Itoa(freePort(t))
	_, stop := runUntilReady(t, regexp.MustCompile(`controller c1 ready`), "controller", "--auth", "--acl-file", writeACL(t, false),
		"--id", "c1", "--peers", "c1="+raftAddr+"="+grpcAddr, "--data-dir", filepath.Join(t.TempDir(), "c1"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := func(s *auth.Signer) *controller.Client {
		c, err := controller.NewClient(controller.ClientConfig{Addrs: []string{grpcAddr}, Attempts: 100, MaxBackoff: 200 * time.Millisecond, Signer: s})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	_, err := client(nil).RegisterBroker(ctx, "broker-a", 1, "10.0.0.1:10912", "10.0.0.1:8081")
	assert.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
	s, err := auth.NewSigner("broker-key", "broker-secret")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := client(s).RegisterBroker(ctx, "broker-a", 1, "10.0.0.1:10912", "10.0.0.1:8081")
		return err == nil
	}, 30*time.Second, 50*time.Millisecond)

	require.Eventually(t, func() bool {
		code, out, _ := execute(t, "admin", "-a", grpcAddr, "getControllerMetaData")
		return code == exitOK && strings.Contains(out, "Leader")
	}, 30*time.Second, 50*time.Millisecond, "the members' metadata is public")
	code, _, errOut := execute(t, "admin", "-a", grpcAddr, "getSyncStateSet", "-b", "broker-a")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, "cluster operations need credentials")
	code, out, errOut := execute(t, "admin", "-a", grpcAddr, "--access-key", "admin-key", "--secret-key", "admin-secret",
		"getSyncStateSet", "-b", "broker-a")
	assert.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "broker-a")

	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGINT))
	assert.Equal(t, exitOK, stop())
}
