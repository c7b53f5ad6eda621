package workload

import (
	"context"
	"errors"
	"fmt"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/test/reliability/history"
)

// drainGroup is the group the drain pulls as (it commits nothing).
const drainGroup = "reliability-drain"

// Drain reads every queue of topic from its min to its max offset and
// records a Queue event per queue and a Drain event per message. A batch
// that does not decode is recorded as one corrupt message (no id) at the
// offset where it stopped, and the drain goes on after it. It returns how
// many messages it read.
func Drain(ctx context.Context, cfg client.Config, topic string, w *history.Writer) (int, error) {
	pc, err := client.NewPullConsumer(ctx, cfg, drainGroup)
	if err != nil {
		return 0, err
	}
	defer pc.Close(context.Background())
	qs, err := pc.Queues(ctx, topic)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, q := range qs {
		k, err := drainQueue(ctx, pc, q, w)
		n += k
		if err != nil {
			return n, fmt.Errorf("drain %s queue %d: %w", topic, q.ID, err)
		}
	}
	return n, w.Sync()
}

func drainQueue(ctx context.Context, pc *client.PullConsumer, q client.Queue, w *history.Writer) (int, error) {
	lo, hi, err := pc.QueueOffsets(ctx, q)
	if err != nil {
		return 0, err
	}
	w.Add(history.Event{Kind: history.Queue, Topic: q.Topic, Broker: q.BrokerName, Queue: q.ID, Offset: lo, Max: hi,
		Time: history.Now()})
	n := 0
	for off := lo; off < hi; {
		r, err := pc.Pull(ctx, q, off, client.PullOptions{MaxMessages: 256})
		for _, m := range r.Messages {
			w.Add(ReadEvent(history.Drain, "drain", m))
			n++
			off = m.QueueOffset + 1
		}
		var se *client.StatusError
		switch {
		case err != nil && errors.As(err, &se):
			return n, err // the call failed
		case err != nil: // a record that does not decode: corrupt, without an id
			w.Add(history.Event{Kind: history.Drain, Topic: q.Topic, Broker: q.BrokerName, Queue: q.ID, Offset: off,
				Err: err.Error(), Time: history.Now()})
			off++
		case len(r.Messages) == 0:
			if r.NextOffset <= off {
				return n, fmt.Errorf("pull at %d found nothing (%s, next %d) below max %d", off, r.Status, r.NextOffset, hi)
			}
			off = r.NextOffset
		}
	}
	return n, nil
}
