package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/client"
)

func newAdminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Administer a cluster (mqadmin's verbs)",
		Long: `Admin administers a Gantry cluster through its nameserver, with mqadmin's verb
names and flags: -n nameserver, -t topic, -g group, -c cluster, -b broker,
-k key, -i message id, -s timestamp. Against brokers with authentication on,
--access-key and --secret-key (or $GANTRY_ACCESS_KEY and $GANTRY_SECRET_KEY)
are the admin user's keys. --tls (and --tls-ca, --tls-cert, --tls-key) reach
a cluster that serves TLS, nameservers, brokers and controllers alike. An
unknown verb is an error (exit 2); a verb that fails exits 1.`,
	}
	verbsOnly(cmd)
	nameServers := nameServerFlag(cmd)
	credentials := credentialsFlags(cmd, "the admin user's")
	var tf clientTLSFlags
	tf.register(cmd)
	withAdmin := func(run adminRun) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			cred, err := credentials()
			if err != nil {
				return err
			}
			ccfg, err := tf.clientConfig(nameServers())
			if err != nil {
				return err
			}
			ccfg.Credentials = cred
			a, err := client.NewAdmin(ctx, ccfg)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			defer a.Close()
			if err := run(ctx, a, cmd.OutOrStdout()); err != nil {
				if ee := (*exitError)(nil); errors.As(err, &ee) {
					return err
				}
				return &exitError{code: exitProblems, err: err}
			}
			return nil
		}
	}
	verb := func(use, short string, run adminRun) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs, RunE: withAdmin(run)}
		cmd.AddCommand(c)
		return c
	}
	addTopicVerbs(verb)
	addGroupVerbs(verb)
	addClusterVerbs(verb)
	addMessageVerbs(verb)
	addConsumerVerbs(verb)
	addDLQVerbs(verb)
	addUserVerbs(cmd, verb, credentials)
	addControllerVerbs(cmd, &tf, credentials)
	return cmd
}

// adminRun is a verb's work, given a connected Admin and the output.
type adminRun func(ctx context.Context, a *client.Admin, out io.Writer) error

// addVerb adds a verb named use to the admin command and returns it for
// its flags.
type addVerb func(use, short string, run adminRun) *cobra.Command

// addTopicVerbs adds the topic verbs: updateTopic, deleteTopic, topicList,
// topicRoute and topicStatus.
func addTopicVerbs(verb addVerb) {
	var topic, cluster, brokerAddr string
	var readQ, writeQ, perm int
	var order bool
	var attrs string

	c := verb("updateTopic", "Create or update a topic on every broker (or -b / -c)", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		if err := checkTopicFlags(readQ, writeQ, perm); err != nil {
			return err
		}
		attributes, err := parseAttributes(attrs) // admin_attrs.go
		if err != nil {
			return err
		}
		brokers, err := pickBrokers(ctx, a, brokerAddr, cluster)
		if err != nil {
			return err
		}
		tc := client.TopicConfig{Name: topic, ReadQueueNums: int32(readQ), WriteQueueNums: int32(writeQ), Perm: int32(perm), Order: order,
			Attributes: attributes}
		if err := a.CreateTopic(ctx, tc, brokers...); err != nil {
			return err
		}
		fmt.Fprintf(out, "create topic %s success: read %d, write %d, perm %d\n", topic, readQ, writeQ, perm)
		return nil
	})
	c.Flags().StringVarP(&topic, "topic", "t", "", "topic name (required)")
	c.Flags().IntVarP(&readQ, "readQueueNums", "r", 8, "read queues per broker")
	c.Flags().IntVarP(&writeQ, "writeQueueNums", "w", 8, "write queues per broker")
	c.Flags().IntVarP(&perm, "perm", "p", 6, "permission: 2 write, 4 read, 6 both")
	c.Flags().BoolVarP(&order, "order", "o", false, "ordered topic")
	c.Flags().StringVar(&attrs, "attributes", "", "the topic's attributes, +key=value,... (e.g. +retention.hours=24,+queue.max.backlog=10000)")
	c.Flags().StringVarP(&brokerAddr, "brokerAddr", "b", "", "only this broker (either of its addresses)")
	c.Flags().StringVarP(&cluster, "clusterName", "c", "", "only the brokers of this cluster")
	_ = c.MarkFlagRequired("topic")

	c = verb("deleteTopic", "Delete a topic from every broker (or -c)", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		brokers, err := pickBrokers(ctx, a, "", cluster)
		if err != nil {
			return err
		}
		if err := a.DeleteTopic(ctx, topic, brokers...); err != nil {
			return err
		}
		fmt.Fprintf(out, "delete topic %s success\n", topic)
		return nil
	})
	c.Flags().StringVarP(&topic, "topic", "t", "", "topic name (required)")
	c.Flags().StringVarP(&cluster, "clusterName", "c", "", "only the brokers of this cluster")
	_ = c.MarkFlagRequired("topic")

	verb("topicList", "List every topic", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		topics, err := a.Topics(ctx)
		for _, t := range topics {
			fmt.Fprintln(out, t)
		}
		return err
	})

	c = verb("topicRoute", "Show a topic's route (JSON)", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		r, err := a.Route(ctx, topic)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	})
	c.Flags().StringVarP(&topic, "topic", "t", "", "topic name (required)")
	_ = c.MarkFlagRequired("topic")

	c = verb("topicStatus", "Show every queue's offsets", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		qs, err := a.TopicStatus(ctx, topic)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "#Broker Name\t#QID\t#Min Offset\t#Max Offset\t#Last Updated\t#Backlog\t#Expired\t#Dropped")
		for _, q := range qs {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%d\t%d\n", q.Queue.BrokerName, q.Queue.ID, q.MinOffset, q.MaxOffset, fmtTime(q.LastStoreTime),
				q.Limits.Backlog, q.Limits.Expired, q.Limits.Dropped)
		}
		tw.Flush()
		printLimits(out, qs) // admin_attrs.go
		return err
	})
	c.Flags().StringVarP(&topic, "topic", "t", "", "topic name (required)")
	_ = c.MarkFlagRequired("topic")

}

