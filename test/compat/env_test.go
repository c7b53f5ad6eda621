package compat

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/remotingapi"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// Bounds of the suite's waits. They are generous (a -race run on two
// cores shares them with the other parallel tests) but every wait ends.
const (
	waitShort = 15 * time.Second
	waitLong  = 90 * time.Second // covers the official client's 30 s heartbeat and 20 s rebalance timers
	tick      = 20 * time.Millisecond
)

// shortDelayLevels is the broker's messageDelayLevel in this suite: level
// L waits shortDelayLevels[L-1]. The retry ladder starts at level 3 (plus
// the times the message was reconsumed), so retries wait 1 s, then 2 s,
// then 3 s, ...
var shortDelayLevels = func() []time.Duration {
	l := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, time.Second, 2 * time.Second}
	for len(l) < 18 {
		l = append(l, 3*time.Second)
	}
	return l
}()

// env is one test's embedded cluster, Gantry's admin for inspecting it,
// and the official clients the test made (shut down by the test's
// cleanup, before the cluster closes).
type env struct {
	t     testing.TB
	c     *embedded.Cluster
	ns    string        // the nameserver's remoting address: the official client's
	cfg   client.Config // Gantry's client (gRPC)
	admin *client.Admin
}

// newEnv starts a cluster with short delay levels, adjusted by opts.
// The test's cleanup checks that no connection to the broker's remoting
// port outlived the official clients, closes the cluster and checks that
// it closed every connection it had accepted.
func newEnv(t testing.TB, opts ...func(*broker.Config)) *env {
	t.Helper()
	return newEnvWith(t, nil, opts...)
}

// newEnvWith is newEnv with the broker's remoting front end adjusted by
// remoting (if set).
func newEnvWith(t testing.TB, remoting func(*remotingapi.Config), opts ...func(*broker.Config)) *env {
	t.Helper()
	return startEnv(t, embedded.Options{Remoting: remoting, Broker: func(bc *broker.Config) {
		for _, o := range opts {
			o(bc)
		}
	}}, client.Credentials{}, nil)
}

// startEnv is newEnv with the cluster's options o (the suite's logger and
// delay levels added), the credentials of Gantry's client and admin, and
// their TLS conf (nil: plaintext).
func startEnv(t testing.TB, o embedded.Options, creds client.Credentials, conf *tls.Config) *env {
	t.Helper()
	o.Logger = clusterLogger(t)
	adjust := o.Broker
	o.Broker = func(bc *broker.Config) {
		bc.MessageDelayLevel = shortDelayLevels
		if adjust != nil {
			adjust(bc)
		}
	}
	c, err := embedded.Start(t.Context(), o)
	require.NoError(t, err)
	e := &env{t: t, c: c, ns: c.NameServerRemotingAddr(),
		cfg: client.Config{NameServers: []string{c.NameServerAddr()}, Credentials: creds, TLS: conf}}
	t.Cleanup(func() {
		e.checkBrokerConns()
		if e.admin != nil {
			_ = e.admin.Close()
		}
		brokerPort := portOf(c.BrokerRemotingAddr())
		require.NoError(t, c.Close(context.Background()))
		e.checkServerConns(brokerPort)
	})
	host, _, err := net.SplitHostPort(e.ns)
	require.NoError(t, err)
	require.NotNil(t, net.ParseIP(host), "the official client needs an IP literal as nameserver address, got %q", e.ns)
	e.admin, err = client.NewAdmin(t.Context(), e.cfg)
	require.NoError(t, err)
	return e
}

// in returns e for subtest t: the helpers' checks fail t, and the clients
// they start are shut down at t's end.
func (e *env) in(t testing.TB) *env {
	sub := *e
	sub.t = t
	return &sub
}

