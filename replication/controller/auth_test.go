package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
)

// Every method of the Controller service has an access class, and the
// table names no method the service lacks.
func TestEveryMethodClassified(t *testing.T) {
	desc := gantryv1.Controller_ServiceDesc
	served := map[string]bool{}
	for _, m := range desc.Methods {
		served["/"+desc.ServiceName+"/"+m.MethodName] = true
	}
	for _, s := range desc.Streams {
		served["/"+desc.ServiceName+"/"+s.StreamName] = true
	}
	for m := range served {
		_, ok := MethodClass(m)
		assert.True(t, ok, "%s has no access class in methodClasses", m)
	}
	for m := range methodClasses {
		assert.True(t, served[m], "methodClasses names %s, which the service does not serve", m)
	}
}

// authGuard is a Guard of a cluster user, a client and an admin.
func authGuard(t *testing.T) *auth.Guard {
	t.Helper()
	users, err := auth.NewUsers(auth.File{Users: []auth.User{
		{AccessKey: "broker-key", SecretKey: "broker-secret", Role: auth.RoleCluster},
		{AccessKey: "alice-key", SecretKey: "alice-secret", Rules: []auth.Rule{{Resource: "*", Actions: []string{"All"}}}},
		{AccessKey: "admin-key", SecretKey: "admin-secret", Role: auth.RoleAdmin},
	}})
	require.NoError(t, err)
	return auth.NewGuard(auth.GuardConfig{Users: func() *auth.Users { return users }})
}

// signedClient is a client of the cluster signing with ak/sk ("": none).
func (sc *svcCluster) signedClient(ak, sk string) *Client {
	sc.t.Helper()
	cfg := ClientConfig{Addrs: sc.addrs, Attempts: 100, Backoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	if ak != "" {
		s, err := auth.NewSigner(ak, sk)
		require.NoError(sc.t, err)
		cfg.Signer = s
	}
	c, err := NewClient(cfg)
	require.NoError(sc.t, err)
	sc.t.Cleanup(func() { assert.NoError(sc.t, c.Close()) })
	return c
}

// With a Guard, a broker's calls need a cluster user, an election an
// admin, and the members' metadata nothing, but a wrong signature is
// refused even there; a refused call changes nothing.
func TestServiceAuthenticatesCalls(t *testing.T) {
	g := authGuard(t)
	sc := newSvcCluster(t, 1, func(c *Config) { c.Guard = g })
	anon := sc.signedClient("", "")
	user := sc.signedClient("alice-key", "alice-secret")
	forged := sc.signedClient("broker-key", "not-the-secret")
	broker := sc.signedClient("broker-key", "broker-secret")
	admin := sc.signedClient("admin-key", "admin-secret")

	code := func(err error) codes.Code { return status.Code(err) }
	for _, tc := range []struct {
		name string
		c    *Client
		want codes.Code
		says string
	}{
		{"no credentials", anon, codes.Unauthenticated, "cluster operations need credentials"},
		{"a user", user, codes.PermissionDenied, "cluster operations need a cluster or admin user"},
		{"a wrong secret", forged, codes.Unauthenticated, "signature does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.RegisterBroker(ctx(t), "g", 1, "10.0.0.1:10912", "10.0.0.1:10911")
			assert.Equal(t, tc.want, code(err), "%v", err)
			assert.ErrorContains(t, err, tc.says)
			_, err = tc.c.BrokerHeartbeat(ctx(t), BrokerReport{Group: "g", BrokerID: 1})
			assert.Equal(t, tc.want, code(err), "%v", err)
			_, err = tc.c.AlterSyncStateSet(ctx(t), "g", 1, 1, 1, []int64{1})
			assert.Equal(t, tc.want, code(err), "%v", err)
			_, err = tc.c.GetGroup(ctx(t), "g")
			assert.Equal(t, tc.want, code(err), "%v", err)
			_, err = tc.c.GetSyncStateSet(ctx(t), "g")
			assert.Equal(t, tc.want, code(err), "%v", err)
			_, err = tc.c.ElectMaster(ctx(t), "g", 1, false)
			assert.Contains(t, []codes.Code{codes.Unauthenticated, codes.PermissionDenied}, code(err), "%v", err)
		})
	}
	_, err := broker.GetGroup(ctx(t), "g")
	require.ErrorIs(t, err, ErrUnknownGroup, "no refused registration took effect")

	_, _, err = anon.Metadata(ctx(t))
	require.NoError(t, err, "the members' metadata is public")
	_, _, err = forged.Metadata(ctx(t))
	require.ErrorContains(t, err, "signature does not match", "a wrong signature is refused on a public method too")

	gs, err := broker.RegisterBroker(ctx(t), "g", 1, "10.0.0.1:10912", "10.0.0.1:10911")
	require.NoError(t, err)
	require.Len(t, gs.Replicas, 1)
	_, err = broker.BrokerHeartbeat(ctx(t), BrokerReport{Group: "g", BrokerID: 1})
	require.NoError(t, err)
	_, err = broker.ElectMaster(ctx(t), "g", 1, false)
	require.Equal(t, codes.PermissionDenied, code(err), "an election on request needs an admin: %v", err)
	gs, err = admin.ElectMaster(ctx(t), "g", 1, false)
	require.NoError(t, err)
	assert.EqualValues(t, 1, gs.MasterID)

	refused := g.Refused()
	assert.NotZero(t, refused[auth.ReasonNoCredentials])
	assert.NotZero(t, refused[auth.ReasonBadSignature])
	assert.NotZero(t, refused[auth.ReasonDenied])
}
