package grpcapi_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/grpcapi"
	"github.com/gantrymq/gantry/broker/server"
)

// signed signs every call as the client does (client.Credentials).
type signed struct{ s *auth.Signer }

func (c signed) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	ri, _ := credentials.RequestInfoFromContext(ctx)
	date, authz := c.s.SignGRPC(ri.Method, time.Now())
	return map[string]string{auth.MDDate: date, auth.MDAuthorization: authz}, nil
}

func (signed) RequireTransportSecurity() bool { return false }

// startAuthServer starts a broker server with authentication on and the
// admin user admin1, and returns it with an Admin client signing as
// admin1.
func startAuthServer(t *testing.T) (*server.Server, gantryv1.AdminClient, string) {
	t.Helper()
	aclFile := filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(aclFile, []byte(`{"users":[{"accessKey":"admin1","secretKey":"adminsecret","role":"admin"}]}`), 0o600))
	listen := func() net.Listener {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		return lis
	}
	bc := broker.Config{
		StorePathRootDir: filepath.Join(t.TempDir(), "store"),
		Logger:           slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	bc.AuthenticationEnabled, bc.ACLFile = true, aclFile
	s, err := server.Start(t.Context(), server.Config{Broker: bc, GRPCListener: listen(), HTTPListener: listen(), RemotingListener: listen()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	signer, err := auth.NewSigner("admin1", "adminsecret")
	require.NoError(t, err)
	cc, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(signed{signer}))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return s, gantryv1.NewAdminClient(cc), aclFile
}

func TestAdminUserMethods(t *testing.T) {
	s, admin, aclFile := startAuthServer(t)
	ctx := t.Context()
	code := func(err error) codes.Code { return status.Code(err) }

	_, err := admin.CreateUser(ctx, &gantryv1.CreateUserRequest{AccessKey: "alice1", SecretKey: "alicesecret"})
	require.NoError(t, err)
	_, err = admin.CreateUser(ctx, &gantryv1.CreateUserRequest{AccessKey: "alice1", SecretKey: "alicesecret"})
	assert.Equal(t, codes.AlreadyExists, code(err), "%v", err)
	_, err = admin.CreateUser(ctx, &gantryv1.CreateUserRequest{AccessKey: "bob", SecretKey: "bobsecret"})
	assert.Equal(t, codes.InvalidArgument, code(err))
	assert.ErrorContains(t, err, "accessKey: want 6 to 128 characters")
	_, err = admin.CreateUser(ctx, &gantryv1.CreateUserRequest{AccessKey: "bob123", SecretKey: "bobsecret", Role: "root"})
	assert.Equal(t, codes.InvalidArgument, code(err))

	_, err = admin.UpdateUser(ctx, &gantryv1.UpdateUserRequest{AccessKey: "alice1", SecretKey: "alicesecret2", Role: "cluster"})
	require.NoError(t, err)
	_, err = admin.UpdateUser(ctx, &gantryv1.UpdateUserRequest{AccessKey: "nobody1", Role: "cluster"})
	assert.Equal(t, codes.NotFound, code(err))
	_, err = admin.UpdateUser(ctx, &gantryv1.UpdateUserRequest{AccessKey: "alice1"})
	assert.Equal(t, codes.InvalidArgument, code(err))
	_, err = admin.UpdateUser(ctx, &gantryv1.UpdateUserRequest{AccessKey: "alice1", Role: "none"})
	require.NoError(t, err)

	_, err = admin.CreateAcl(ctx, &gantryv1.CreateAclRequest{AccessKey: "alice1", Rules: []*gantryv1.AclRule{
		{Resource: "Topic:orders", Actions: []string{"Pub"}},
		{Resource: "Group:billing", Actions: []string{"Sub"}},
	}})
	require.NoError(t, err)
	_, err = admin.CreateAcl(ctx, &gantryv1.CreateAclRequest{AccessKey: "alice1", Rules: []*gantryv1.AclRule{{Resource: "Topic:orders", Actions: []string{"Sub"}}}})
	assert.Equal(t, codes.AlreadyExists, code(err))
	_, err = admin.CreateAcl(ctx, &gantryv1.CreateAclRequest{AccessKey: "alice1", Rules: []*gantryv1.AclRule{{Resource: "Queue:x", Actions: []string{"Sub"}}}})
	assert.Equal(t, codes.InvalidArgument, code(err))
	_, err = admin.UpdateAcl(ctx, &gantryv1.UpdateAclRequest{AccessKey: "alice1", Rules: []*gantryv1.AclRule{
		{Resource: "Topic:orders", Actions: []string{"Pub", "Sub"}},
		{Resource: "Topic:orders-eu", Actions: []string{"Pub"}, Decision: "Deny"},
	}})
	require.NoError(t, err)
	_, err = admin.UpdateAcl(ctx, &gantryv1.UpdateAclRequest{AccessKey: "nobody1", Rules: []*gantryv1.AclRule{{Resource: "Topic:x", Actions: []string{"Pub"}}}})
	assert.Equal(t, codes.NotFound, code(err))

	// The new user signs in with its rights.
	g := s.Broker().Guard()
	signer, err := auth.NewSigner("alice1", "alicesecret2")
	require.NoError(t, err)
	date, authz := signer.SignGRPC(gantryv1.Messaging_Send_FullMethodName, time.Now())
	p, err := g.GRPC(gantryv1.Messaging_Send_FullMethodName, date, authz, "test")
	require.NoError(t, err)
	assert.NoError(t, g.Authorize(p, auth.ClassSub, "pull", "test", auth.Topic("orders"), auth.Group("billing")))
	assert.ErrorIs(t, g.Authorize(p, auth.ClassPub, "send", "test", auth.Topic("orders-eu")), auth.ErrDenied)

	// Listings never carry a secret key.
	users, err := admin.ListUsers(ctx, &gantryv1.ListUsersRequest{})
	require.NoError(t, err)
	assert.True(t, proto.Equal(&gantryv1.ListUsersResponse{Users: []*gantryv1.UserInfo{
		{AccessKey: "admin1", Role: "admin"},
		{AccessKey: "alice1", Rules: []*gantryv1.AclRule{
			{Resource: "Topic:orders", Actions: []string{"All"}, Decision: "Allow"},
			{Resource: "Group:billing", Actions: []string{"Sub"}, Decision: "Allow"},
			{Resource: "Topic:orders-eu", Actions: []string{"Pub"}, Decision: "Deny"},
		}},
	}}, users), "%v", users)
	one, err := admin.GetUser(ctx, &gantryv1.GetUserRequest{AccessKey: "alice1"})
	require.NoError(t, err)
	acl, err := admin.ListAcl(ctx, &gantryv1.ListAclRequest{Resource: "orders"})
	require.NoError(t, err)
	assert.Len(t, acl.GetEntries(), 2)
	for _, m := range []proto.Message{users, one, acl} {
		wire, err := proto.Marshal(m)
		require.NoError(t, err)
		for _, secret := range []string{"adminsecret", "alicesecret"} {
			assert.False(t, bytes.Contains(wire, []byte(secret)), "%T carries a secret", m)
		}
	}
	_, err = admin.GetUser(ctx, &gantryv1.GetUserRequest{AccessKey: "nobody1"})
	assert.Equal(t, codes.NotFound, code(err))
	_, err = admin.ListAcl(ctx, &gantryv1.ListAclRequest{AccessKey: "nobody1"})
	assert.Equal(t, codes.NotFound, code(err))

	_, err = admin.DeleteAcl(ctx, &gantryv1.DeleteAclRequest{AccessKey: "alice1", Resources: []string{"Topic:nope"}})
	assert.Equal(t, codes.NotFound, code(err))
	_, err = admin.DeleteAcl(ctx, &gantryv1.DeleteAclRequest{AccessKey: "alice1", Resources: []string{"Topic:orders-eu"}})
	require.NoError(t, err)
	acl, err = admin.ListAcl(ctx, &gantryv1.ListAclRequest{AccessKey: "alice1"})
	require.NoError(t, err)
	assert.Len(t, acl.GetEntries(), 2)

	// The file on disk follows.
	data, err := os.ReadFile(aclFile)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"accessKey": "alice1"`)
	assert.Contains(t, string(data), `"secretKey": "alicesecret2"`)

	_, err = admin.DeleteUser(ctx, &gantryv1.DeleteUserRequest{AccessKey: "admin1"})
	assert.Equal(t, codes.FailedPrecondition, code(err))
	assert.ErrorContains(t, err, "only admin")
	_, err = admin.DeleteUser(ctx, &gantryv1.DeleteUserRequest{AccessKey: "alice1"})
	require.NoError(t, err)
	_, err = admin.DeleteUser(ctx, &gantryv1.DeleteUserRequest{AccessKey: "alice1"})
	assert.Equal(t, codes.NotFound, code(err))
	_, ok := s.Broker().Users().Users().Lookup("alice1")
	assert.False(t, ok)
}

// With authentication off every user and rule method answers
// FAILED_PRECONDITION naming the setting.
func TestAdminUserMethodsWithAuthenticationOff(t *testing.T) {
	a := grpcapi.NewAdmin(openBroker(t, broker.AsyncMaster), nil)
	ctx := t.Context()
	rules := []*gantryv1.AclRule{{Resource: "Topic:x", Actions: []string{"Pub"}}}
	calls := map[string]func() error{
		"CreateUser": func() error {
			_, err := a.CreateUser(ctx, &gantryv1.CreateUserRequest{AccessKey: "alice1", SecretKey: "alicesecret"})
			return err
		},
		"UpdateUser": func() error {
			_, err := a.UpdateUser(ctx, &gantryv1.UpdateUserRequest{AccessKey: "alice1", Role: "admin"})
			return err
		},
		"DeleteUser": func() error {
			_, err := a.DeleteUser(ctx, &gantryv1.DeleteUserRequest{AccessKey: "alice1"})
			return err
		},
		"ListUsers": func() error { _, err := a.ListUsers(ctx, &gantryv1.ListUsersRequest{}); return err },
		"GetUser":   func() error { _, err := a.GetUser(ctx, &gantryv1.GetUserRequest{AccessKey: "alice1"}); return err },
		"CreateAcl": func() error {
			_, err := a.CreateAcl(ctx, &gantryv1.CreateAclRequest{AccessKey: "alice1", Rules: rules})
			return err
		},
		"UpdateAcl": func() error {
			_, err := a.UpdateAcl(ctx, &gantryv1.UpdateAclRequest{AccessKey: "alice1", Rules: rules})
			return err
		},
		"DeleteAcl": func() error { _, err := a.DeleteAcl(ctx, &gantryv1.DeleteAclRequest{AccessKey: "alice1"}); return err },
		"ListAcl":   func() error { _, err := a.ListAcl(ctx, &gantryv1.ListAclRequest{}); return err },
	}
	for name, call := range calls {
		err := call()
		assert.Equal(t, codes.FailedPrecondition, status.Code(err), name)
		assert.ErrorContains(t, err, "authentication is off on this broker (authenticationEnabled=false)", name)
	}
}
