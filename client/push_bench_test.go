package client

import (
	"context"
	"testing"

	"github.com/gantrymq/gantry/message"
)

// BenchmarkPushConsume hands pulled messages to a handler that succeeds,
// one message a call, as a concurrent push consumer's worker does: its
// process queue's bookkeeping, the handler call and its context. An op is
// one message.
//
// BenchmarkPushDeliver measures the whole path, pulls included.
//
//	go test -run=^$ -bench=PushConsume -benchmem ./client
func BenchmarkPushConsume(b *testing.B) {
	const pull = 256
	p, err := NewPushConsumer(b.Context(), Config{NameServers: []string{"127.0.0.1:1"}}, "g",
		func(context.Context, []*MessageExt) ConsumeResult { return ConsumeSuccess })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.c.close() })
	p.handlerCtx = context.Background()
	aq := &assignedQueue{q: Queue{Topic: "T"}, pq: newProcessQueue(0, false)}
	msgs := make([]*MessageExt, pull)
	for i := range msgs {
		msgs[i] = &MessageExt{Message: &message.Message{}, Body: make([]byte, 100)}
	}
	var off int64
	b.ReportAllocs()
	for i := 0; i < b.N; i += pull {
		n := min(pull, b.N-i)
		for _, m := range msgs[:n] {
			m.QueueOffset = off
			off++
		}
		aq.pq.put(msgs[:n], off)
		aq.inflight.Add(1)
		p.consume(consumeTask{aq: aq, msgs: msgs[:n]})
	}
}
