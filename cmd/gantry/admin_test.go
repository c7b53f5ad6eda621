package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
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
