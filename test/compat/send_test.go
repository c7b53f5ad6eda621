package compat

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
)

// sent is a message the official producer sent and what it was told.
type sent struct {
	msg *primitive.Message
	// The send result's fields for this message: the client's id
	// (UNIQ_KEY; empty inside a batch, where the client sets none), the
	// offset message id, the queue and the queue offset.
	msgID, offsetMsgID string
	queue              int
	queueOffset        int64
}

// testMessage builds message i of a test: a body naming it, tag A or B,
// two keys and two user properties.
func testMessage(topic, prefix string, i int) *primitive.Message {
	m := primitive.NewMessage(topic, fmt.Appendf(nil, "%s-%d", prefix, i))
	m.WithTag([]string{"TagA", "TagB"}[i%2])
	m.WithKeys([]string{fmt.Sprintf("%s-key-%d", prefix, i), fmt.Sprintf("order-%d", i/4)})
	m.WithProperty("color", fmt.Sprintf("c%d", i%3))
	m.WithProperty("prefix", prefix)
	return m
}

// TestSend sends with each of the official producer's calls and reads every
// message back through Gantry's client at the queue and offset the
// producer was told, checking body, tags, keys, user properties, the
// client's id and the offset message id.
func TestSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.producer()
	const n = 20
	tests := []struct {
		name string
		send func(t *testing.T, topic string) []sent
	}{
		{"SendSync", func(t *testing.T, topic string) []sent {
			var out []sent
			for i := range n {
				m := testMessage(topic, "sync", i)
				r, err := p.SendSync(t.Context(), m)
				require.NoError(t, err)
				require.Equal(t, primitive.SendOK, r.Status)
				out = append(out, sent{msg: m, msgID: r.MsgID, offsetMsgID: r.OffsetMsgID, queue: r.MessageQueue.QueueId, queueOffset: r.QueueOffset})
			}
			return out
		}},
		{"SendSyncBatch", func(t *testing.T, topic string) []sent {
			var out []sent
			for b := range 2 {
				var batch []*primitive.Message
				for i := range n / 2 {
					batch = append(batch, testMessage(topic, "batch", b*n/2+i))
				}
				r, err := p.SendSync(t.Context(), batch...)
				require.NoError(t, err)
				require.Equal(t, primitive.SendOK, r.Status)
				ids := strings.Split(r.OffsetMsgID, ",")
				t.Logf("batch %d: queue %d offset %d, %d offset ids (first %s), msgId %q", b, r.MessageQueue.QueueId, r.QueueOffset, len(ids), ids[0], r.MsgID)
				// Java answers a batch with every message's offset id,
				// comma-separated, in order.
				require.Len(t, ids, len(batch), "offset ids of a batch of %d: %q", len(batch), r.OffsetMsgID)
				for i, m := range batch {
					out = append(out, sent{msg: m, offsetMsgID: ids[i], queue: r.MessageQueue.QueueId, queueOffset: r.QueueOffset + int64(i)})
				}
			}
			return out
		}},
		{"SendAsync", func(t *testing.T, topic string) []sent {
			out := make([]sent, n)
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				m := testMessage(topic, "async", i)
				wg.Add(1)
				err := p.SendAsync(t.Context(), func(_ context.Context, r *primitive.SendResult, err error) {
					defer wg.Done()
					if err != nil {
						errs <- err
						return
					}
					out[i] = sent{msg: m, msgID: r.MsgID, offsetMsgID: r.OffsetMsgID, queue: r.MessageQueue.QueueId, queueOffset: r.QueueOffset}
				}, m)
				if err != nil {
					wg.Done()
					errs <- err
				}
			}
			waitGroup(t, &wg, waitShort)
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			return out
		}},
		{"SendOneWay", func(t *testing.T, topic string) []sent {
			var out []sent
			for i := range n {
				m := testMessage(topic, "oneway", i)
				require.NoError(t, p.SendOneWay(t.Context(), m))
				// No result: the client's id is in the message (the
				// producer set UNIQ_KEY on it); queue and offset unknown.
				out = append(out, sent{msg: m, msgID: m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex), queue: -1})
			}
			return out
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := e.in(t)
			topic := "T_" + tt.name
			e.createTopic(topic, 4)
			start := time.Now()
			msgs := tt.send(t, topic)
			elapsed := time.Since(start)
			var got map[[2]int64]*client.MessageExt
			eventually(t, waitShort, "messages stored", func() (bool, string) {
				got = e.readTopic(topic)
				return len(got) >= len(msgs), fmt.Sprintf("%d sent, %d stored", len(msgs), len(got))
			})
			assert.Len(t, got, len(msgs), "stored messages")
			checkStored(t, msgs, got)
			queues := map[int64]int{}
			for k := range got {
				queues[k[0]]++
			}
			t.Logf("%s: %d messages in %s, all read back as sent; messages per queue %v", tt.name, len(msgs), elapsed.Round(time.Millisecond), queues)
		})
	}
}

// checkStored checks that every sent message is stored as sent, where the
// producer was told (if it was told).
func checkStored(t *testing.T, msgs []sent, got map[[2]int64]*client.MessageExt) {
	t.Helper()
	byBody := map[string]*client.MessageExt{}
	for _, m := range got {
		byBody[string(m.Body)] = m
	}
	for _, s := range msgs {
		body := string(s.msg.Body)
		g := byBody[body]
		if !assert.NotNil(t, g, "message %q not stored", body) {
			continue
		}
		if s.queue >= 0 {
			at := got[[2]int64{int64(s.queue), s.queueOffset}]
			if assert.NotNil(t, at, "%q: nothing stored at queue %d offset %d", body, s.queue, s.queueOffset) {
				assert.Equal(t, body, string(at.Body), "message at queue %d offset %d", s.queue, s.queueOffset)
			}
		}
		if s.offsetMsgID != "" {
			assert.Equal(t, s.offsetMsgID, g.MsgID(), "%q: offset message id", body)
		}
		if s.msgID != "" {
			assert.Equal(t, s.msgID, g.UniqKey, "%q: UNIQ_KEY", body)
		} else {
			assert.NotEmpty(t, g.UniqKey, "%q: the broker adds UNIQ_KEY where the client set none (batch)", body)
		}
		assert.Equal(t, s.msg.GetTags(), g.Tags, "%q: tags", body)
		assert.Equal(t, strings.Fields(s.msg.GetKeys()), g.Keys(), "%q: keys", body)
		want := userProps(s.msg.GetProperties())
		assert.Equal(t, want, userProps(g.Properties()), "%q: user properties", body)
		assert.Equal(t, s.msg.Topic, g.Topic, "%q: topic", body)
	}
}

// waitGroup waits for wg, failing the test after d.
func waitGroup(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("not done after %s", d)
	}
}

// sendAll sends msgs one by one with SendSync and returns what the
// producer was told.
func sendAll(t *testing.T, p rocketmq.Producer, msgs []*primitive.Message) []sent {
	t.Helper()
	out := make([]sent, 0, len(msgs))
	for _, m := range msgs {
		r, err := p.SendSync(t.Context(), m)
		require.NoError(t, err)
		require.Equal(t, primitive.SendOK, r.Status)
		out = append(out, sent{msg: m, msgID: r.MsgID, offsetMsgID: r.OffsetMsgID, queue: r.MessageQueue.QueueId, queueOffset: r.QueueOffset})
	}
	return out
}

// label names a message by its body, cut to 40 bytes.
func label(body []byte) string {
	if len(body) > 40 {
		return fmt.Sprintf("%q... (%d bytes)", body[:40], len(body))
	}
	return fmt.Sprintf("%q", body)
}