// addGroupVerbs adds the consumer group verbs: updateSubGroup and
// deleteSubGroup.
func addGroupVerbs(verb addVerb) {
	var group, cluster, brokerAddr string
	var order bool
	var retryMax, multiplier int
	var policy string
	var initial, maxDelay time.Duration
	var jitter float64
	var broadcast bool
	c := verb("updateSubGroup", "Create or update a consumer group on every broker (or -b / -c)", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		brokers, err := pickBrokers(ctx, a, brokerAddr, cluster)
		if err != nil {
			return err
		}
		g := client.GroupConfig{Name: group, Broadcast: broadcast, Orderly: order, RetryMaxTimes: int32(retryMax)}
		switch policy {
		case "", "ladder":
		case "exponential":
			g.RetryPolicy = &client.RetryPolicy{Initial: initial, Max: maxDelay, Multiplier: int64(multiplier), Jitter: jitter}
		default:
			return fmt.Errorf("--retry-policy %q: want ladder or exponential", policy)
		}
		if err := a.CreateGroup(ctx, g, brokers...); err != nil {
			return err
		}
		fmt.Fprintf(out, "create subscription group %s success\n", group)
		return nil
	})
	c.Flags().StringVarP(&group, "groupName", "g", "", "consumer group (required)")
	c.Flags().IntVarP(&retryMax, "retryMaxTimes", "r", 0, "retries before dead-lettering (0: 16)")
	c.Flags().BoolVarP(&broadcast, "consumeBroadcastEnable", "d", false, "broadcast consumption")
	c.Flags().BoolVarP(&order, "consumeMessageOrderly", "o", false, "ordered consumption")
	c.Flags().StringVar(&policy, "retry-policy", "ladder", "retry delays: ladder (10s 30s 1m ... 2h) or exponential")
	c.Flags().DurationVar(&initial, "retry-initial", 5*time.Second, "exponential: first retry delay")
	c.Flags().DurationVar(&maxDelay, "retry-max", 2*time.Hour, "exponential: longest retry delay")
	c.Flags().IntVar(&multiplier, "retry-multiplier", 2, "exponential: growth factor")
	c.Flags().Float64Var(&jitter, "retry-jitter", 0.1, "exponential: spread each delay by up to this fraction either way")
	c.Flags().StringVarP(&brokerAddr, "brokerAddr", "b", "", "only this broker (either of its addresses)")
	c.Flags().StringVarP(&cluster, "clusterName", "c", "", "only the brokers of this cluster")
	_ = c.MarkFlagRequired("groupName")

	var removeOffset bool
	c = verb("deleteSubGroup", "Delete a consumer group from every broker (or -b / -c); -r: its offsets, retry and DLQ topics too",
		func(ctx context.Context, a *client.Admin, out io.Writer) error {
			brokers, err := pickBrokers(ctx, a, brokerAddr, cluster)
			if err != nil {
				return err
			}
			del := a.DeleteGroup
			if removeOffset {
				del = a.DeleteGroupClean
			}
			if err := del(ctx, group, brokers...); err != nil {
				return err
			}
			if removeOffset {
				fmt.Fprintf(out, "delete subscription group %s success, with its offsets, %s%s and %s%s\n",
					group, broker.RetryTopicPrefix, group, broker.DLQTopicPrefix, group)
				return nil
			}
			fmt.Fprintf(out, "delete subscription group %s success\n", group)
			return nil
		})
	c.Flags().StringVarP(&group, "groupName", "g", "", "consumer group (required)")
	c.Flags().BoolVarP(&removeOffset, "removeOffset", "r", false,
		"also delete the group's committed offsets and its retry and dead-letter topics with their messages")
	c.Flags().StringVarP(&brokerAddr, "brokerAddr", "b", "", "only this broker (either of its addresses)")
	c.Flags().StringVarP(&cluster, "clusterName", "c", "", "only the brokers of this cluster")
	_ = c.MarkFlagRequired("groupName")
}