// clusterLogger returns the embedded cluster's logger: silent, unless
// GANTRY_COMPAT_LOG names a level (debug, info, warn, error), then the
// test's log at that level, to see what the broker made of a request.
func clusterLogger(t testing.TB) *slog.Logger {
	var level slog.Level
	name := os.Getenv("GANTRY_COMPAT_LOG")
	if name == "" || level.UnmarshalText([]byte(name)) != nil {
		return nil
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// createTopic creates topic with queues read and write queues and waits
// until the nameserver routes it.
func (e *env) createTopic(topic string, queues int32) {
	e.t.Helper()
	ctx := e.t.Context()
	require.NoError(e.t, e.admin.CreateTopic(ctx, client.TopicConfig{Name: topic, ReadQueueNums: queues, WriteQueueNums: queues}))
	require.Eventually(e.t, func() bool {
		r, err := e.admin.Route(ctx, topic)
		return err == nil && r != nil
	}, waitShort, tick, "route of %s", topic)
}

// waitDispatched waits until the broker's queues of topic hold n messages
// in all, as its admin reports them: the broker answers a send once the
// message is in the commit log and indexes it into its queue right after
// (RocketMQ's reput), so a read by queue offset or time may briefly miss
// it. It logs waits over 100 ms.
func (e *env) waitDispatched(topic string, n int64) {
	e.t.Helper()
	start := time.Now()
	dumped := false
	eventually(e.t, waitShort, "messages of "+topic+" in their queues", func() (bool, string) {
		if !dumped && time.Since(start) > 500*time.Millisecond {
			dumped = true // once: where is the dispatcher?
			for _, g := range goroutines() {
				if strings.Contains(g.stack, "store.(*Store).dispatch") {
					e.t.Logf("dispatch is slow; a dispatcher goroutine (of any cluster in this process):\n%s", g.stack)
				}
			}
		}
		qs, err := e.admin.TopicStatus(e.t.Context(), topic)
		if err != nil {
			return false, err.Error()
		}
		var total int64
		for _, q := range qs {
			total += q.MaxOffset - q.MinOffset
		}
		return total == n, fmt.Sprintf("%d of %d: %v", total, n, qs)
	})
	if d := time.Since(start); d > 100*time.Millisecond {
		e.t.Logf("the last of %d messages of %s reached its queue %s after its send returned", n, topic, d.Round(time.Millisecond))
	}
}

var instances atomic.Int64

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// instanceName returns a process-unique instance name. The official
// client shares one client (connections, timers) between every producer
// and consumer with the same client id, ip@instance, process-wide; a client
// kept by another test would point to another nameserver. So every
// official producer and consumer here has an instance of its own.
func instanceName(t testing.TB, role string) string {
	return fmt.Sprintf("%s-%s-%d", unsafeName.ReplaceAllString(t.Name(), "_"), role, instances.Add(1))
}

// producer starts an official producer (a group of its own, 2 retries).
func (e *env) producer(opts ...producer.Option) rocketmq.Producer {
	e.t.Helper()
	options := append([]producer.Option{
		producer.WithNameServer(primitive.NamesrvAddr{e.ns}),
		producer.WithGroupName("PG_" + strconv.FormatInt(instances.Add(1), 10)),
		producer.WithInstanceName(instanceName(e.t, "producer")),
		producer.WithRetry(2),
	}, opts...)
	p, err := rocketmq.NewProducer(options...)
	require.NoError(e.t, err)
	require.NoError(e.t, p.Start())
	e.t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// handlerFunc is the official push consumer's handler.
type handlerFunc = func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)

// pushConsumer starts an official push consumer of group on topic, in
// clustering mode, from the first offset, with opts added. Shutdown is
// idempotent; the test's cleanup calls it too.
func (e *env) pushConsumer(group, topic string, sel consumer.MessageSelector, h handlerFunc, opts ...consumer.Option) rocketmq.PushConsumer {
	e.t.Helper()
	options := append([]consumer.Option{
		consumer.WithNameServer(primitive.NamesrvAddr{e.ns}),
		consumer.WithGroupName(group),
		consumer.WithInstance(instanceName(e.t, "push")),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, opts...)
	c, err := rocketmq.NewPushConsumer(options...)
	require.NoError(e.t, err)
	require.NoError(e.t, c.Subscribe(topic, sel, h))
	e.t.Cleanup(func() { _ = c.Shutdown() })
	require.NoError(e.t, c.Start())
	return c
}

// pullConsumer starts an official pull consumer of group subscribed to
// topic with sel, from the first offset.
func (e *env) pullConsumer(group, topic string, sel consumer.MessageSelector, opts ...consumer.Option) rocketmq.PullConsumer {
	e.t.Helper()
	options := append([]consumer.Option{
		consumer.WithNameServer(primitive.NamesrvAddr{e.ns}),
		consumer.WithGroupName(group),
		consumer.WithInstance(instanceName(e.t, "pull")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, opts...)
	c, err := rocketmq.NewPullConsumer(options...)
	require.NoError(e.t, err)
	require.NoError(e.t, c.Subscribe(topic, sel))
	e.t.Cleanup(func() { _ = c.Shutdown() })
	require.NoError(e.t, c.Start())
	return c
}

// waitMembers waits until the broker lists n live clients of group, then
// gives their rebalance (started by the broker's NOTIFY_CONSUMER_IDS_CHANGED
// or by their own start) a moment to finish.
func (e *env) waitMembers(group string, n int) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		cs, err := e.admin.ConsumerConnection(e.t.Context(), group)
		return err == nil && len(cs) == n
	}, waitShort, tick, "%d members of %s", n, group)
	time.Sleep(2 * time.Second) // no deadline to poll: the official client shows no assignment
}

// all selects every message.
var all = consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}

// readTopic reads every message of topic through Gantry's pull consumer
// (gRPC), keyed by queue id and queue offset.
func (e *env) readTopic(topic string) map[[2]int64]*client.MessageExt {
	e.t.Helper()
	ctx := e.t.Context()
	pc, err := client.NewPullConsumer(ctx, e.cfg, "compat_reader")
	require.NoError(e.t, err)
	defer pc.Close(context.Background())
	qs, err := pc.Queues(ctx, topic)
	require.NoError(e.t, err)
	out := map[[2]int64]*client.MessageExt{}
	for _, q := range qs {
		_, maxOff, err := pc.QueueOffsets(ctx, q)
		require.NoError(e.t, err)
		for off := int64(0); off < maxOff; {
			r, err := pc.Pull(ctx, q, off, client.PullOptions{MaxMessages: 256})
			require.NoError(e.t, err)
			require.Equal(e.t, client.PullFound, r.Status, "pull %s/%d at %d", topic, q.ID, off)
			for _, m := range r.Messages {
				out[[2]int64{int64(q.ID), m.QueueOffset}] = m
			}
			off = r.NextOffset
		}
	}
	return out
}

// userProps returns the user properties of a stored message: every
// property but RocketMQ's and Gantry's system ones.
func userProps(props map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range props {
		if !systemProps[k] {
			out[k] = v
		}
	}
	return out
}

var systemProps = map[string]bool{
	"KEYS": true, "TAGS": true, "UNIQ_KEY": true, "WAIT": true, "DELAY": true, "TIMER_DELIVER_MS": true,
	"TIMER_DELAY_SEC": true, "REAL_TOPIC": true, "REAL_QID": true, "RETRY_TOPIC": true, "ORIGIN_MESSAGE_ID": true,
	"RECONSUME_TIME": true, "MAX_RECONSUME_TIMES": true, "CONSUME_START_TIME": true, "MIN_OFFSET": true,
	"MAX_OFFSET": true, "TRAN_MSG": true, "PGROUP": true, "CLUSTER": true, "MSG_REGION": true, "TRACE_ON": true,
	"SHARDING_KEY": true, "__SHARDINGKEY": true, "__CRC32#": true, "DLQ_ORIGIN_TOPIC": true,
	"DLQ_ORIGIN_MESSAGE_ID": true, "DLQ_REASON": true, "DLQ_RESENDS": true, "IDEMPOTENCY_KEY": true,
}

// eventually polls cond every tick until it holds, failing the test after
// within with what cond said last.
func eventually(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after %s; last: %s", what, within, state)
		}
		time.Sleep(tick)
	}
}
