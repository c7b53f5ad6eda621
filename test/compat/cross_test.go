package compat

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
)

// crossMessages is how many messages each direction sends: small ones
// plus, last, one of 10 KiB, which the official producer compresses
// (zlib, over 4 KiB by default).
const crossMessages = 21

// crossBody returns body i: "<prefix>-<i>", the last one padded to 10 KiB.
func crossBody(prefix string, i int) []byte {
	b := fmt.Appendf(nil, "%s-%d", prefix, i)
	if i == crossMessages-1 {
		b = append(b, bytes.Repeat([]byte{'x'}, 10<<10)...)
	}
	return b
}

// TestCrossProtocol sends with one protocol and consumes with the other:
// the official producer (remoting) to Gantry's push consumer (gRPC), and
// Gantry's producer to the official push consumer. Bodies (one
// compressed by the official producer), tags, keys, user properties, the
// message ids, queues and offsets arrive as sent.
func TestCrossProtocol(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("OfficialToGantry", func(t *testing.T) {
		e := e.in(t)
		const topic, group = "T_o2g", "G_o2g"
		e.createTopic(topic, 4)
		p := e.producer()
		var msgs []*primitive.Message
		for i := range crossMessages {
			m := testMessage(topic, "o2g", i)
			m.Body = crossBody("o2g", i)
			msgs = append(msgs, m)
		}
		res := sendAll(t, p, msgs)

		var mu sync.Mutex
		got := map[string][]*client.MessageExt{}
		h := func(_ context.Context, ms []*client.MessageExt) client.ConsumeResult {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range ms {
				got[string(m.Body)] = append(got[string(m.Body)], m)
			}
			return client.ConsumeSuccess
		}
		cfg := e.cfg
		cfg.ClientID = instanceName(t, "gantry-push")
		c, err := client.NewPushConsumer(t.Context(), cfg, group, h,
			client.WithConsumeFrom(client.ConsumeFromFirstOffset), client.WithFetchHold(time.Second))
		require.NoError(t, err)
		require.NoError(t, c.Subscribe(topic, "*"))
		require.NoError(t, c.Start(t.Context()))
		defer func() { require.NoError(t, c.Shutdown(context.Background())) }()
		eventually(t, waitShort, "Gantry's consumer gets every message", func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == len(msgs), fmt.Sprintf("%d of %d", len(got), len(msgs))
		})

		mu.Lock()
		defer mu.Unlock()
		for _, s := range res {
			body := label(s.msg.Body)
			ms := got[string(s.msg.Body)]
			require.Len(t, ms, 1, "%s delivered", body)
			m := ms[0]
			assert.Equal(t, s.msgID, m.UniqKey, "%s: UNIQ_KEY", body)
			assert.Equal(t, s.offsetMsgID, m.MsgID(), "%s: offset message id", body)
			assert.Equal(t, int32(s.queue), m.Queue.ID, "%s: queue", body)
			assert.Equal(t, s.queueOffset, m.QueueOffset, "%s: queue offset", body)
			assert.Equal(t, s.msg.GetTags(), m.Tags, "%s: tags", body)
			assert.Equal(t, strings.Fields(s.msg.GetKeys()), m.Keys(), "%s: keys", body)
			assert.Equal(t, userProps(s.msg.GetProperties()), userProps(m.Properties()), "%s: user properties", body)
		}
		t.Logf("official producer -> Gantry push consumer: %d messages (one of %d bytes, compressed by the producer) identical", len(msgs), len(msgs[len(msgs)-1].Body))
	})

	t.Run("GantryToOfficial", func(t *testing.T) {
		e := e.in(t)
		const topic, group = "T_g2o", "G_g2o"
		e.createTopic(topic, 4)
		gp, err := client.NewProducer(t.Context(), e.cfg)
		require.NoError(t, err)
		defer gp.Close(context.Background())
		var want []sent
		for i := range crossMessages {
			m := &client.Message{
				Topic: topic, Body: crossBody("g2o", i), Tags: []string{"TagA", "TagB"}[i%2],
				Keys:       []string{fmt.Sprintf("g2o-key-%d", i), fmt.Sprintf("order-%d", i/4)},
				Properties: map[string]string{"color": fmt.Sprintf("c%d", i%3), "prefix": "g2o"},
			}
			rs, err := gp.Send(t.Context(), m)
			require.NoError(t, err)
			r := rs
			// The same message as the official client would build it, to
			// compare with.
			pm := primitive.NewMessage(topic, m.Body)
			pm.WithProperties(maps.Clone(m.Properties)) // replaces every property: first
			pm.WithTag(m.Tags)
			pm.WithKeys(m.Keys)
			want = append(want, sent{msg: pm, msgID: r.UniqKey, offsetMsgID: r.MsgID, queue: int(r.QueueID), queueOffset: r.QueueOffset})
		}

		rec := newRecorder()
		e.pushConsumer(group, topic, all, rec.handler("A"))
		rec.waitBodies(t, bodiesOf(msgsOf(want)), waitShort)
		for _, s := range want {
			ds := rec.deliveries(string(s.msg.Body))
			require.Len(t, ds, 1, "%s delivered", label(s.msg.Body))
			checkExt(t, s, ds[0].msg)
		}
		t.Logf("Gantry producer -> official push consumer: %d messages (one of %d bytes) identical", len(want), len(want[len(want)-1].msg.Body))
	})
}