// addClusterVerbs adds clusterList, brokerStatus and haStatus.
func addClusterVerbs(verb addVerb) {
	var brokerAddr string

	verb("clusterList", "List clusters and brokers", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		info, err := a.ClusterInfo(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "#Cluster Name\t#Broker Name\t#BID\t#Addr\t#Messages In\t#Messages Out\t#Uptime")
		for _, cl := range slices.Sorted(maps.Keys(info.Clusters)) {
			for _, name := range info.Clusters[cl] {
				b := info.Brokers[name]
				for _, bid := range slices.Sorted(maps.Keys(b.Addrs)) {
					st, _ := a.BrokerStatus(ctx, b.Addrs[bid])
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", cl, name, bid, b.Addrs[bid], st["messagesPut"], st["messagesGot"], st["uptime"])
				}
			}
		}
		return tw.Flush()
	})

	c := verb("brokerStatus", "Show a broker's status", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		if err := checkBrokerAddr(brokerAddr); err != nil {
			return err
		}
		st, err := a.BrokerStatus(ctx, brokerAddr)
		if err != nil {
			return err
		}
		for _, k := range slices.Sorted(maps.Keys(st)) {
			fmt.Fprintf(out, "%-16s: %s\n", k, st[k])
		}
		return nil
	})
	c.Flags().StringVarP(&brokerAddr, "brokerAddr", "b", "", "broker address, either port: its gRPC address or its brokerAddr (required)")
	_ = c.MarkFlagRequired("brokerAddr")

	c = verb("haStatus", "Show a broker's replication: a master's slaves and their lag, or how far a slave follows", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		if err := checkBrokerAddr(brokerAddr); err != nil {
			return err
		}
		st, err := a.HAStatus(ctx, brokerAddr)
		if err != nil {
			return err
		}
		printHAStatus(out, st)
		return nil
	})
	c.Flags().StringVarP(&brokerAddr, "brokerAddr", "b", "", "broker address, either port: its gRPC address or its brokerAddr (required)")
	_ = c.MarkFlagRequired("brokerAddr")
}

// checkBrokerAddr refuses a -b that is not an address (a broker name, say)
// before anything is dialled.
func checkBrokerAddr(addr string) error {
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return &exitError{code: exitUsage, err: fmt.Errorf("-b %q: want a broker's address, host:port (gantry admin clusterList lists them)", addr)}
	}
	return nil
}

