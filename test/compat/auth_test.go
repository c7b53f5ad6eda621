package compat

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// aclUsers: an admin, a producer of T_acl and a consumer of it in group
// G_acl.
var aclUsers = []auth.User{
	{AccessKey: "admin1", SecretKey: "admin-secret", Role: auth.RoleAdmin},
	{AccessKey: "producer1", SecretKey: "producer-secret", Rules: []auth.Rule{{Resource: "Topic:T_acl", Actions: []string{"Pub"}}}},
	{AccessKey: "consumer1", SecretKey: "consumer-secret", Rules: []auth.Rule{
		{Resource: "Topic:T_acl", Actions: []string{"Sub"}}, {Resource: "Group:G_acl", Actions: []string{"Sub"}}}},
}

func aclCreds(ak string) primitive.Credentials {
	for _, u := range aclUsers {
		if u.AccessKey == ak {
			return primitive.Credentials{AccessKey: u.AccessKey, SecretKey: u.SecretKey}
		}
	}
	panic("no user " + ak)
}

// The official client with credentials (ACL 1.0 signatures) against a
// broker with authentication on: the producer with PUB sends and the
// consumer with SUB receives every message; a producer without PUB on the
// topic, or without credentials, is refused NO_PERMISSION naming why;
// the official admin creates a topic as an admin only.
func TestACLCredentials(t *testing.T) {
	t.Parallel()
	e := startEnv(t, embedded.Options{Users: aclUsers}, client.Credentials{AccessKey: "admin1", SecretKey: "admin-secret"}, nil)
	const topic, group, n = "T_acl", "G_acl", 10
	e.createTopic(topic, 2)
	ctx := t.Context()

	for _, tt := range []struct {
		name string
		opts []producer.Option
		want string
	}{
		{"no credentials", nil, "pub operations need credentials"},
		{"a consumer's", []producer.Option{producer.WithCredentials(aclCreds("consumer1"))},
			`user "consumer1": PUB on Topic:T_acl not allowed`},
		{"a wrong secret", []producer.Option{producer.WithCredentials(primitive.Credentials{AccessKey: "producer1", SecretKey: "not-the-secret"})},
			"Signature does not match"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := e.in(t).producer(tt.opts...)
			_, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("refused")))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "CODE: 16")
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	qs, err := e.admin.TopicStatus(ctx, topic)
	require.NoError(t, err)
	for _, q := range qs {
		require.Zero(t, q.MaxOffset, "a refused send stored nothing")
	}

	p := e.producer(producer.WithCredentials(aclCreds("producer1")))
	want := map[string]bool{}
	for i := range n {
		body := fmt.Sprintf("acl-%d", i)
		r, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
		require.NoError(t, err)
		require.Equal(t, primitive.SendOK, r.Status)
		want[body] = true
	}

	var mu sync.Mutex
	got := map[string]bool{}
	e.pushConsumer(group, topic, all, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			got[string(m.Body)] = true
		}
		return consumer.ConsumeSuccess, nil
	}, consumer.WithCredentials(aclCreds("consumer1")))
	eventually(t, waitLong, "every message consumed", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == n, fmt.Sprintf("%d of %d", len(got), n)
	})
	mu.Lock()
	assert.Equal(t, want, got)
	mu.Unlock()

	brokerAddr := e.c.BrokerRemotingAddr()
	for _, tt := range []struct {
		user, topic string
		created     bool
	}{{"", "T_acl_anonymous", false}, {"producer1", "T_acl_producer", false}, {"admin1", "T_acl_admin", true}} {
		opts := []admin.AdminOption{admin.WithResolver(primitive.NewPassthroughResolver([]string{e.ns}))}
		if tt.user != "" {
			opts = append(opts, admin.WithCredentials(aclCreds(tt.user)))
		}
		a, err := admin.NewAdmin(opts...)
		require.NoError(t, err)
		// The official admin signs once this call registered its ACL hook;
		// it reports no error for a refused CreateTopic: the broker tells.
		_, _ = a.GetAllSubscriptionGroup(ctx, brokerAddr, waitShort)
		_ = a.CreateTopic(ctx, admin.WithTopicCreate(tt.topic), admin.WithBrokerAddrCreate(brokerAddr))
		require.NoError(t, a.Close())
		_, ok := e.c.Broker().Topic(tt.topic)
		assert.Equal(t, tt.created, ok, "%s created by %q", tt.topic, tt.user)
	}
	refused := e.c.Broker().Guard().Refused()
	assert.NotZero(t, refused[auth.ReasonDenied])
	assert.NotZero(t, refused[auth.ReasonNoCredentials])
	assert.NotZero(t, refused[auth.ReasonBadSignature])
}
