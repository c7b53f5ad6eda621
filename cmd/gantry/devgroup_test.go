package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/embedded"
)

const devGroupWait = 60 * time.Second

// devBrokerLine is one broker's line in dev's output: id, gRPC address.
var devBrokerLine = regexp.MustCompile(`(?m)^  broker (\d)    (\S+)   \(gRPC\)   \S+   \(RocketMQ remoting\)   metrics http://\S+/metrics   store \S+broker-\d/store$`)

// sendTo sends one message straight to the broker at addr (gRPC), not
// through the nameserver's route.
func sendTo(t *testing.T, addr, topic, body string) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = gantryv1.NewMessagingClient(cc).Send(ctx, &gantryv1.SendRequest{Topic: topic, Messages: []*gantryv1.Message{{Body: []byte(body)}}})
	return err
}

// gantry dev --replicas 3 runs a controller and a group of three brokers
// in controller mode: the master it prints is the controller's, takes
// sends at its printed address and shows both slaves in haStatus; after
// electMaster names another broker, that one serves as master and clients
// reach it through the nameserver.
func TestDevReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	m := gantryServe(t, regexp.MustCompile(`(?s)nameserver  (\S+)   \(gRPC.*\n  controller  (\S+)   \(gRPC: gantry admin -a\).*`+
		`the master is broker (\d), epoch (\d+),\n  at (\S+) \(gRPC\).*Ctrl-C to stop`),
		"dev", "--replicas", "3", "--dir", t.TempDir(), "--namesrv-listen", "127.0.0.1:0",
		"--broker-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--namesrv-remoting-listen", "127.0.0.1:0", "--broker-remoting-listen", "127.0.0.1:0",
		"--controller-listen", "127.0.0.1:0", "--controller-raft-listen", "127.0.0.1:0")
	out, ns, ctl, masterID, master := m[0], m[1], m[2], m[3], m[5]
	assert.NotContains(t, out, "No failover")
	assert.Regexp(t, `Broker group broker-a in controller mode \(SYNC_MASTER, inSyncReplicas 2\)`, out)
	assert.Regexp(t, `brokers \d, \d \(slaveReadEnable\) replicate from its HA port 127\.0\.0\.1:\d+\.`, out)
	assert.Contains(t, out, "gantry admin haStatus -b "+master+" shows each slave's lag")
	assert.Contains(t, out, "gantry admin getSyncStateSet -a "+ctl+" -b broker-a")
	brokers := map[string]string{} // id → gRPC address
	for _, b := range devBrokerLine.FindAllStringSubmatch(out, -1) {
		brokers[b[1]] = b[2]
	}
	require.Len(t, brokers, 3, out)
	assert.Equal(t, master, brokers[masterID], "the master's line")

	admin := func(args ...string) (int, string, string) {
		return execute(t, append([]string{"admin", "-n", ns, "-a", ctl}, args...)...)
	}
	code, set, errOut := admin("getSyncStateSet", "-b", "broker-a")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `(?m)^broker-a\s+`+masterID+`\s+127\.0\.0\.1:\d+\s+`+m[4]+`\s`, set, "the printed master is the controller's")

	require.NoError(t, sendTo(t, master, "Orders", "order 1"), "the printed master takes a send")
	row := regexp.MustCompile(`(?m)^(\d)\s+127\.0\.0\.1:\d+\s+(true|false)\s+(\d+)\s+(\d+)$`)
	var status string
	require.Eventually(t, func() bool {
		code, o, errOut := admin("haStatus", "-b", master)
		require.Equal(t, exitOK, code, errOut)
		status = o
		rows := row.FindAllStringSubmatch(o, -1)
		return len(rows) == 2 && rows[0][2] == "true" && rows[1][2] == "true" && rows[0][4] == "0" && rows[1][4] == "0"
	}, devGroupWait, 20*time.Millisecond, "haStatus of the master:\n%s", status)
	assert.Regexp(t, `^role     SYNC_MASTER\nlog end  [1-9]\d*\n`, status)

	// Hand the master role to another broker: it serves as master, and
	// clients reach it through the nameserver.
	next := "1"
	if masterID == "1" {
		next = "2"
	}
	code, o, errOut := admin("electMaster", "-b", "broker-a", "-i", next)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, o, "group broker-a: master "+next+" at ")
	require.Eventually(t, func() bool {
		code, o, _ := admin("haStatus", "-b", brokers[next])
		status = o
		return code == exitOK && regexp.MustCompile(`^role     SYNC_MASTER\n`).MatchString(o) && len(row.FindAllStringSubmatch(o, -1)) == 2
	}, devGroupWait, 20*time.Millisecond, "haStatus of broker %s:\n%s", next, status)
	p, err := client.NewProducer(t.Context(), client.Config{NameServers: []string{ns}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	var last error
	require.Eventually(t, func() bool {
		_, last = p.Send(t.Context(), &client.Message{Topic: "Orders", Body: []byte("order 2")})
		return last == nil
	}, devGroupWait, 50*time.Millisecond, "send through the nameserver after electMaster")
	require.NoError(t, last)
	require.NoError(t, sendTo(t, brokers[next], "Orders", "order 3"))
	assert.Error(t, sendTo(t, master, "Orders", "order 4"), "the old master is a slave now")
}

func TestDevRefusesBadReplicas(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"0", "--replicas 0: want 1 (a single broker, the default) to 5 (a master and 4 slaves)"},
		{"6", "--replicas 6: want 1 (a single broker, the default) to 5"},
		{"-2", "--replicas -2: want 1"},
		{"three", `invalid argument "three" for "--replicas"`},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			dir := t.TempDir()
			code, _, errOut := execute(t, "dev", "--dir", dir, "--replicas", tc.arg)
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, errOut, tc.want)
		})
	}
}

// printDevGroup names the broker the controller made master, and after a
// failover the new one, without the dead broker.
func TestDevPrintGroup(t *testing.T) {
	c, err := embedded.Start(t.Context(), devOptions(embedded.Options{}, commitlog.AsyncFlush, false, 3))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	id, ep := c.MasterID()
	require.NotZero(t, id)
	var out bytes.Buffer
	printDevGroup(&out, c, 3, "http")
	assert.Contains(t, out.String(), fmt.Sprintf("the master is broker %d, epoch %d,\n  at %s (gRPC)", id, ep, c.BrokerAddr()))
	assert.Len(t, devBrokerLine.FindAllString(out.String(), -1), 3, out.String())
	assert.Contains(t, out.String(), "  controller  "+c.ControllerAddr()+"   ")

	require.NoError(t, c.KillMember(id))
	ctx, cancel := context.WithTimeout(t.Context(), devGroupWait)
	defer cancel()
	id2, err := c.WaitMaster(ctx, ep)
	require.NoError(t, err)
	out.Reset()
	printDevGroup(&out, c, 3, "http")
	assert.Contains(t, out.String(), fmt.Sprintf("the master is broker %d, epoch ", id2))
	assert.Contains(t, out.String(), "(slaveReadEnable) replicates from its HA port")
	assert.NotContains(t, out.String(), "  broker "+strconv.FormatInt(id, 10)+"    ", "a dead broker has no endpoints")
}