// printHAStatus prints haStatus's table: a master's slaves, or a slave's
// master and lag.
func printHAStatus(out io.Writer, st client.HAStatus) {
	fmt.Fprintf(out, "role     %s\nlog end  %d\n", st.Role, st.LogEnd)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if st.Role != broker.Slave.String() {
		if len(st.Slaves) == 0 {
			fmt.Fprintln(out, "no slave has connected")
			return
		}
		fmt.Fprintln(tw, "#BID\t#Slave Addr\t#Connected\t#Acked Offset\t#Lag (bytes)")
		for _, s := range st.Slaves {
			fmt.Fprintf(tw, "%d\t%s\t%t\t%d\t%d\n", s.BrokerID, s.Addr, s.Connected, s.Acked, s.LagBytes)
		}
		_ = tw.Flush()
		return
	}
	if !st.Following {
		fmt.Fprintln(out, "the master's HA address is not known yet (haMasterAddress, or the nameserver's answer)")
		return
	}
	fmt.Fprintln(tw, "#Master HA Addr\t#Connected\t#Master Log End\t#Lag (bytes)\t#Meta Snapshots\t#Last Error")
	lastErr := st.LastError
	if lastErr == "" {
		lastErr = "-"
	}
	if st.Stopped {
		lastErr = "STOPPED: " + lastErr
	}
	fmt.Fprintf(tw, "%s\t%t\t%d\t%d\t%d\t%s\n", st.MasterHAAddr, st.Connected, st.MasterLogEnd, st.LagBytes, st.MetaSnapshots, lastErr)
	_ = tw.Flush()
}

// addMessageVerbs adds the message queries: queryMsgById,
// queryMsgByUniqueKey and queryMsgByKey.
func addMessageVerbs(verb addVerb) {
	var topic, key, id string
	var maxNum int

	c := verb("queryMsgById", "Show a message by its offset message id or its message id (UNIQ_KEY)", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		m, err := a.QueryMessageByID(ctx, id)
		if err != nil {
			return err
		}
		printMessage(out, m)
		return nil
	})
	c.Flags().StringVarP(&id, "msgId", "i", "", "offset message id (SendResult.MsgID) or message id (UNIQ_KEY) (required)")
	_ = c.MarkFlagRequired("msgId")

	c = verb("queryMsgByUniqueKey", "Show the messages of a topic with a message id (UNIQ_KEY)", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		ms, err := a.QueryMessageByUniqKey(ctx, topic, id)
		for i, m := range ms {
			if i > 0 {
				fmt.Fprintln(out)
			}
			printMessage(out, m)
		}
		return err
	})
	c.Flags().StringVarP(&id, "msgId", "i", "", "message id: the UNIQ_KEY (required)")
	c.Flags().StringVarP(&topic, "topic", "t", "", "topic (required)")
	_ = c.MarkFlagRequired("msgId")
	_ = c.MarkFlagRequired("topic")

	var begin, end string
	c = verb("queryMsgByKey", "Find messages by key", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		b, err := parseTime(begin, time.Unix(0, 0))
		if err != nil {
			return err
		}
		e, err := parseTime(end, time.Now().Add(time.Hour))
		if err != nil {
			return err
		}
		ms, err := a.QueryMessageByKey(ctx, topic, key, b, e, maxNum)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "#Message ID\t#QID\t#Offset\t#Store Time")
		for _, m := range ms {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", m.MsgID(), m.Queue.ID, m.QueueOffset, fmtTime(m.StoreTimestamp))
		}
		tw.Flush()
		return err
	})
	c.Flags().StringVarP(&topic, "topic", "t", "", "topic name (required)")
	c.Flags().StringVarP(&key, "msgKey", "k", "", "key (required)")
	c.Flags().StringVarP(&begin, "beginTimestamp", "b", "", "from: unix ms, RFC 3339 or 'now' (default: the beginning)")
	c.Flags().StringVarP(&end, "endTimestamp", "e", "", "to (default: now)")
	c.Flags().IntVarP(&maxNum, "maxNum", "c", 64, "at most this many")
	_ = c.MarkFlagRequired("topic")
	_ = c.MarkFlagRequired("msgKey")

}

