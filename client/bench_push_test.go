package client

import (
	"bytes"
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
)

// BenchmarkPushDeliver measures the push consumer's delivery path per
// message: pull responses decoded into messages, queued, handed to the
// workers and the handler, and marked done. 1 KiB messages of one queue
// of the in-process fake broker, in broadcasting (no queue lock): allocs/op
// is per message, the fake broker's share included.
//
//	go test -run=^$ -bench=PushDeliver -benchmem ./client
func BenchmarkPushDeliver(b *testing.B) {
	br := startBroker(b, "a", 1, "T")
	cfg := testConfig(b, startNameServer(b, br))
	cfg.Logger = slog.New(slog.DiscardHandler)
	prod := newTestProducer(b, cfg)
	body := bytes.Repeat([]byte{'x'}, 1024)
	batch := make([]*Message, 256)
	for sent := 0; sent < b.N; sent += len(batch) {
		n := min(len(batch), b.N-sent)
		for i := range n {
			batch[i] = &Message{Topic: "T", Body: body}
		}
		if _, err := prod.SendBatch(b.Context(), batch[:n]); err != nil {
			b.Fatal(err)
		}
	}
	var got atomic.Int64
	done := make(chan struct{})
	c, err := NewPushConsumer(b.Context(), cfg, "g", func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		if got.Add(int64(len(msgs))) == int64(b.N) {
			close(done)
		}
		return ConsumeSuccess
	}, WithConsumeModel(Broadcasting))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.c.close() })
	// The parts of Start the delivery path needs: its contexts and workers.
	c.life, c.stopLife = context.WithCancel(c.c.life)
	c.handlerCtx, c.stopHandle = context.WithCancel(context.WithoutCancel(c.c.life))
	for range c.opts.concurrency {
		c.tasks.goFunc(c.worker)
	}
	q := Queue{Topic: "T", BrokerName: "a", Broker: br.addr, ID: 0}

	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	aq := c.newAssigned(q, "*", 0)
	c.startLoops(aq)
	<-done
	b.StopTimer()
	aq.cancel()
	aq.loops.Wait()
	aq.inflight.Wait()
	c.stopLife()
	c.stopHandle()
	close(c.work)
	c.tasks.wait()
}
