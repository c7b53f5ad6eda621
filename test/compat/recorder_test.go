package compat

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// delivery is one message handed to an official consumer's handler.
type delivery struct {
	member string
	at     time.Time
	msg    *primitive.MessageExt
}

// recorder records what official push consumers handled, by body.
type recorder struct {
	mu     sync.Mutex
	byBody map[string][]delivery
	total  int
}

func newRecorder() *recorder { return &recorder{byBody: map[string][]delivery{}} }

// handler returns a handler for member that records every message and
// answers result.
func (r *recorder) handler(member string) handlerFunc {
	return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		now := time.Now()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, m := range msgs {
			r.byBody[string(m.Body)] = append(r.byBody[string(m.Body)], delivery{member: member, at: now, msg: m})
			r.total++
		}
		return consumer.ConsumeSuccess, nil
	}
}

// deliveries returns the deliveries of body.
func (r *recorder) deliveries(body string) []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.byBody[body]...)
}

// waitBodies waits until every body was delivered at least once.
func (r *recorder) waitBodies(t *testing.T, bodies []string, within time.Duration) {
	t.Helper()
	eventually(t, within, "every message consumed", func() (bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		var missing []string
		for _, b := range bodies {
			if len(r.byBody[b]) == 0 {
				missing = append(missing, b)
			}
		}
		return len(missing) == 0, fmt.Sprintf("%d of %d not consumed, such as %q", len(missing), len(bodies), missing[:min(len(missing), 5)])
	})
}

// duplicates returns how many extra deliveries bodies got, and the members
// that handled them.
func (r *recorder) duplicates(bodies []string) (dups int, members map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	members = map[string]int{}
	for _, b := range bodies {
		ds := r.byBody[b]
		if len(ds) > 1 {
			dups += len(ds) - 1
		}
		for _, d := range ds {
			members[d.member]++
		}
	}
	return dups, members
}

// queuesOf returns the queue ids each member handled messages of.
func (r *recorder) queuesOf(bodies []string) map[string]map[int]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]map[int]bool{}
	for _, b := range bodies {
		for _, d := range r.byBody[b] {
			if out[d.member] == nil {
				out[d.member] = map[int]bool{}
			}
			out[d.member][d.msg.Queue.QueueId] = true
		}
	}
	return out
}

func bodiesOf(msgs []*primitive.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}