// addConsumerVerbs adds the consumer verbs: consumerProgress,
// consumerConnection and resetOffsetByTime.
func addConsumerVerbs(verb addVerb) {
	var group, topic, ts string

	c := verb("consumerProgress", "Show a group's offsets and lag (without -g: every group's)", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		if group == "" {
			if topic != "" {
				return usageError("consumerProgress: -t needs -g")
			}
			return printGroupsProgress(ctx, a, out)
		}
		ps, err := a.ConsumerProgress(ctx, group, topic)
		if err != nil && len(ps) == 0 {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "#Topic\t#Broker Name\t#QID\t#Broker Offset\t#Consumer Offset\t#Client\t#Diff\t#LastTime")
		var total int64
		for _, p := range ps {
			total += p.Lag
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\n", p.Queue.Topic, p.Queue.BrokerName, p.Queue.ID, p.BrokerOffset, p.ConsumerOffset, p.ClientID, p.Lag, fmtTime(p.LastTimestamp))
		}
		tw.Flush()
		fmt.Fprintf(out, "\nDiff Total: %d\n", total)
		return err
	})
	c.Flags().StringVarP(&group, "groupName", "g", "", "consumer group (default: a line per group)")
	c.Flags().StringVarP(&topic, "topic", "t", "", "only this topic")

	c = verb("consumerConnection", "Show a group's live clients, subscriptions and queues", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		conns, err := a.ConsumerConnection(ctx, group)
		if err != nil && len(conns) == 0 {
			return err
		}
		printConnections(out, conns)
		return err
	})
	c.Flags().StringVarP(&group, "consumerGroup", "g", "", "consumer group (required)")
	_ = c.MarkFlagRequired("consumerGroup")

	c = verb("resetOffsetByTime", "Move a group's offsets to a time", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		at, err := parseTime(ts, time.Time{})
		if err != nil {
			return err
		}
		offs, err := a.ResetOffsetByTime(ctx, group, topic, at)
		if err != nil && len(offs) == 0 {
			return err // the broker's NOT_FOUND for an unknown group, say
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "#Broker Name\t#QID\t#Offset")
		qs := slices.SortedFunc(maps.Keys(offs), func(a, b client.Queue) int { return strings.Compare(a.String(), b.String()) })
		for _, q := range qs {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", q.BrokerName, q.ID, offs[q])
		}
		tw.Flush()
		return err
	})
	c.Flags().StringVarP(&group, "group", "g", "", "consumer group (required)")
	c.Flags().StringVarP(&topic, "topic", "t", "", "topic (required)")
	c.Flags().StringVarP(&ts, "timestamp", "s", "", "unix ms, RFC 3339 or 'now' (required)")
	for _, f := range []string{"group", "topic", "timestamp"} {
		_ = c.MarkFlagRequired(f)
	}
}

// checkTopicFlags checks updateTopic's queue counts and permission: a
// zero would be read as "the default" further down.
func checkTopicFlags(readQ, writeQ, perm int) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"readQueueNums", readQ}, {"writeQueueNums", writeQ}} {
		if f.v < 1 || f.v > metadata.MaxQueueNums {
			return usageError("--%s %d: want 1..%d", f.name, f.v, metadata.MaxQueueNums)
		}
	}
	if perm < 1 || perm > metadata.PermRead|metadata.PermWrite|metadata.PermInherit {
		return usageError("--perm %d: want 2 (write), 4 (read) or 6 (both)", perm)
	}
	return nil
}

// printGroupsProgress prints consumerProgress without -g: a line per
// consumer group with its live clients and its total lag.
func printGroupsProgress(ctx context.Context, a *client.Admin, out io.Writer) error {
	groups, err := a.Groups(ctx)
	if err != nil && len(groups) == 0 {
		return err
	}
	errs := []error{err}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#Group\t#Clients\t#Model\t#Diff Total")
	for _, g := range groups {
		ps, perr := a.ConsumerProgress(ctx, g.Name, "")
		conns, cerr := a.ConsumerConnection(ctx, g.Name)
		errs = append(errs, perr, cerr)
		var lag int64
		for _, p := range ps {
			lag += p.Lag
		}
		model := "-"
		if len(conns) > 0 {
			model = "CLUSTERING"
			if conns[0].Broadcast {
				model = "BROADCASTING"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", g.Name, len(conns), model, lag)
	}
	tw.Flush()
	return errors.Join(errs...)
}

// printConnections prints consumerConnection's three tables: the clients,
// the subscriptions (each distinct one once) and each client's queues.
func printConnections(out io.Writer, conns []client.ConsumerConnection) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#ClientId\t#ClientAddr\t#Model\t#Ordered\t#LastHeartbeat")
	subs := map[[2]string]bool{}
	for _, c := range conns {
		model := "CLUSTERING"
		if c.Broadcast {
			model = "BROADCASTING"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\n", c.ClientID, c.Addr, model, c.Ordered, fmtTime(c.LastHeartbeat))
		for topic, expr := range c.Subscriptions {
			subs[[2]string{topic, expr}] = true
		}
	}
	tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#Topic\t#SubExpression")
	for _, s := range slices.SortedFunc(maps.Keys(subs), func(a, b [2]string) int {
		return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1])
	}) {
		fmt.Fprintf(tw, "%s\t%s\n", s[0], orStar(s[1]))
	}
	tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#ClientId\t#Topic\t#Broker Name\t#QID")
	for _, c := range conns {
		for _, q := range c.Assigned {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", c.ClientID, q.Topic, q.BrokerName, q.ID)
		}
	}
	tw.Flush()
}

