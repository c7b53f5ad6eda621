package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// consumerConnection and consumerProgress against an in-process cluster
// where two clients of group G consume topic Orders.
func TestAdminConsumerVerbs(t *testing.T) {
	c, err := embedded.Start(t.Context(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	cc, err := grpc.NewClient(c.BrokerAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	admin, msg := gantryv1.NewAdminClient(cc), gantryv1.NewMessagingClient(cc)
	_, err = admin.CreateTopic(t.Context(), &gantryv1.CreateTopicRequest{Topic: &gantryv1.TopicConfig{Name: "Orders", ReadQueueNums: 2, WriteQueueNums: 2}})
	require.NoError(t, err)
	for i, id := range []string{"10.0.0.1@1", "10.0.0.2@2"} {
		_, err := msg.Heartbeat(t.Context(), &gantryv1.HeartbeatRequest{ClientId: id, Group: "G", Ordered: i == 1,
			Subscriptions: []*gantryv1.Subscription{{Topic: "Orders", Expression: "TagA"}},
			Assigned:      []*gantryv1.QueueRef{{Topic: "Orders", QueueId: int32(i)}}})
		require.NoError(t, err)
	}

	code, out, errOut := execute(t, "admin", "-n", c.NameServerAddr(), "consumerConnection", "-g", "G")
	require.Equal(t, exitOK, code, errOut)
	sections := strings.Split(out, "\n\n")
	require.Len(t, sections, 3, out)
	assert.Regexp(t, `^#ClientId\s+#ClientAddr\s+#Model\s+#Ordered\s+#LastHeartbeat\n`+
		`10\.0\.0\.1@1\s+127\.0\.0\.1:\d+\s+CLUSTERING\s+false\s+\d{4}-\d\d-\d\d \S+\n`+
		`10\.0\.0\.2@2\s+127\.0\.0\.1:\d+\s+CLUSTERING\s+true\s+\d{4}-`, sections[0])
	assert.Regexp(t, `^#Topic\s+#SubExpression\nOrders\s+TagA$`, sections[1], "one row per distinct subscription")
	assert.Regexp(t, `^#ClientId\s+#Topic\s+#Broker Name\s+#QID\n`+
		`10\.0\.0\.1@1\s+Orders\s+broker-a\s+0\n10\.0\.0\.2@2\s+Orders\s+broker-a\s+1\n$`, sections[2])

	code, out, errOut = execute(t, "admin", "-n", c.NameServerAddr(), "consumerProgress", "-g", "G", "-t", "Orders")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `#Consumer Offset\s+#Client\s+#Diff`, out)
	assert.Regexp(t, regexp.MustCompile(`(?m)^Orders\s+broker-a\s+1\s+0\s+0\s+10\.0\.0\.2@2\s+0\s+-$`), out)

	code, _, errOut = execute(t, "admin", "consumerConnection")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `"consumerGroup"`)
}

// An unknown verb is a usage error naming it, with a suggestion, not the
// help and exit 0.
func TestUnknownVerbs(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"admin", "foo"}, `unknown command "foo" for "gantry admin"`},
		{[]string{"admin", "topiclist"}, "unknown command \"topiclist\" for \"gantry admin\"\n\nDid you mean this?\n\ttopicList\n"},
		{[]string{"bench", "produse"}, "Did you mean this?\n\tproduce"},
	} {
		code, out, errOut := execute(t, tt.args...)
		assert.Equal(t, exitUsage, code, "%q", tt.args)
		assert.Contains(t, errOut, tt.want)
		assert.Contains(t, errOut, "Run 'gantry "+tt.args[0]+" --help' for usage.")
		assert.Empty(t, out)
	}
	code, out, _ := execute(t, "admin")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "Available Commands:")
}

