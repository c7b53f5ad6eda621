package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/embedded"
)

// gantry dev --replicas 3 runs a SYNC_MASTER and two slaves: a message
// sent through it is acked, and haStatus shows both slaves connected,
// with no lag once they hold it.
func TestDevReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	m := gantryServe(t, regexp.MustCompile(`(?s)nameserver  (\S+)   \(gRPC.*\n  broker      (\S+)   \(gRPC\).*Ctrl-C to stop`),
		"dev", "--replicas", "3", "--dir", t.TempDir(), "--namesrv-listen", "127.0.0.1:0",
		"--broker-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--namesrv-remoting-listen", "127.0.0.1:0", "--broker-remoting-listen", "127.0.0.1:0")
	ns, master := m[1], m[2]
	out := m[0]
	assert.Regexp(t, `Broker group broker-a: the master is brokerId 0 at `+regexp.QuoteMeta(master)+` \(SYNC_MASTER, inSyncReplicas 2\)`, out)
	assert.Regexp(t, `slaves 1, 2 \(SLAVE, slaveReadEnable\) replicate from its HA port 127\.0\.0\.1:\d+\.`, out)
	assert.Contains(t, out, "No failover")
	slaves := regexp.MustCompile(`(?m)^  slave (\d)     (\S+)   \(gRPC\)   \S+   \(RocketMQ remoting\)   metrics http://\S+/metrics   store \S+slave-\d/store$`).FindAllStringSubmatch(out, -1)
	require.Len(t, slaves, 2, out)

	cfg := client.Config{NameServers: []string{ns}}
	p, err := client.NewProducer(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close(t.Context()) })
	res, err := p.Send(t.Context(), &client.Message{Topic: "Orders", Body: []byte("order 1")})
	require.NoError(t, err, "a SYNC_MASTER acks once a slave holds the message")
	assert.Equal(t, "broker-a", res.Broker)

	admin := func(args ...string) (int, string, string) {
		return execute(t, append([]string{"admin", "-n", ns}, args...)...)
	}
	row := regexp.MustCompile(`(?m)^(\d)\s+127\.0\.0\.1:\d+\s+(true|false)\s+(\d+)\s+(\d+)$`)
	var status string
	require.Eventually(t, func() bool {
		code, o, errOut := admin("haStatus", "-b", master)
		require.Equal(t, exitOK, code, errOut)
		status = o
		rows := row.FindAllStringSubmatch(o, -1)
		return len(rows) == 2 && rows[0][2] == "true" && rows[1][2] == "true" && rows[0][4] == "0" && rows[1][4] == "0"
	}, 30*time.Second, 20*time.Millisecond, "haStatus of the master:\n%s", status)
	assert.Regexp(t, `^role     SYNC_MASTER\nlog end  [1-9]\d*\n#BID\s+#Slave Addr\s+#Connected\s+#Acked Offset\s+#Lag \(bytes\)\n`, status)
	end := regexp.MustCompile(`log end  (\d+)`).FindStringSubmatch(status)[1]
	assert.Equal(t, 2, strings.Count(status, "  "+end+"  "), "both slaves acked the master's log end:\n%s", status)

	// Each slave holds the master's log end and has restored its metadata.
	follows := regexp.MustCompile(fmt.Sprintf(`^role     SLAVE\nlog end  %s\n`+
		`#Master HA Addr\s+#Connected\s+#Master Log End\s+#Lag \(bytes\)\s+#Meta Snapshots\s+#Last Error\n`+
		`127\.0\.0\.1:\d+\s+true\s+%s\s+0\s+[1-9]\d*\s+-\n$`, end, end))
	for _, s := range slaves {
		require.Eventually(t, func() bool {
			code, o, errOut := admin("haStatus", "-b", s[2])
			require.Equal(t, exitOK, code, errOut)
			status = o
			return follows.MatchString(o)
		}, 30*time.Second, 20*time.Millisecond, "haStatus of slave %s:\n%s", s[1], status)
	}
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

// dev says ready once the SYNC_MASTER has the in-sync slave a send needs,
// and says so when none comes.
func TestDevWaitInSync(t *testing.T) {
	c, err := embedded.Start(t.Context(), devOptions(embedded.Options{}, commitlog.AsyncFlush, false, 2))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	assert.True(t, waitInSync(t.Context(), c, 30*time.Second))
	require.NoError(t, c.StopSlave(t.Context(), 1))
	assert.False(t, waitInSync(t.Context(), c, 50*time.Millisecond), "no slave: not in sync")

	var out bytes.Buffer
	printDevGroup(&out, c, 2, false)
	assert.Contains(t, out.String(), "No slave is in sync yet")
	assert.NotContains(t, out.String(), "  slave 1     ", "a stopped slave has no endpoints")
}
