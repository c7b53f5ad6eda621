// Command rocketmq-client sends a few messages to a Gantry broker with the
// official Apache RocketMQ Go client and receives them with its push
// consumer. It exits 0 once every message has been received, 1 on any
// error.
//
//	go run ./cmd/gantry dev                      # from the repository root
//	cd docs/examples/rocketmq-client && go run . # in another terminal
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func main() {
	nameServer := flag.String("n", "127.0.0.1:9876", "nameserver address (IP:port)")
	brokerAddr := flag.String("b", "127.0.0.1:10911", "broker's RocketMQ address, where the topic is created")
	topic := flag.String("t", "GantryExample", "topic")
	group := flag.String("g", "GantryExampleGroup", "consumer group")
	count := flag.Int("count", 10, "messages to send")
	timeout := flag.Duration("timeout", time.Minute, "how long to wait for the messages")
	flag.Parse()

	// The official client logs every heartbeat and rebalance at info level.
	rlog.SetLogLevel("error")
	if err := run(*nameServer, *brokerAddr, *topic, *group, *count, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "rocketmq-client:", err)
		os.Exit(1)
	}
}

func run(nameServer, brokerAddr, topic, group string, count int, timeout time.Duration) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ns := primitive.NamesrvAddr{nameServer}

	// A push consumer needs its topic to exist when it starts.
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(ns)))
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	defer func() { err = errors.Join(err, adm.Close()) }()
	if err := adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(brokerAddr)); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}

	p, err := rocketmq.NewProducer(producer.WithNameServer(ns), producer.WithRetry(2))
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return fmt.Errorf("start producer: %w", err)
	}
	defer func() { err = errors.Join(err, p.Shutdown()) }()
	for i := range count {
		msg := primitive.NewMessage(topic, []byte("hello "+strconv.Itoa(i)))
		res, err := p.SendSync(ctx, msg)
		if err != nil {
			return fmt.Errorf("send %d: %w", i, err)
		}
		if res.Status != primitive.SendOK {
			return fmt.Errorf("send %d: status %d", i, res.Status)
		}
		fmt.Printf("sent %s to queue %d\n", res.MsgID, res.MessageQueue.QueueId)
	}

	// The handler may run on several goroutines, and see a message twice
	// (at-least-once delivery): count distinct bodies.
	var mu sync.Mutex
	seen := map[string]bool{}
	done := make(chan struct{})
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer(ns), consumer.WithGroupName(group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if !seen[string(m.Body)] {
				seen[string(m.Body)] = true
				fmt.Printf("received %q from queue %d\n", m.Body, m.Queue.QueueId)
				if len(seen) == count {
					close(done)
				}
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("start consumer: %w", err)
	}
	defer func() { err = errors.Join(err, c.Shutdown()) }()

	select {
	case <-done:
		fmt.Printf("received all %d messages\n", count)
		return nil
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		return fmt.Errorf("received %d of %d messages in %s", len(seen), count, timeout)
	}
}
