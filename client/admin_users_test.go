package client_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// startAuthCluster starts an embedded cluster whose broker has
// authentication on, with the admin user admin1 and the cluster user the
// broker signs its own calls with.
func startAuthCluster(t *testing.T) *embedded.Cluster {
	t.Helper()
	aclFile := filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(aclFile, []byte(`{"users":[{"accessKey":"admin1","secretKey":"adminsecret","role":"admin"},
		{"accessKey":"cluster1","secretKey":"clustersecret","role":"cluster"}]}`), 0o600))
	c, err := embedded.Start(t.Context(), embedded.Options{Broker: func(bc *broker.Config) {
		bc.AuthenticationEnabled, bc.ACLFile = true, aclFile
		bc.InnerAccessKey, bc.InnerSecretKey = "cluster1", "clustersecret"
	}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	return c
}

func TestAdminUsersAndACLs(t *testing.T) {
	c := startAuthCluster(t)
	ctx := t.Context()
	adm, err := client.NewAdmin(ctx, client.Config{NameServers: []string{c.NameServerAddr()},
		Credentials: client.Credentials{AccessKey: "admin1", SecretKey: "adminsecret"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = adm.Close() })

	require.NoError(t, adm.CreateUser(ctx, client.User{AccessKey: "alice1", SecretKey: "alicesecret"}))
	err = adm.CreateUser(ctx, client.User{AccessKey: "alice1", SecretKey: "alicesecret"})
	assert.ErrorIs(t, err, client.ErrAlreadyExists)
	assert.ErrorIs(t, adm.CreateUser(ctx, client.User{AccessKey: "bob", SecretKey: "bobsecret"}), client.ErrInvalidArgument)
	require.NoError(t, adm.UpdateUser(ctx, client.User{AccessKey: "alice1", Role: client.RoleCluster}))
	assert.ErrorIs(t, adm.UpdateUser(ctx, client.User{AccessKey: "nobody1", Role: client.RoleCluster}), client.ErrNotFound)

	rules := []client.ACLRule{{Resource: "Topic:orders", Actions: []string{"Pub"}}, {Resource: "Group:billing", Actions: []string{"Sub"}}}
	require.NoError(t, adm.CreateACL(ctx, "alice1", rules))
	assert.ErrorIs(t, adm.CreateACL(ctx, "alice1", rules[:1]), client.ErrAlreadyExists)
	require.NoError(t, adm.UpdateACL(ctx, "alice1", []client.ACLRule{{Resource: "Topic:orders", Actions: []string{"All"}, Decision: "Deny"}}))

	users, err := adm.ListUsers(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, []client.UserInfo{{Broker: c.BrokerAddr(), AccessKey: "alice1", Role: client.RoleCluster, Rules: []client.ACLRule{
		{Resource: "Topic:orders", Actions: []string{"All"}, Decision: "Deny"},
		{Resource: "Group:billing", Actions: []string{"Sub"}, Decision: "Allow"},
	}}}, users)
	u, err := adm.GetUser(ctx, "admin1", c.BrokerAddr())
	require.NoError(t, err)
	assert.Equal(t, client.UserInfo{Broker: c.BrokerAddr(), AccessKey: "admin1", Role: client.RoleAdmin}, u)
	_, err = adm.GetUser(ctx, "nobody1", c.BrokerAddr())
	assert.ErrorIs(t, err, client.ErrNotFound)

	entries, err := adm.ListACL(ctx, "", "Group:")
	require.NoError(t, err)
	assert.Equal(t, []client.ACLEntry{{Broker: c.BrokerAddr(), AccessKey: "alice1",
		ACLRule: client.ACLRule{Resource: "Group:billing", Actions: []string{"Sub"}, Decision: "Allow"}}}, entries)
	assert.ErrorIs(t, adm.DeleteACL(ctx, "alice1", []string{"Topic:nope"}), client.ErrNotFound)
	require.NoError(t, adm.DeleteACL(ctx, "alice1", nil))
	entries, err = adm.ListACL(ctx, "alice1", "")
	require.NoError(t, err)
	assert.Empty(t, entries)

	require.NoError(t, adm.DeleteUser(ctx, "alice1"))
	assert.ErrorIs(t, adm.DeleteUser(ctx, "alice1"), client.ErrNotFound)
	err = adm.DeleteUser(ctx, "admin1")
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
	assert.ErrorContains(t, err, "only admin")
}

// A broker with authentication off answers that it has none.
func TestAdminUsersWithAuthenticationOff(t *testing.T) {
	c, err := embedded.Start(t.Context(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	adm, err := client.NewAdmin(t.Context(), client.Config{NameServers: []string{c.NameServerAddr()}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = adm.Close() })
	_, err = adm.ListUsers(t.Context(), "")
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
	assert.ErrorContains(t, err, "authentication is off on this broker (authenticationEnabled=false)")
}
