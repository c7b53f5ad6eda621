package embedded_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// tlsClients are Gantry's producer and pull consumer of a cluster, over
// TLS with conf (nil: plaintext).
func tlsClients(t *testing.T, c *embedded.Cluster, conf *tls.Config) (*client.Producer, *client.PullConsumer) {
	t.Helper()
	cfg := client.Config{NameServers: []string{c.NameServerAddr()}, TLS: conf}
	p, err := client.NewProducer(t.Context(), cfg)
	require.NoError(t, err)
	pc, err := client.NewPullConsumer(t.Context(), cfg, "tls")
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, p.Close(context.Background()))
		assert.NoError(t, pc.Close(context.Background()))
	})
	return p, pc
}

// sendTimeout sends one message, bounded.
func sendTimeout(t *testing.T, p *client.Producer, topic, body string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte(body)})
	return err
}

// A nameserver and a broker serving TLS only: Gantry's client sends and
// consumes over TLS (the broker registering over TLS too), with and
// without client certificates required; a client without a certificate
// is refused where one is required, and a plaintext client is told TLS
// is required.
func TestTLSSendConsume(t *testing.T) {
	certs, err := embedded.DevTLS(t.TempDir())
	require.NoError(t, err)
	for _, auth := range []broker.TLSClientAuth{broker.TLSClientAuthNone, broker.TLSClientAuthRequire} {
		t.Run("client auth "+auth.String(), func(t *testing.T) {
			opts := certs.Options()
			opts.ClientAuth = auth
			c := startGroup(t, embedded.Options{TLS: opts, NoAutoCreateTopics: true, Broker: func(bc *broker.Config) {
				require.Equal(t, broker.TLSEnforcing, bc.TLSServerMode)
			}})
			require.NoError(t, c.Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "Secure", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}))
			withCert, err := certs.ClientTLS(true)
			require.NoError(t, err)
			p, pc := tlsClients(t, c, withCert)
			require.Eventually(t, func() bool { return sendTimeout(t, p, "Secure", "warm-up") == nil }, 30*time.Second, 20*time.Millisecond,
				"the broker registers the topic over TLS")
			for i := range 20 {
				require.NoError(t, sendTimeout(t, p, "Secure", fmt.Sprintf("m%d", i)))
			}
			got := drain(t, pc, "Secure", "")
			assert.Len(t, got, 21)

			noCert, err := certs.ClientTLS(false)
			require.NoError(t, err)
			p2, _ := tlsClients(t, c, noCert)
			err = sendTimeout(t, p2, "Secure", "anonymous")
			if auth == broker.TLSClientAuthRequire {
				assert.Error(t, err, "a client without a certificate is refused")
			} else {
				assert.NoError(t, err)
			}

			p3, _ := tlsClients(t, c, nil)
			err = sendTimeout(t, p3, "Secure", "plaintext")
			require.Error(t, err)
			assert.ErrorIs(t, err, client.ErrNoPermission, "%v", err)
			assert.Contains(t, err.Error(), "requires TLS")
		})
	}
}

// A master and a slave over TLS: the slave dials the master's HA port
// with TLS (which refuses plaintext) and holds what the master stored.
func TestTLSReplication(t *testing.T) {
	certs, err := embedded.DevTLS(t.TempDir())
	require.NoError(t, err)
	opts := groupOptions(broker.SyncMaster, 1)
	opts.TLS = certs.Options()
	opts.TLS.ClientAuth = broker.TLSClientAuthRequire
	c := startGroup(t, opts)
	waitSlaves(t, c, 1)
	groupTopic(t, c, "Replicated", 2)
	for i := range 20 {
		_, err := sendOne(t.Context(), c.Broker(), "Replicated", i)
		require.NoError(t, err, "a SYNC_MASTER acks once the slave holds the message: replication works over TLS")
	}
	require.Eventually(t, func() bool { return logEnd(c.SlaveServer(1)) == logEnd(c.Server()) }, 30*time.Second, 10*time.Millisecond)
	sameLog(t, c.Server(), c.SlaveServer(1))
}

// A controller-mode group over TLS: the controller's raft and gRPC, the
// brokers' heartbeats to it and the HA port between them all run TLS.
func TestTLSControllerMode(t *testing.T) {
	certs, err := embedded.DevTLS(t.TempDir())
	require.NoError(t, err)
	c := startGroup(t, embedded.Options{Replicas: 2, TLS: certs.Options(), Broker: func(bc *broker.Config) {
		bc.BrokerRole = broker.SyncMaster
		bc.MappedFileSizeCommitLog = 4 << 20
		bc.MaxHashSlotNum, bc.MaxIndexNum = 1000, 4000
		bc.SlaveTimeout = 10 * time.Second
	}})
	conf, err := certs.ClientTLS(false)
	require.NoError(t, err)
	p, pc := tlsClients(t, c, conf)
	sendUntilAcked(t, p, "Elected", "first")
	for i := range 10 {
		require.NoError(t, sendTimeout(t, p, "Elected", fmt.Sprintf("m%d", i)), "a SYNC_MASTER ack: the slave replicates over TLS")
	}
	assert.Len(t, drain(t, pc, "Elected", ""), 11)
}
