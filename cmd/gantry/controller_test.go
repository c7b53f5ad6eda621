package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/replication/controller"
)

// gantry controller runs a (one-member) controller group; the admin verbs
// read and elect through it.
func TestControllerCommandAndAdminVerbs(t *testing.T) {
	raftAddr, grpcAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	_, stop := runUntilReady(t, regexp.MustCompile(`controller c1 ready: raft \S+, gRPC \S+`),
		"controller", "--id", "c1", "--peers", "c1="+raftAddr+"="+grpcAddr, "--data-dir", filepath.Join(t.TempDir(), "c1"),
		"--broker-timeout", "1h", "--scan-interval", "20ms")

	cl, err := controller.NewClient(controller.ClientConfig{Addrs: []string{grpcAddr}, Attempts: 100, MaxBackoff: 200 * time.Millisecond})
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for id := int64(1); id <= 3; id++ {
		_, err := cl.RegisterBroker(ctx, "broker-a", id, fmt.Sprintf("10.0.0.%d:10912", id), fmt.Sprintf("10.0.0.%d:8081", id))
		require.NoError(t, err)
	}
	var g controller.GroupStatus
	require.Eventually(t, func() bool {
		g, err = cl.GetGroup(ctx, "broker-a")
		return err == nil && g.MasterID == 1
	}, 30*time.Second, 10*time.Millisecond)
	_, err = cl.AlterSyncStateSet(ctx, "broker-a", 1, g.MasterEpoch, g.InSyncEpoch, []int64{1, 2})
	require.NoError(t, err)
	_, err = cl.BrokerHeartbeat(ctx, controller.BrokerReport{Group: "broker-a", BrokerID: 2, MasterEpoch: 1, LogEnd: 4096, LastEpoch: 1})
	require.NoError(t, err)

	code, out, errOut := execute(t, "admin", "-a", grpcAddr, "getSyncStateSet", "-b", "broker-a")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `#Group\s+#MasterId\s+#MasterAddr\s+#MasterEpoch\s+#SyncStateSet\s+#SyncStateSetEpoch\n`+
		`broker-a\s+1\s+10\.0\.0\.1:10912\s+1\s+\[1 2\]\s+2\n\n`+
		`#BrokerId\s+#Role\s+#HAAddr\s+#ServiceAddr\s+#Alive\s+#InSync\n`+
		`1\s+MASTER\s+10\.0\.0\.1:10912\s+10\.0\.0\.1:8081\s+true\s+true\n`+
		`2\s+SLAVE\s+10\.0\.0\.2:10912\s+10\.0\.0\.2:8081\s+true\s+true\n`+
		`3\s+SLAVE\s+10\.0\.0\.3:10912\s+10\.0\.0\.3:8081\s+true\s+false\n$`, out)

	code, out, errOut = execute(t, "admin", "-a", grpcAddr, "getBrokerEpoch", "-b", "broker-a")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `^group broker-a: master 1, master epoch 1\n`+
		`#BrokerId\s+#Role\s+#Alive\s+#MasterEpoch\s+#LastEpoch\s+#LastEpochStart\s+#LogEnd\s+#LastHeartbeat\n`+
		`1\s+MASTER\s+true\s+-\s+-\s+-\s+-\s+none\n`+
		`2\s+SLAVE\s+true\s+1\s+1\s+0\s+4096\s+\S+ ago\n`, out)

	code, out, errOut = execute(t, "admin", "-a", grpcAddr, "getControllerMetaData")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `#Id\s+#RaftAddr\s+#GRPCAddr\s+#State\s+#Term\s+#LastIndex\s+#Applied\s+#Leader\n`+
		`c1\s+`+regexp.QuoteMeta(raftAddr)+`\s+`+regexp.QuoteMeta(grpcAddr)+`\s+Leader\s+\d+\s+\d+\s+\d+\s+true\n$`, out)

	// 3 is not in sync: refused, unless unclean.
	code, _, errOut = execute(t, "admin", "-a", grpcAddr, "electMaster", "-b", "broker-a", "-i", "3")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, "not in the in-sync set")
	code, out, errOut = execute(t, "admin", "-a", grpcAddr, "electMaster", "-b", "broker-a", "-i", "2")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "group broker-a: master 2 at 10.0.0.2:10912, master epoch 2, in-sync set [2]\n", out)
	code, out, errOut = execute(t, "admin", "-a", grpcAddr, "electMaster", "-b", "broker-a", "-i", "3", "--unclean")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "master 3 at 10.0.0.3:10912, master epoch 3")

	code, _, errOut = execute(t, "admin", "-a", grpcAddr, "getSyncStateSet", "-b", "nope")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, `unknown broker group: "nope"`)
	code, _, errOut = execute(t, "admin", "-a", grpcAddr, "getSyncStateSet")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `"brokerName" not set`)
	code, _, errOut = execute(t, "admin", "-a", grpcAddr, "electMaster", "-b", "broker-a", "-i", "-1")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--brokerId -1")

	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGINT))
	assert.Equal(t, exitOK, stop())
}

