package embedded_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// authUsers: an admin, a producer and a consumer (group G) of Orders.
var authUsers = []auth.User{
	{AccessKey: "admin1", SecretKey: "admin-secret", Role: auth.RoleAdmin},
	{AccessKey: "producer1", SecretKey: "producer-secret", Rules: []auth.Rule{{Resource: "Topic:Orders", Actions: []string{"Pub"}}}},
	{AccessKey: "consumer1", SecretKey: "consumer-secret", Rules: []auth.Rule{
		{Resource: "Topic:Orders", Actions: []string{"Sub"}}, {Resource: "Group:G", Actions: []string{"Sub"}}}},
}

func authCluster(t *testing.T, adjust func(*broker.Config)) (*embedded.Cluster, client.Config) {
	t.Helper()
	c, err := embedded.Start(t.Context(), embedded.Options{NoAutoCreateTopics: true, Users: authUsers, Broker: adjust})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	return c, client.Config{NameServers: []string{c.NameServerAddr()}, RouteRefresh: 200 * time.Millisecond}
}

// as returns cfg signing with the keys of user ak (of authUsers).
func as(cfg client.Config, ak string) client.Config {
	for _, u := range authUsers {
		if u.AccessKey == ak {
			cfg.Credentials = client.Credentials{AccessKey: u.AccessKey, SecretKey: u.SecretKey}
		}
	}
	return cfg
}

// Gantry's client with Config.Credentials against a broker with
// authentication on: the admin creates the topic, the producer sends,
// the consumer pulls and commits; without credentials, or with a user
// lacking the right, each is refused with ErrNoPermission naming why.
func TestClientCredentials(t *testing.T) {
	_, cfg := authCluster(t, nil)
	ctx := t.Context()

	anon, err := client.NewAdmin(ctx, cfg)
	require.NoError(t, err)
	defer anon.Close()
	err = anon.CreateTopic(ctx, client.TopicConfig{Name: "Orders", ReadQueueNums: 2, WriteQueueNums: 2})
	require.ErrorIs(t, err, client.ErrNoPermission)
	assert.Contains(t, err.Error(), "admin operations need credentials")

	a, err := client.NewAdmin(ctx, as(cfg, "admin1"))
	require.NoError(t, err)
	defer a.Close()
	require.NoError(t, a.CreateTopic(ctx, client.TopicConfig{Name: "Orders", ReadQueueNums: 2, WriteQueueNums: 2}))
	require.Eventually(t, func() bool { _, err := a.Route(ctx, "Orders"); return err == nil }, 5*time.Second, 10*time.Millisecond)

	for _, tt := range []struct {
		name string
		cfg  client.Config
		want string
	}{
		{"no credentials", cfg, "pub operations need credentials"},
		{"a consumer", as(cfg, "consumer1"), `user "consumer1": PUB on Topic:Orders not allowed`},
		{"a wrong secret", func() client.Config {
			c := cfg
			c.Credentials = client.Credentials{AccessKey: "producer1", SecretKey: "not-the-secret"}
			return c
		}(), "signature does not match"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := client.NewProducer(ctx, tt.cfg)
			require.NoError(t, err)
			defer p.Close(context.Background())
			_, err = p.Send(ctx, &client.Message{Topic: "Orders", Body: []byte("refused")})
			require.ErrorIs(t, err, client.ErrNoPermission)
			assert.Contains(t, err.Error(), tt.want)
		})
	}

	p, err := client.NewProducer(ctx, as(cfg, "producer1"))
	require.NoError(t, err)
	defer p.Close(context.Background())
	res, err := p.Send(ctx, &client.Message{Topic: "Orders", Body: []byte("allowed")})
	require.NoError(t, err)

	var q client.Queue
	route, err := a.Route(ctx, "Orders")
	require.NoError(t, err)
	for _, cand := range route.WriteQueues() {
		if cand.ID == res.QueueID {
			q = cand
		}
	}
	require.Equal(t, res.QueueID, q.ID)

	refused, err := client.NewPullConsumer(ctx, as(cfg, "producer1"), "G")
	require.NoError(t, err)
	defer refused.Close(context.Background())
	_, err = refused.Pull(ctx, q, 0, client.PullOptions{MaxMessages: 8})
	require.ErrorIs(t, err, client.ErrNoPermission)
	assert.Contains(t, err.Error(), `user "producer1": SUB on`)

	pc, err := client.NewPullConsumer(ctx, as(cfg, "consumer1"), "G")
	require.NoError(t, err)
	defer pc.Close(context.Background())
	r, err := pc.Pull(ctx, q, 0, client.PullOptions{MaxMessages: 8, Hold: time.Second})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	assert.Equal(t, "allowed", string(r.Messages[0].Body))
	require.NoError(t, pc.CommitOffset(ctx, q, r.NextOffset))
	off, _, err := pc.CommittedOffset(ctx, q)
	require.NoError(t, err)
	assert.Equal(t, r.NextOffset, off)
}

// The HTTP port: /metrics, /healthz and /readyz stay public and /metrics
// counts refusals by reason; /debug/pprof needs an admin's keys by HTTP
// Basic authentication.
func TestHTTPWithAuthentication(t *testing.T) {
	c, cfg := authCluster(t, func(bc *broker.Config) { bc.PprofEnable = true })
	anon, err := client.NewAdmin(t.Context(), cfg)
	require.NoError(t, err)
	defer anon.Close()
	require.Error(t, anon.CreateTopic(t.Context(), client.TopicConfig{Name: "Orders"})) // a refusal to count

	get := func(path, user, secret string) (int, http.Header, string) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+c.HTTPAddr()+path, nil)
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, secret)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header, string(body)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		code, _, _ := get(path, "", "")
		assert.Equal(t, http.StatusOK, code, path)
	}
	_, _, metrics := get("/metrics", "", "")
	assert.Contains(t, metrics, `gantry_auth_refused_total{cluster="DefaultCluster",node_id="broker-a",reason="no_credentials"} 1`)
	assert.Contains(t, metrics, `reason="bad_signature"} 0`)

	for _, tt := range []struct {
		name, user, secret, want string
	}{
		{"no credentials", "", "", "admin operations need credentials"},
		{"a wrong secret", "admin1", "not-the-secret", "does not match"},
		{"not an admin", "producer1", "producer-secret", "admin operations need an admin user"},
	} {
		code, h, body := get("/debug/pprof/", tt.user, tt.secret)
		assert.Equal(t, http.StatusUnauthorized, code, tt.name)
		assert.True(t, strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic "), tt.name)
		assert.Contains(t, body, tt.want, tt.name)
	}
	code, _, body := get("/debug/pprof/goroutine?debug=1", "admin1", "admin-secret")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "goroutine profile")
}
