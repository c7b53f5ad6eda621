package compat

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// The official client over TLS (producer.WithTls, consumer.WithTls)
// against a nameserver and broker that serve TLS only: it routes, sends
// and consumes. Its TLS verifies no certificate and shows none
// (InsecureSkipVerify, internal/remote/tcp_conn.go), so the broker asks
// for no client certificate. A plaintext official client is refused.
//
// Not parallel: WithTls(true) sets the official client's process-wide
// default remoting config, which every client in the process shares; the
// test sets it back before the parallel tests start.
func TestOfficialClientOverTLS(t *testing.T) {
	certs, err := embedded.DevTLS(t.TempDir())
	require.NoError(t, err)
	conf, err := certs.ClientTLS(false)
	require.NoError(t, err)
	e := startEnv(t, embedded.Options{TLS: certs.Options()}, client.Credentials{}, conf)
	t.Cleanup(func() { setOfficialTLS(t, e, false) }) // after the clients below shut down
	e.createTopic("T_tls", 4)

	p := e.producer(producer.WithTls(true))
	var want []string
	for i := range 20 {
		body := fmt.Sprintf("tls-%d", i)
		r, err := p.SendSync(t.Context(), primitive.NewMessage("T_tls", []byte(body)))
		require.NoError(t, err, "send %d over TLS", i)
		require.Equal(t, primitive.SendOK, r.Status)
		want = append(want, body)
	}
	e.waitDispatched("T_tls", 20)

	var (
		mu  sync.Mutex
		got []string
	)
	e.pushConsumer("G_tls", "T_tls", all, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			got = append(got, string(m.Body))
		}
		return consumer.ConsumeSuccess, nil
	}, consumer.WithTls(true))
	eventually(t, waitLong, "the push consumer receives every message over TLS", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= len(want), fmt.Sprintf("%d of %d", len(got), len(want))
	})
	mu.Lock()
	slices.Sort(got)
	slices.Sort(want)
	assert.Equal(t, want, slices.Compact(got))
	mu.Unlock()
}

// A plaintext official client of a cluster that requires TLS is told so.
// Not parallel, as TestOfficialClientOverTLS.
func TestOfficialClientPlaintextRefused(t *testing.T) {
	certs, err := embedded.DevTLS(t.TempDir())
	require.NoError(t, err)
	conf, err := certs.ClientTLS(false)
	require.NoError(t, err)
	e := startEnv(t, embedded.Options{TLS: certs.Options()}, client.Credentials{}, conf)
	e.createTopic("T_plain", 1)
	p := e.producer(producer.WithTls(false), producer.WithSendMsgTimeout(2*time.Second))
	_, err = p.SendSync(t.Context(), primitive.NewMessage("T_plain", []byte("plaintext")))
	require.Error(t, err)
	t.Logf("the official client says: %v", err)
}

// setOfficialTLS sets the official client's process-wide UseTls through
// an option of a producer that is never started.
func setOfficialTLS(t *testing.T, e *env, on bool) {
	t.Helper()
	_, err := producer.NewDefaultProducer(producer.WithNameServer(primitive.NamesrvAddr{e.ns}), producer.WithTls(on))
	require.NoError(t, err)
}
