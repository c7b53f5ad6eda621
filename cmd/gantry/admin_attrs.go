package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gantrymq/gantry/client"
)

// parseAttributes reads updateTopic's --attributes: mqadmin's
// comma-separated "+key=value" ("key=value" too). The topic's attributes
// become exactly these (the broker replaces its configuration whole), so
// mqadmin's "-key" is refused: leave the key out.
func parseAttributes(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		key, value, ok := strings.Cut(strings.TrimPrefix(item, "+"), "=")
		if !ok || key == "" || strings.HasPrefix(item, "-") {
			return nil, usageError("--attributes: %q: want +key=value, comma-separated (a topic keeps only the attributes given)", item)
		}
		out[key] = value
	}
	return out, nil
}

// printLimits prints, after topicStatus's table, each broker's retention,
// backlog limit and default TTL of the topic, when it has any.
func printLimits(out io.Writer, qs []client.QueueStatus) {
	seen := map[string]bool{}
	for _, q := range qs {
		l := q.Limits
		if seen[q.Queue.BrokerName] || l.Retention == 0 && l.MaxBacklog == 0 && l.DefaultTTL == 0 {
			continue
		}
		seen[q.Queue.BrokerName] = true
		var parts []string
		if l.Retention > 0 {
			parts = append(parts, "retention "+l.Retention.String())
		}
		if l.MaxBacklog > 0 {
			parts = append(parts, fmt.Sprintf("max backlog %d per queue (%s)", l.MaxBacklog, l.BacklogPolicy))
		}
		if l.DefaultTTL > 0 {
			parts = append(parts, "default TTL "+l.DefaultTTL.Round(time.Millisecond).String())
		}
		fmt.Fprintf(out, "%s: %s\n", q.Queue.BrokerName, strings.Join(parts, ", "))
	}
}
