package compat

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
)

// Every nameserver port speaks both protocols: the official client works
// given Gantry's port (9877) as its NAMESRV_ADDR, as it does given
// RocketMQ's (9876), and Gantry's client works given RocketMQ's port.
func TestEitherNameServerPort(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, port := range []struct{ name, ns string }{
		{"remoting port", e.c.NameServerRemotingAddr()},
		{"gRPC port", e.c.NameServerAddr()},
	} {
		t.Run(port.name, func(t *testing.T) {
			pe := e.in(t)
			pe.ns = port.ns
			topic := "Ports_" + unsafeName.ReplaceAllString(port.name, "_")
			pe.createTopic(topic, 2)
			p := pe.producer()
			const n = 10
			for i := range n {
				r, err := p.SendSync(t.Context(), primitive.NewMessage(topic, fmt.Appendf(nil, "m-%d", i)))
				require.NoError(t, err)
				require.Equal(t, primitive.SendOK, r.Status)
			}
			var mu sync.Mutex
			got := map[string]bool{}
			done := make(chan struct{})
			pe.pushConsumer("CG_"+topic, topic, all, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				mu.Lock()
				defer mu.Unlock()
				for _, m := range msgs {
					got[string(m.Body)] = true
				}
				if len(got) == n {
					select {
					case <-done:
					default:
						close(done)
					}
				}
				return consumer.ConsumeSuccess, nil
			})
			select {
			case <-done:
			case <-time.After(waitLong):
			}
			mu.Lock()
			require.Len(t, got, n, "messages the official push consumer received through %s", port.ns)
			mu.Unlock()
		})
	}

	cfg := client.Config{NameServers: []string{e.c.NameServerRemotingAddr()}}
	p, err := client.NewProducer(t.Context(), cfg)
	require.NoError(t, err)
	defer p.Close(context.Background())
	res, err := p.Send(t.Context(), &client.Message{Topic: "Ports_remoting_port", Body: []byte("from Gantry's client")})
	require.NoError(t, err)
	a, err := client.NewAdmin(t.Context(), cfg)
	require.NoError(t, err)
	defer a.Close()
	m, err := a.QueryMessageByID(t.Context(), res.MsgID)
	require.NoError(t, err)
	require.Equal(t, "from Gantry's client", string(m.Body))
}
