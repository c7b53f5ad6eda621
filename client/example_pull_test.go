package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// A pull consumer reads a queue from its group's committed offset, marks
// each message it has handled, and commits the marks: Commit here, the
// auto-commit every 5 s otherwise, and Close at the end.
func ExamplePullConsumer() {
	ctx := context.Background()
	cluster, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close(ctx)
	cfg := client.Config{NameServers: []string{cluster.NameServerAddr()}}

	producer, err := client.NewProducer(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer producer.Close(ctx)
	sent, err := producer.SendBatch(ctx, []*client.Message{ // a batch goes to one queue
		{Topic: "Orders", Body: []byte("order-1"), Tags: "created"},
		{Topic: "Orders", Body: []byte("order-1"), Tags: "paid"},
		{Topic: "Orders", Body: []byte("order-2"), Tags: "created"},
	})
	if err != nil {
		log.Fatal(err)
	}

	consumer, err := client.NewPullConsumer(ctx, cfg, "billing")
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close(ctx) // commits what is still marked
	queues, err := consumer.Queues(ctx, "Orders")
	if err != nil {
		log.Fatal(err)
	}
	var q client.Queue
	for _, candidate := range queues {
		if candidate.BrokerName == sent[0].Broker && candidate.ID == sent[0].QueueID {
			q = candidate
		}
	}

	offset, _, err := consumer.CommittedOffset(ctx, q) // 0: the group has committed nothing yet
	if err != nil {
		log.Fatal(err)
	}
	var kept []*client.MessageExt
	for end := sent[len(sent)-1].QueueOffset + 1; offset < end; {
		res, err := consumer.Pull(ctx, q, offset, client.PullOptions{Filter: "created", Hold: time.Second})
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range res.Messages {
			fmt.Printf("%s %s\n", m.Tags, m.Body)
			kept = append(kept, m.Detach()) // kept past the pull: a copy, not a view of the response
			consumer.MarkOffset(q, m.QueueOffset+1)
		}
		offset = res.NextOffset
		consumer.MarkOffset(q, offset) // the messages the filter skipped are done too
	}
	if err := consumer.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	committed, _, err := consumer.CommittedOffset(ctx, q)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("kept:", len(kept), "committed offset:", committed)
	// Output:
	// created order-1
	// created order-2
	// kept: 2 committed offset: 3
}
