package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/message"
)

// The dlq verbs against an in-process cluster where group billing
// dead-lettered three messages of topic Orders.
func TestAdminDLQVerbs(t *testing.T) {
	c, err := embedded.Start(t.Context(), embedded.Options{NoAutoCreateTopics: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}}
	a, err := client.NewAdmin(t.Context(), cfg)
	require.NoError(t, err)
	p, err := client.NewProducer(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(context.Background()); a.Close() })
	require.NoError(t, a.CreateTopic(t.Context(), client.TopicConfig{Name: "Orders", ReadQueueNums: 1, WriteQueueNums: 1}))
	require.Eventually(t, func() bool { _, err := a.Route(t.Context(), "Orders"); return err == nil }, 5*time.Second, 10*time.Millisecond)
	var ids, offsetIDs []string
	for i := range 3 {
		res, err := p.Send(t.Context(), &client.Message{Topic: "Orders", Body: fmt.Appendf(nil, "order %d", i), Tags: "created", Keys: []string{fmt.Sprintf("key-%d", i)}})
		require.NoError(t, err)
		_, phys, err := message.DecodeOffsetMsgID(res.MsgID)
		require.NoError(t, err)
		_, err = c.Broker().SendBack(t.Context(), broker.SendBackRequest{Group: "billing", PhysicalOffset: phys, DelayLevel: -1, Reason: "gave up"})
		require.NoError(t, err)
		ids, offsetIDs = append(ids, res.UniqKey), append(offsetIDs, res.MsgID)
	}
	require.Eventually(t, func() bool {
		_, maxOff := c.Broker().QueueOffsets("%DLQ%billing", 0)
		return maxOff == 3
	}, 5*time.Second, time.Millisecond)
	admin := func(args ...string) (int, string, string) {
		return execute(t, append([]string{"admin", "-n", c.NameServerAddr()}, args...)...)
	}

	code, out, errOut := admin("dlqList", "-g", "billing")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `^#Broker Name\s+#Offset\s+#Message ID\s+#Origin Topic\s+#Keys\s+#Tags\s+#Reconsume\s+#Dead-Lettered\s+#Resends\s+#Last Resend\s+#Size\s+#Reason\n`, out)
	assert.Regexp(t, regexp.MustCompile(`(?m)^broker-a\s+1\s+`+ids[1]+`\s+Orders\s+key-1\s+created\s+0\s+\d{4}-\d\d-\d\d \S+\s+0\s+-\s+7\s+gave up$`), out)
	assert.Equal(t, 4, strings.Count(out, "\n"), "a header and 3 rows:\n%s", out)

	code, out, errOut = admin("dlqList", "-g", "billing", "--limit", "2")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "\nNext cursor: broker-a=2\n")
	code, out, errOut = admin("dlqList", "-g", "billing", "--cursor", "broker-a=2")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, regexp.MustCompile(`(?m)^broker-a\s+2\s+`+ids[2]), out)
	assert.NotContains(t, out, ids[0])
	code, out, _ = admin("dlqList", "-g", "billing", "-k", "key-0", "-t", "Orders")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, ids[0])
	assert.NotContains(t, out, ids[1])

	code, out, errOut = admin("dlqShow", "-g", "billing", "-i", ids[1])
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "Message Body:        \"order 1\"\n")
	assert.Regexp(t, `DLQ Offset:\s+1\n`, out)
	assert.NotContains(t, out, message.PropCRC)
	assert.Regexp(t, `\nHistory:\n\s+\S+ \S+\s+sent to Orders\n\s+\S+ \S+\s+dead-lettered after 0 failed deliveries: gave up\n`, out)
	code, out, _ = admin("dlqShow", "-g", "billing", "--offset", "0")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, ids[0])
	code, out, errOut = admin("dlqShow", "-g", "billing", "-i", offsetIDs[2])
	require.Equal(t, exitOK, code, "the offset id the producer returned names its dead letter: %s", errOut)
	assert.Regexp(t, `DLQ Offset:\s+2\n`, out)
	assert.Contains(t, out, "Message ID:          "+ids[2]+"\n")
	code, _, errOut = admin("dlqShow", "-g", "billing")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, "-i ID or --offset N")

	code, out, errOut = admin("dlqResend", "-g", "billing", "-i", ids[0])
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `^#Broker Name\s+#Offset\s+#Message ID\s+#Topic\s+#New Offset ID\s+#Resends\nbroker-a\s+0\s+`+ids[0]+`\s+Orders\s+\S+\s+1\n`, out)
	assert.Contains(t, out, "\nresent 1, failed 0\n")
	code, out, errOut = admin("dlqResend", "-g", "billing", "--all", "--to-retry")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "%RETRY%billing")
	assert.Contains(t, out, "\nresent 3, failed 0\n")
	code, out, errOut = admin("dlqResend", "-g", "billing")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "dlqResend: say which dead letters: -i ID, --offset N, a filter (-t, -k, --begin, --end) or --all")
	assert.Empty(t, out)
	code, out, errOut = admin("dlqPurge", "-g", "billing")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "dlqPurge: say which dead letters")
	assert.Empty(t, out, "no success line before the error")

	code, out, errOut = admin("dlqExport", "-g", "billing")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	var rec broker.DLQExportRecord
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &rec))
	assert.Equal(t, "order 0", string(rec.Body))
	assert.Equal(t, int32(2), rec.Resends)
	file := filepath.Join(t.TempDir(), "dlq.jsonl")
	code, out, errOut = admin("dlqExport", "-g", "billing", "-k", "key-2", "-o", file)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "exported 1 dead letter(s) of group billing to "+file+"\n", out)
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	require.True(t, sc.Scan())
	require.NoError(t, json.Unmarshal(sc.Bytes(), &rec))
	assert.Equal(t, ids[2], rec.UniqKey)
	assert.False(t, sc.Scan())

	code, out, errOut = admin("dlqPurge", "-g", "billing", "--offset", "2")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "purged 1 dead letter(s) of group billing\n", out)
	code, out, _ = admin("dlqList", "-g", "billing")
	require.Equal(t, exitOK, code)
	assert.NotContains(t, out, ids[2])
	for _, verb := range []string{"dlqResend", "dlqPurge"} {
		for _, sel := range [][]string{{"--offset", "2"}, {"-i", ids[2]}} {
			code, out, errOut = admin(append([]string{verb, "-g", "billing"}, sel...)...)
			assert.Equal(t, exitProblems, code, "%s %q of a purged dead letter", verb, sel)
			assert.Contains(t, errOut, verb+": no dead letter of group billing matches (purged, expired or never there)")
			assert.Empty(t, out)
		}
	}
	code, out, errOut = admin("dlqPurge", "-g", "billing", "--all")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "purged 2 dead letter(s) of group billing\n", out)

	code, _, errOut = admin("dlqList")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `"group"`)
	code, _, errOut = admin("dlqList", "-g", "nobody")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, "not found")
}
