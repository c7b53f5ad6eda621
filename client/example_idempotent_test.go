package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/message"
)

// delivered is a message as a consumer receives it: its UNIQ_KEY and, if
// the producer set Message.IdempotencyKey, its IDEMPOTENCY_KEY property.
func delivered(uniqKey, idempotencyKey, body string) *client.MessageExt {
	m := &message.Message{}
	if idempotencyKey != "" {
		m.Properties = message.Properties{{Key: message.PropIdempotencyKey, Value: idempotencyKey}}
	}
	return &client.MessageExt{Message: m, UniqKey: uniqKey, Body: []byte(body)}
}

// Idempotent makes a handler charge each order once, although the
// consumer sees a message again after a redelivery and the producer sent
// order 42 twice (two UNIQ_KEYs, one IdempotencyKey). A failed call
// records nothing, so its redelivery is handled. In a consumer, pass the
// wrapped handler to NewPushConsumer; members of a group share a store of
// their own (a database table) to skip each other's handled messages.
func ExampleIdempotent() {
	paymentsDown := true // until the first attempt at order 44
	charge := func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			if string(m.Body) == "order 44" && paymentsDown {
				paymentsDown = false
				fmt.Println("  payment service down")
				return client.ConsumeRetryLater
			}
			fmt.Printf("  charged %s\n", m.Body)
		}
		return client.ConsumeSuccess
	}
	store := client.NewMemoryIdempotencyStore(24*time.Hour, client.WithMaxKeys(100_000))
	h := client.Idempotent(store, charge, client.WithClaimLease(time.Minute))
	// In an application: client.NewPushConsumer(ctx, cfg, "billing", h,
	// client.WithConsumeTimeout(time.Minute)).

	ctx := context.Background()
	for _, batch := range [][]*client.MessageExt{
		{delivered("U1", "order-42", "order 42"), delivered("U2", "order-43", "order 43")},
		{delivered("U1", "order-42", "order 42"), delivered("U3", "order-42", "order 42, sent again")},
		{delivered("U4", "order-44", "order 44")},
		{delivered("U4", "order-44", "order 44")}, // redelivered after RETRY_LATER
	} {
		fmt.Printf("batch of %d:\n", len(batch))
		fmt.Println(" ", h(ctx, batch))
	}
	// Output:
	// batch of 2:
	//   charged order 42
	//   charged order 43
	//   SUCCESS
	// batch of 2:
	//   SUCCESS
	// batch of 1:
	//   payment service down
	//   RETRY_LATER
	// batch of 1:
	//   charged order 44
	//   SUCCESS
}
