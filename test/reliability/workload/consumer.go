package workload

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/test/reliability/history"
)

// ConsumerSpec configures a push-consumer worker.
type ConsumerSpec struct {
	// Worker names the worker in its events.
	Worker      string
	NameServers []string
	Topic       string
	Group       string
	History     string
	// BatchSize is the most messages a handler call gets. Default 4.
	BatchSize int
	// HandleDelay is spent on each message, so that a kill lands in the
	// middle of a batch. Default none.
	HandleDelay time.Duration
	// CommitInterval is how often offsets are committed. Default 200 ms.
	CommitInterval time.Duration
	Dial           map[string]string
	// RouteRefresh is the client's route refresh period; 0: its default.
	RouteRefresh time.Duration
	// OnStarted, if set, is called once the consumer has started.
	OnStarted func() `json:"-"`
}

// RunConsumer consumes the topic from its first offset until ctx ends,
// then shuts the consumer down (committing). For every message the
// handler writes a Recv event before going on (one write each), and syncs
// the history before returning success for the batch: a message counts as
// handled once its event is written, and no offset can be committed past a
// message before its handler call returned.
func RunConsumer(ctx context.Context, spec ConsumerSpec) (handled int64, err error) {
	if spec.BatchSize <= 0 {
		spec.BatchSize = 4
	}
	if spec.CommitInterval <= 0 {
		spec.CommitInterval = 200 * time.Millisecond
	}
	w, err := history.Create(spec.History)
	if err != nil {
		return 0, err
	}
	defer w.Close()
	var batches, count atomic.Int64
	h := func(hctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		batch := batches.Add(1)
		for _, m := range msgs {
			if spec.HandleDelay > 0 {
				time.Sleep(spec.HandleDelay)
			}
			e := ReadEvent(history.Recv, spec.Worker, m)
			e.Batch = batch
			w.Add(e)
			if w.Flush() != nil {
				return client.ConsumeRetryLater
			}
			count.Add(1)
		}
		if w.Sync() != nil {
			return client.ConsumeRetryLater
		}
		return client.ConsumeSuccess
	}
	cfg := ClientConfig(spec.NameServers, spec.Dial)
	cfg.RouteRefresh = spec.RouteRefresh
	cfg.ClientID = spec.Worker
	c, err := client.NewPushConsumer(ctx, cfg, spec.Group, h,
		client.WithConsumeFrom(client.ConsumeFromFirstOffset), client.WithConsumeBatchSize(spec.BatchSize),
		client.WithCommitInterval(spec.CommitInterval), client.WithFetchHold(time.Second),
		client.WithRebalanceInterval(time.Second), client.WithHeartbeatInterval(time.Second))
	if err != nil {
		return 0, err
	}
	if err := c.Subscribe(spec.Topic, "*"); err != nil {
		return 0, err
	}
	if err := c.Start(ctx); err != nil {
		return 0, err
	}
	if spec.OnStarted != nil {
		spec.OnStarted()
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = c.Shutdown(sctx)
	return count.Load(), err
}