// orStar shows an empty tag expression as "*", which it means.
func orStar(expr string) string {
	if expr == "" {
		return "*"
	}
	return expr
}

// pickBrokers returns the gRPC addresses -b or -c name (nil: every master).
func pickBrokers(ctx context.Context, a *client.Admin, addr, cluster string) ([]string, error) {
	if addr != "" {
		return []string{addr}, nil
	}
	if cluster == "" {
		return nil, nil
	}
	info, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	names, ok := info.Clusters[cluster]
	if !ok {
		return nil, fmt.Errorf("cluster %q not found", cluster)
	}
	var out []string
	for _, n := range names {
		if m := info.Brokers[n].Addrs[0]; m != "" {
			out = append(out, m)
		}
	}
	return out, nil
}

// parseTime reads unix ms, RFC 3339 or "now"; "" is def.
func parseTime(s string, def time.Time) (time.Time, error) {
	switch {
	case s == "":
		if def.IsZero() {
			return def, fmt.Errorf("a timestamp is required")
		}
		return def, nil
	case s == "now":
		return time.Now(), nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return t, fmt.Errorf("timestamp %q: want unix milliseconds, RFC 3339 (2026-11-30T10:00:00Z) or now", s)
	}
	return t, nil
}

func fmtTime(t time.Time) string {
	if t.IsZero() || t.Unix() <= 0 {
		return "-"
	}
	return t.Format("2006-01-02 15:04:05.000")
}