// The admin verbs against a cluster: queue counts of 0 are refused, unknown
// groups are errors, consumerProgress without -g lists every group, and a
// message is found by its offset id and by its UNIQ_KEY.
func TestAdminVerbsAnswerClearly(t *testing.T) {
	c, err := embedded.Start(t.Context(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	admin := func(args ...string) (int, string, string) {
		return execute(t, append([]string{"admin", "-n", c.NameServerAddr()}, args...)...)
	}

	code, out, errOut := admin("updateTopic", "-t", "Orders", "-w", "0")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--writeQueueNums 0: want 1..1024")
	assert.Empty(t, out)
	code, _, errOut = admin("updateTopic", "-t", "Orders", "-p", "0")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--perm 0: want 2 (write), 4 (read) or 6 (both)")
	code, out, errOut = admin("updateTopic", "-t", "Orders", "-r", "2", "-w", "2")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "create topic Orders success: read 2, write 2, perm 6\n", out)

	for _, verb := range []string{"consumerProgress", "consumerConnection"} {
		code, out, errOut = admin(verb, "-g", "Nope")
		assert.Equal(t, exitProblems, code, verb)
		assert.Contains(t, errOut, `consumer group "Nope" not found`, verb)
		assert.Empty(t, out, verb)
	}
	code, out, errOut = admin("resetOffsetByTime", "-g", "G", "-t", "NoSuchTopic", "-s", "now")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, "NoSuchTopic")
	assert.Empty(t, out, "no table before the error")

	cfg := client.Config{NameServers: []string{c.NameServerAddr()}}
	p, err := client.NewProducer(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(context.Background()) })
	require.Eventually(t, func() bool { code, _, _ := admin("topicRoute", "-t", "Orders"); return code == exitOK }, 5*time.Second, 10*time.Millisecond)
	res, err := p.Send(t.Context(), &client.Message{Topic: "Orders", Body: []byte("order 1"), Keys: []string{"k1"}})
	require.NoError(t, err)
	pc, err := client.NewPullConsumer(t.Context(), cfg, "billing")
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close(context.Background()) })
	qs, err := pc.Queues(t.Context(), "Orders")
	require.NoError(t, err)
	require.NoError(t, pc.CommitOffset(t.Context(), qs[0], 0))

	code, out, errOut = admin("consumerProgress")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `(?m)^#Group\s+#Clients\s+#Model\s+#Diff Total\n`, out)
	assert.Regexp(t, regexp.MustCompile(`(?m)^billing\s+0\s+-\s+\d+$`), out)
	code, _, errOut = admin("consumerProgress", "-t", "Orders")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "-t needs -g")

	for _, id := range []string{res.MsgID, res.UniqKey, strings.ToLower(res.MsgID)} {
		code, out, errOut = admin("queryMsgById", "-i", id)
		require.Equal(t, exitOK, code, "queryMsgById -i %s: %s", id, errOut)
		assert.Contains(t, out, "OffsetID:            "+res.MsgID+"\n")
		assert.Contains(t, out, "Uniq Key:            "+res.UniqKey+"\n")
		assert.Contains(t, out, `Message Body:        "order 1"`)
	}
	code, out, errOut = admin("queryMsgByUniqueKey", "-t", "Orders", "-i", res.UniqKey)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "OffsetID:            "+res.MsgID+"\n")
	code, _, errOut = admin("queryMsgById", "-i", "0A0000010D9B18B4AAC2A5E1E1F10000")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, "message 0A0000010D9B18B4AAC2A5E1E1F10000 (an offset message id or UNIQ_KEY): client: not found")
	code, _, errOut = admin("queryMsgByUniqueKey", "-t", "Orders", "-i", "nope")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, "no message of Orders has UNIQ_KEY nope")
}

// A -b that is a broker's name, not its address, is a usage error naming
// what -b wants, before anything is dialled.
func TestBrokerAddrIsAnAddress(t *testing.T) {
	for _, verb := range []string{"haStatus", "brokerStatus"} {
		code, out, errOut := execute(t, "admin", verb, "-b", "broker-a")
		assert.Equal(t, exitUsage, code, verb)
		assert.Contains(t, errOut, `-b "broker-a": want a broker's address, host:port`)
		assert.Empty(t, out)
	}
}
