package compat

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// failoverWait bounds the waits around a failover: the official client
// reads routes from the nameserver only every 30 s (a constant of the
// client, _PullNameServerInterval), so it may send to and pull from the
// dead master for that long before it learns the new one.
const failoverWait = 3 * time.Minute

// ackLog is what a producer sending in the background was told: the
// bodies of the messages answered SEND_OK, in order, and its failures.
type ackLog struct {
	mu     sync.Mutex
	acked  []string
	ackAt  []time.Time
	failed int
	last   error // the last failure
}

func (a *ackLog) ok(body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acked = append(a.acked, body)
	a.ackAt = append(a.ackAt, time.Now())
}

func (a *ackLog) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failed++
	a.last = err
}

// since returns how many sends were acknowledged after t, and when the
// first of them was.
func (a *ackLog) since(t time.Time) (n int, first time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, at := range a.ackAt {
		if at.After(t) {
			if n == 0 {
				first = at
			}
			n++
		}
	}
	return n, first
}

func (a *ackLog) snapshot() (acked []string, failed int, last error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.acked...), a.failed, a.last
}

// produce sends message after message with SendSync, logging each
// answer in log, until the returned function is called; it stops the
// sender and waits for it.
func produce(p rocketmq.Producer, topic string, log *ackLog) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			body := fmt.Sprintf("failover-%05d", i)
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			r, err := p.SendSync(sctx, primitive.NewMessage(topic, []byte(body)))
			scancel()
			switch {
			case err != nil:
				log.fail(err)
			case r.Status != primitive.SendOK:
				log.fail(fmt.Errorf("send %s: status %d", body, r.Status))
			default:
				log.ok(body)
			}
			pause := 20 * time.Millisecond // a steady stream, not a flood, on a shared machine
			if err != nil {
				pause = 100 * time.Millisecond // a dead broker refuses at once
			}
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// TestFailoverKeepsEveryAck runs the official producer and push consumer
// against a controller-mode group of three SYNC_MASTER brokers, kills the
// master while the producer sends, and checks that the producer goes on
// through the new master once it has learned the new route, and that
// every message answered SEND_OK, before or after the failover, is
// consumed (at least once: duplicates are allowed).
func TestFailoverKeepsEveryAck(t *testing.T) {
	if testing.Short() {
		t.Skip("a failover waits for the official client's 30 s route refresh")
	}
	t.Parallel()
	c, err := embedded.Start(t.Context(), embedded.Options{Replicas: 3, Logger: clusterLogger(t), Broker: func(bc *broker.Config) {
		bc.BrokerRole, bc.MessageDelayLevel = broker.SyncMaster, shortDelayLevels
		bc.SlaveTimeout = 10 * time.Second // a busy machine must not time out a healthy slave
	}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	e := &env{t: t, c: c, ns: c.NameServerRemotingAddr(), cfg: client.Config{NameServers: []string{c.NameServerAddr()}}}

	const topic, group = "T_failover", "G_failover"
	require.NoError(t, c.Broker().CreateOrUpdateTopic(metadata.TopicConfig{
		TopicName: topic, ReadQueueNums: 4, WriteQueueNums: 4, Perm: metadata.PermRead | metadata.PermWrite}))
	// Every broker must know the topic before the master may die: a slave
	// learns it from the master's metadata, about every second.
	for id := int64(1); id <= 3; id++ {
		eventually(t, waitShort, fmt.Sprintf("broker %d has %s", id, topic), func() (bool, string) {
			m := c.Member(id)
			if m == nil || m.Server() == nil {
				return false, "restarting"
			}
			_, ok := m.Server().Broker().Topic(topic)
			return ok, "no topic yet"
		})
	}

	rec := newRecorder()
	e.pushConsumer(group, topic, all, rec.handler("C"))
	p := e.producer(producer.WithSendMsgTimeout(5 * time.Second))
	log := &ackLog{}
	stop := produce(p, topic, log)
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	eventually(t, waitLong, "acks before the failover", func() (bool, string) {
		n, _ := log.since(time.Time{})
		return n >= 50, fmt.Sprintf("%d acked", n)
	})

	old, ep := c.MasterID()
	require.NotZero(t, old)
	killedAt := time.Now()
	require.NoError(t, c.KillMember(old))
	ctx, cancel := context.WithTimeout(t.Context(), failoverWait)
	defer cancel()
	next, err := c.WaitMaster(ctx, ep)
	require.NoError(t, err)
	elected := time.Since(killedAt)
	require.NotEqual(t, old, next)

	// The producer goes on: the first acks after the new master's election
	// come once the official client has read the new route.
	eventually(t, failoverWait, "acks through the new master", func() (bool, string) {
		n, _ := log.since(killedAt.Add(elected))
		_, failed, last := log.snapshot()
		return n >= 50, fmt.Sprintf("%d acked after the election, %d failures, the last: %v", n, failed, last)
	})
	_, resumed := log.since(killedAt.Add(elected))
	stop()
	stopped = true
	acked, failed, last := log.snapshot()

	start := time.Now()
	rec.waitBodies(t, acked, failoverWait)
	dups, _ := rec.duplicates(acked)
	t.Logf("master %d killed; broker %d elected after %s; the producer's first ack after the election %s after the kill; "+
		"%d messages acked, %d sends failed (the last: %v); all consumed %s after the producer stopped, %d duplicates",
		old, next, elected.Round(time.Millisecond), resumed.Sub(killedAt).Round(time.Millisecond),
		len(acked), failed, last, time.Since(start).Round(time.Millisecond), dups)
	assert.Positive(t, failed, "sends to the dead master fail until the client reads the new route")
}