func printMessage(out io.Writer, m *client.MessageExt) {
	fmt.Fprintf(out, "OffsetID:            %s\nTopic:               %s\nTags:                [%s]\nKeys:                %v\n",
		m.MsgID(), m.Topic, m.Tags, m.Keys())
	fmt.Fprintf(out, "Queue ID:            %d\nQueue Offset:        %d\nPhysical Offset:     %d\nUniq Key:            %s\n",
		m.Queue.ID, m.QueueOffset, m.PhysicalOffset, m.UniqKey)
	fmt.Fprintf(out, "Born Timestamp:      %s\nStore Timestamp:     %s\nReconsume Times:     %d\nProperties:          %v\n",
		fmtTime(m.BornTimestamp), fmtTime(m.StoreTimestamp), m.ReconsumeTimes, m.Properties())
	fmt.Fprintf(out, "Message Body:        %q\n", truncate(m.Body, 512))
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// dlqFlags are the dead-letter verbs' flags.
type dlqFlags struct {
	group, topic, key, id, begin, end, broker, cursor, outFile string
	offsets                                                    []int64
	limit                                                      int
	all, toRetry                                               bool
}

// addFilter adds the filter flags: -t, -k, -i, --begin, --end.
func (f *dlqFlags) addFilter(c *cobra.Command) {
	c.Flags().StringVarP(&f.topic, "topic", "t", "", "only dead letters first sent to this topic")
	c.Flags().StringVarP(&f.key, "msgKey", "k", "", "only dead letters with this key")
	c.Flags().StringVarP(&f.id, "msgId", "i", "", "only the dead letter(s) with this id: message id (UNIQ_KEY), original id or offset id")
	c.Flags().StringVar(&f.begin, "begin", "", "dead-lettered at or after: unix ms, RFC 3339 or 'now'")
	c.Flags().StringVar(&f.end, "end", "", "dead-lettered before: unix ms, RFC 3339 or 'now'")
}

func (f *dlqFlags) addGroup(c *cobra.Command) {
	c.Flags().StringVarP(&f.group, "group", "g", "", "consumer group (required)")
	_ = c.MarkFlagRequired("group")
}

// addSelection adds the flags of resend and purge: the filter, --offset,
// --all and -b.
func (f *dlqFlags) addSelection(c *cobra.Command) {
	f.addGroup(c)
	f.addFilter(c)
	c.Flags().Int64SliceVar(&f.offsets, "offset", nil, "DLQ queue offset(s), comma-separated (with -b when the cluster has several brokers)")
	c.Flags().BoolVar(&f.all, "all", false, "every dead letter of the group")
	c.Flags().StringVarP(&f.broker, "broker", "b", "", "only this broker (name or gRPC address)")
}

func (f *dlqFlags) filter() (client.DLQFilter, error) {
	out := client.DLQFilter{Group: f.group, OriginTopic: f.topic, Key: f.key, MsgID: f.id}
	var err error
	if f.begin != "" {
		if out.Begin, err = parseTime(f.begin, time.Time{}); err != nil {
			return out, err
		}
	}
	if f.end != "" {
		out.End, err = parseTime(f.end, time.Time{})
	}
	return out, err
}

// selection returns the dead letters resend or purge (op) name; naming
// none is a usage error.
func (f *dlqFlags) selection(op string) (client.DLQSelection, error) {
	if !f.all && len(f.offsets) == 0 && f.topic == "" && f.key == "" && f.id == "" && f.begin == "" && f.end == "" {
		return client.DLQSelection{}, usageError("%s: say which dead letters: -i ID, --offset N, a filter (-t, -k, --begin, --end) or --all", op)
	}
	flt, err := f.filter()
	if err != nil {
		return client.DLQSelection{}, usageError("%s: %w", op, err)
	}
	return client.DLQSelection{Filter: flt, Offsets: f.offsets, All: f.all, Broker: f.broker}, nil
}

// noneMatched is the error of a resend or purge whose selection (not
// --all) matched no dead letter: purged, expired or never there.
func (f *dlqFlags) noneMatched(op string) error {
	return fmt.Errorf("%s: no dead letter of group %s matches (purged, expired or never there): %w", op, f.group, client.ErrNotFound)
}

// addDLQVerbs adds the dead-letter verbs (mqadmin has none).
func addDLQVerbs(verb addVerb) {
	var f dlqFlags
	c := verb("dlqList", "List a group's dead letters (filters, paging)", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		flt, err := f.filter()
		if err != nil {
			return err
		}
		page, err := a.DLQList(ctx, flt, f.cursor, f.limit)
		printDeadLetters(out, page.Entries)
		if page.NextCursor != "" {
			fmt.Fprintf(out, "\nNext cursor: %s\n", page.NextCursor)
		}
		return err
	})
	f.addGroup(c)
	f.addFilter(c)
	c.Flags().IntVar(&f.limit, "limit", 100, "at most this many (a broker answers at most 1000)")
	c.Flags().StringVar(&f.cursor, "cursor", "", "continue from a previous page's next cursor")

	var offset int64
	c = verb("dlqShow", "Show a dead letter: body, properties, history", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		if f.id == "" && offset < 0 {
			return errors.New("give the dead letter: -i ID or --offset N")
		}
		m, err := a.DLQShow(ctx, client.DLQRef{Group: f.group, MsgID: f.id, Offset: offset, Broker: f.broker})
		if err != nil {
			return err
		}
		printDeadLetter(out, m)
		return nil
	})
	f.addGroup(c)
	c.Flags().StringVarP(&f.id, "msgId", "i", "", "message id (UNIQ_KEY), original id or offset id")
	c.Flags().Int64Var(&offset, "offset", -1, "DLQ queue offset (with -b when the cluster has several brokers)")
	c.Flags().StringVarP(&f.broker, "broker", "b", "", "the broker (name or gRPC address)")

	c = verb("dlqResend", "Resend dead letters to their topic (or the group's retry topic)", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		sel, err := f.selection("dlqResend")
		if err != nil {
			return err
		}
		res, err := a.DLQResend(ctx, sel, f.toRetry)
		switch n := len(res.Resent) + len(res.Failed); {
		case err != nil && n == 0:
			return err
		case n == 0 && !f.all:
			return f.noneMatched("dlqResend")
		}
		printResent(out, res)
		if err == nil && len(res.Failed) > 0 {
			err = fmt.Errorf("dlqResend: %d dead letter(s) not resent", len(res.Failed))
		}
		return err
	})
	f.addSelection(c)
	c.Flags().BoolVar(&f.toRetry, "to-retry", false, "send to %RETRY%<group> (only this group gets them) instead of the original topic")

	c = verb("dlqExport", "Export dead letters as JSON lines (body in base64)", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		flt, err := f.filter()
		if err != nil {
			return err
		}
		if f.outFile == "" {
			_, err = a.DLQExport(ctx, flt, out)
			return err
		}
		return exportToFile(ctx, a, flt, f.outFile, out)
	})
	f.addGroup(c)
	f.addFilter(c)
	c.Flags().StringVarP(&f.outFile, "output", "o", "", "write to this file instead of standard output")

	c = verb("dlqPurge", "Delete dead letters for good", func(ctx context.Context, a *client.Admin, out io.Writer) error {
		sel, err := f.selection("dlqPurge")
		if err != nil {
			return err
		}
		n, err := a.DLQPurge(ctx, sel)
		switch {
		case err != nil && n == 0:
			return err
		case n == 0 && !f.all:
			return f.noneMatched("dlqPurge")
		}
		fmt.Fprintf(out, "purged %d dead letter(s) of group %s\n", n, f.group)
		return err
	})
	f.addSelection(c)
}