func TestControllerFlags(t *testing.T) {
	dir := t.TempDir()
	peers := "c1=127.0.0.1:19878=127.0.0.1:19879"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--peers", peers, "--data-dir", dir}, `required flag "id" not set`},
		{[]string{"--id", "c1", "--data-dir", dir}, `required flag "peers" not set`},
		{[]string{"--id", "c1", "--peers", peers}, `required flag "data-dir" not set`},
		{[]string{"--id", "c1", "--peers", "c1=127.0.0.1:19878", "--data-dir", dir}, "member c1 has no gRPC address"},
		{[]string{"--id", "c1", "--peers", "c1", "--data-dir", dir}, `--peers: controller: peer "c1": want id=raftAddr=grpcAddr`},
		{[]string{"--id", "c9", "--peers", peers, "--data-dir", dir}, `--peers does not list this member "c9"`},
		{[]string{"--id", "c1", "--peers", "c1=127.0.0.1:19878=0.0.0.0:19879", "--data-dir", dir}, "not an address clients can dial"},
		{[]string{"--id", "c1", "--peers", peers, "--data-dir", dir, "--listen", ":19870"}, "listens on port 19870"},
		{[]string{"--id", "c1", "--peers", peers, "--data-dir", dir, "--broker-timeout", "1s", "--scan-interval", "2s"}, "ScanInterval 2s"},
		{[]string{"--id", "c1", "--peers", peers, "--data-dir", dir, "--raft-election-timeout", "10ms"}, "ElectionTimeout"},
		{[]string{"--id", "c1", "--peers", peers, "--data-dir", dir, "--broker-timeout", "soon"}, `invalid argument "soon"`},
	} {
		code, out, errOut := execute(t, append([]string{"controller"}, tt.args...)...)
		assert.Equal(t, exitUsage, code, "%q", tt.args)
		assert.Contains(t, errOut, tt.want, "%q", tt.args)
		assert.Empty(t, out)
	}
}

// gantry namesrv --enable-controller runs a controller member in the
// nameserver process (RocketMQ's enableControllerInNamesrv): it answers
// the controller's admin verbs beside the nameserver's routes, and a bad
// --controller-* flag stops the start with a usage error.
func TestNamesrvWithController(t *testing.T) {
	raftAddr, grpcAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	nsAddr, nsRemoting := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	_, stop := runUntilReady(t, regexp.MustCompile(`nameserver ready: gRPC \S+`),
		"namesrv", "--listen", nsAddr, "--remoting-listen", nsRemoting, "--enable-controller",
		"--controller-id", "c1", "--controller-peers", "c1="+raftAddr+"="+grpcAddr, "--controller-data-dir", filepath.Join(t.TempDir(), "c1"))

	require.Eventually(t, func() bool {
		code, out, _ := execute(t, "admin", "-a", grpcAddr, "getControllerMetaData")
		return code == exitOK && regexp.MustCompile(`c1\s+`+regexp.QuoteMeta(raftAddr)+`\s+`+regexp.QuoteMeta(grpcAddr)+`\s+Leader`).MatchString(out)
	}, 30*time.Second, 50*time.Millisecond, "the controller in the nameserver leads its group of one")
	code, out, errOut := execute(t, "admin", "-n", nsAddr, "clusterList")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "#Cluster Name", "the nameserver answers beside it")

	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGINT))
	assert.Equal(t, exitOK, stop())

	code, _, errOut = execute(t, "namesrv", "--listen", "127.0.0.1:0", "--remoting-listen", "127.0.0.1:0", "--enable-controller", "--controller-id", "c1")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `required flag "controller-peers" not set`)
}
