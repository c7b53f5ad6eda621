package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/remoting"
)

// A broker started, in its own process, from a broker.conf written the
// RocketMQ way (the nameserver at its remoting port, RocketMQ's tuning
// keys) registers and serves; gantry admin works given either nameserver
// port and the broker address brokerStatus prints; a client on the wrong
// port is told the right one.
func TestRocketMQBrokerConfEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	m := gantryServe(t, regexp.MustCompile(`gRPC (\S+), RocketMQ remoting (\S+)`),
		"namesrv", "--listen", "127.0.0.1:0", "--remoting-listen", "127.0.0.1:0")
	nsGRPC, nsRemoting := m[1], m[2]

	dir := t.TempDir()
	conf := filepath.Join(dir, "broker.conf")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`# RocketMQ's way
namesrvAddr=%s
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
deleteWhen=04
fileReservedTime=48
brokerRole=ASYNC_MASTER
flushDiskType=ASYNC_FLUSH
listenPort=%d
haListenPort=%d
bindAddress=127.0.0.1
storePathRootDir=%s
storePathCommitLog=%s
autoCreateTopicEnable=true
sendMessageThreadPoolNums=16
mapedFileSizeCommitLog=67108864
# Gantry's own ports, free ones for the test
grpcListenAddr=127.0.0.1:0
httpListenAddr=127.0.0.1:0
`, nsRemoting, freePort(t), freePort(t), filepath.Join(dir, "store"), filepath.Join(dir, "store", "commitlog"))), 0o644))
	m = gantryServe(t, regexp.MustCompile(`gRPC (\S+), RocketMQ remoting (\S+), HTTP (\S+)\n`), "broker", "-c", conf)
	bGRPC, bRemoting, bHTTP := m[1], m[2], m[3]

	// Registered through RocketMQ's nameserver port, seen through both.
	for _, ns := range []string{nsRemoting, nsGRPC} {
		require.Eventually(t, func() bool {
			code, out, _ := gantryRun(t, "admin", "-n", ns, "clusterList")
			return code == exitOK && strings.Contains(out, bGRPC)
		}, 20*time.Second, 50*time.Millisecond, "the broker registered, as the nameserver at %s says", ns)
	}
	code, out, errOut := gantryRun(t, "admin", "-n", nsRemoting, "brokerStatus", "-b", bGRPC)
	require.Equal(t, exitOK, code, errOut)
	printed := regexp.MustCompile(`(?m)^brokerAddr\s+: (\S+)$`).FindStringSubmatch(out)
	require.NotNil(t, printed, out)
	assert.Equal(t, bRemoting, printed[1])
	code, out, errOut = gantryRun(t, "admin", "-n", nsRemoting, "brokerStatus", "-b", printed[1])
	require.Equal(t, exitOK, code, "brokerStatus -b with the address brokerStatus printed: %s", errOut)
	assert.Regexp(t, `(?m)^brokerName\s+: broker-a$`, out)

	code, out, errOut = gantryRun(t, "bench", "produce", "-n", nsRemoting, "-t", "Orders", "--count", "200")
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	code, out, errOut = gantryRun(t, "bench", "consume", "-n", nsRemoting, "-t", "Orders", "--count", "200")
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	assert.Regexp(t, `run \S+: 200/200 received, none lost, 0 duplicates`, out)

	// Wrong ports: an error that names the right one, at once.
	code, _, errOut = gantryRun(t, "admin", "-n", bRemoting, "clusterList")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, "this is Gantry broker broker-a, which does not serve /gantry.v1.NameServer/GetClusterInfo: its nameservers are "+nsRemoting)
	code, _, errOut = gantryRun(t, "admin", "-n", nsRemoting, "brokerStatus", "-b", bHTTP)
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, bHTTP+" is the Gantry broker's HTTP port (metrics, health): its gRPC API and RocketMQ remoting are at "+bGRPC+" and "+bRemoting)
	cl, err := remoting.Dial(t.Context(), bHTTP, remoting.DialOptions{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, remoting.NewRequest(remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": "Orders"}))
	require.NoError(t, err)
	assert.Equal(t, remoting.ResSystemError, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "its gRPC API and RocketMQ remoting are at "+bGRPC+" and "+bRemoting)
	require.NoError(t, cl.Close())
	for _, addr := range []string{bGRPC, bRemoting} {
		hr, err := http.Get("http://" + addr + "/metrics")
		require.NoError(t, err)
		body, _ := io.ReadAll(hr.Body)
		hr.Body.Close()
		assert.Equal(t, http.StatusBadRequest, hr.StatusCode)
		assert.Contains(t, string(body), "its HTTP endpoints (metrics, health) are at http://"+bHTTP+"/")
	}
	hr, err := http.Get("http://" + bHTTP + "/readyz")
	require.NoError(t, err)
	hr.Body.Close()
	assert.Equal(t, http.StatusOK, hr.StatusCode)
}
