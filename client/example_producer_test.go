package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// A producer sends messages one at a time. Messages with one ShardingKey
// go to one queue, in order, with no option to set.
func ExampleProducer() {
	ctx := context.Background()
	cluster, err := embedded.Start(ctx, embedded.Options{}) // a nameserver and a broker in this process
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close(ctx)

	p, err := client.NewProducer(ctx, client.Config{NameServers: []string{cluster.NameServerAddr()}})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx) // waits for what is still being sent

	var queues []int32
	for _, event := range []string{"created", "paid", "shipped"} {
		res, err := p.Send(ctx, &client.Message{Topic: "Orders", Body: []byte("order 42 " + event), ShardingKey: "order-42"})
		var ind *client.IndeterminateError
		switch {
		case errors.As(err, &ind):
			// Maybe stored: look ind.UniqKeys up in ind.Queue.Topic with
			// Admin.QueryMessageByUniqKey before sending again.
			log.Fatalf("check %v in %s: %v", ind.UniqKeys, ind.Queue.Topic, err)
		case err != nil:
			log.Fatal(err) // not stored
		}
		queues = append(queues, res.QueueID)
	}
	fmt.Println("one queue for the order:", queues[0] == queues[1] && queues[1] == queues[2])
	// Output:
	// one queue for the order: true
}

// SendAsync takes one callback for every message: it gets its message
// back, so no closure is made per send. Flush waits for the callbacks of
// the sends before it.
func ExampleProducer_SendAsync() {
	ctx := context.Background()
	cluster, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close(ctx)

	// At most 1,000 messages or 8 MiB accepted and not yet sent: SendAsync
	// blocks beyond that until the broker catches up.
	p, err := client.NewProducer(ctx, client.Config{NameServers: []string{cluster.NameServerAddr()}},
		client.WithMaxBuffered(1000, 8<<20))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)

	var sent, failed atomic.Int64
	done := func(msg *client.Message, res client.SendResult, err error) {
		if err != nil {
			failed.Add(1) // runs on the producer's goroutine: keep it short
			return
		}
		sent.Add(1)
	}
	for i := range 100 {
		p.SendAsync(ctx, &client.Message{Topic: "Events", Body: fmt.Appendf(nil, "event %d", i)}, done)
	}
	if err := p.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("sent:", sent.Load(), "failed:", failed.Load())
	// Output:
	// sent: 100 failed: 0
}
