package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"slices"
	"time"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// A push consumer of group "billing" handles the orders sent to "Orders".
// An order that cannot be handled yet is retried alone, a second later:
// RetryAfter settles that message apart from its batch, the others are
// done. Shutdown, deferred with the signal context, lets the handlers in
// flight finish even after a signal ended that context.
func ExamplePushConsumer() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	// A nameserver and a broker in this process; a real deployment gives
	// its nameservers' addresses instead.
	cluster, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close(context.Background())
	cfg := client.Config{NameServers: []string{cluster.NameServerAddr()}}

	producer, err := client.NewProducer(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer producer.Close(context.Background())
	for _, order := range []string{"order-1", "order-2", "order-3"} {
		if _, err := producer.Send(ctx, &client.Message{Topic: "Orders", Body: []byte(order)}); err != nil {
			log.Fatal(err)
		}
	}

	handled := make(chan string, 10)
	handler := func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			if string(m.Body) == "order-2" && m.ReconsumeTimes == 0 {
				m.RetryAfter(time.Second) // its payment has not arrived yet: this one again later
				continue
			}
			handled <- fmt.Sprintf("%s, attempt %d", m.Body, m.ReconsumeTimes+1)
		}
		return client.ConsumeSuccess // for the others
	}
	c, err := client.NewPushConsumer(ctx, cfg, "billing", handler,
		client.WithConsumeFrom(client.ConsumeFromFirstOffset), client.WithConsumeBatchSize(16))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Subscribe("Orders", "*"); err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Shutdown(ctx)

	var got []string
	for range 3 {
		got = append(got, <-handled)
	}
	slices.Sort(got) // handlers run concurrently
	for _, s := range got {
		fmt.Println(s)
	}
	// Output:
	// order-1, attempt 1
	// order-2, attempt 2
	// order-3, attempt 1
}