// exportToFile writes an export to path (replacing it) and says how many
// dead letters it holds.
func exportToFile(ctx context.Context, a *client.Admin, flt client.DLQFilter, path string, out io.Writer) error {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	n, err := a.DLQExport(ctx, flt, file)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	fmt.Fprintf(out, "exported %d dead letter(s) of group %s to %s\n", n, flt.Group, path)
	return err
}

func printDeadLetters(out io.Writer, ds []client.DeadLetter) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#Broker Name\t#Offset\t#Message ID\t#Origin Topic\t#Keys\t#Tags\t#Reconsume\t#Dead-Lettered\t#Resends\t#Last Resend\t#Size\t#Reason")
	for _, d := range ds {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%d\t%s\n", d.BrokerName, d.Offset, d.UniqKey, d.OriginTopic,
			orDash(strings.Join(d.Keys, " ")), orDash(d.Tags), d.ReconsumeTimes, fmtTime(d.DeadLetterTime), d.Resends,
			fmtTime(d.LastResend), d.BodySize, orDash(d.Reason))
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printDeadLetter(out io.Writer, m *client.DeadLetterMessage) {
	fmt.Fprintf(out, "Broker:              %s\nDLQ Offset:          %d\nOffsetID:            %s\nMessage ID:          %s\n",
		m.BrokerName, m.Offset, m.MsgID, m.UniqKey)
	fmt.Fprintf(out, "Origin Topic:        %s\nOrigin Message ID:   %s\nTags:                [%s]\nKeys:                %v\n",
		m.OriginTopic, m.OriginMsgID, m.Tags, m.Keys)
	fmt.Fprintf(out, "Reconsume Times:     %d\nReason:              %s\nBorn Timestamp:      %s\nDead-Lettered:       %s\n",
		m.ReconsumeTimes, orDash(m.Reason), fmtTime(m.BornTime), fmtTime(m.DeadLetterTime))
	fmt.Fprintf(out, "Expires:             %s\nResends:             %d\nLast Resend:         %s\nProperties:          %v\n",
		fmtTime(m.Expires), m.Resends, fmtTime(m.LastResend), m.Properties)
	if m.Compressed {
		fmt.Fprintf(out, "Message Body:        (compressed, %d bytes)\n", len(m.Body))
	} else {
		fmt.Fprintf(out, "Message Body:        %q\n", truncate(m.Body, 512))
	}
	fmt.Fprintln(out, "\nHistory:")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, h := range m.History {
		fmt.Fprintf(tw, "  %s\t%s\n", fmtTime(h.Time), h.What)
	}
	tw.Flush()
}

func printResent(out io.Writer, res client.DLQResendResult) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#Broker Name\t#Offset\t#Message ID\t#Topic\t#New Offset ID\t#Resends")
	for _, r := range res.Resent {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\n", r.BrokerName, r.Offset, r.UniqKey, r.Topic, r.MsgID, r.Resends)
	}
	tw.Flush()
	if len(res.Failed) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "#Broker Name\t#Offset\t#Message ID\t#Error")
		for _, f := range res.Failed {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", f.BrokerName, f.Offset, f.UniqKey, f.Error)
		}
		tw.Flush()
	}
	fmt.Fprintf(out, "\nresent %d, failed %d\n", len(res.Resent), len(res.Failed))
}
