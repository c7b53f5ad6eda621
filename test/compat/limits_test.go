package compat

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/message"
)

// patterned is a body of n bytes that depends on every byte's position
// and on tag (compressible: the official producer zlibs it).
func patterned(n int, tag byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) ^ tag
	}
	return b
}

// A message of the largest body the broker takes (4,194,304 bytes) is
// read by the official push consumer, with the message after it, when
// Gantry's producer sent it; and by Gantry's push consumer when the
// official producer sent it (compressed, as it compresses bodies over
// 4 KiB).
func TestMaxBodyAcrossClients(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("GantryToOfficial", func(t *testing.T) {
		e := e.in(t)
		const topic, group = "T_big_g2o", "G_big_g2o"
		e.createTopic(topic, 1)
		gp, err := client.NewProducer(t.Context(), e.cfg)
		require.NoError(t, err)
		defer gp.Close(context.Background())
		big := patterned(message.MaxBodyBytes, 3)
		for _, b := range [][]byte{big, []byte("after")} {
			_, err := gp.Send(t.Context(), &client.Message{Topic: topic, Body: b})
			require.NoError(t, err)
		}
		rec := newRecorder()
		e.pushConsumer(group, topic, all, rec.handler("A"))
		rec.waitBodies(t, []string{string(big), "after"}, waitShort)
		ds := rec.deliveries(string(big))
		require.Len(t, ds, 1)
		assert.True(t, bytes.Equal(big, ds[0].msg.Body))
	})

	t.Run("OfficialToGantry", func(t *testing.T) {
		e := e.in(t)
		const topic, group = "T_big_o2g", "G_big_o2g"
		e.createTopic(topic, 1)
		big := patterned(message.MaxBodyBytes, 5)
		sendAll(t, e.producer(), []*primitive.Message{primitive.NewMessage(topic, big), primitive.NewMessage(topic, []byte("after"))})

		var mu sync.Mutex
		got := map[string]bool{}
		cfg := e.cfg
		cfg.ClientID = instanceName(t, "gantry-push")
		c, err := client.NewPushConsumer(t.Context(), cfg, group, func(_ context.Context, ms []*client.MessageExt) client.ConsumeResult {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range ms {
				got[string(m.Body)] = true
			}
			return client.ConsumeSuccess
		}, client.WithConsumeFrom(client.ConsumeFromFirstOffset))
		require.NoError(t, err)
		require.NoError(t, c.Subscribe(topic, "*"))
		require.NoError(t, c.Start(t.Context()))
		defer func() { require.NoError(t, c.Shutdown(context.Background())) }()
		eventually(t, waitShort, "Gantry's consumer gets both", func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return got[string(big)] && got["after"], ""
		})
		n, last := c.PullErrors()
		assert.Zero(t, n, "%v", last)
	})
}
