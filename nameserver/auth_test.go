package nameserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
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

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/nameserver"
	"github.com/gantrymq/gantry/remoting"
)

// Every method of the NameServer service and every remoting code the
// nameserver answers has an access class.
func TestEveryMethodAndCodeClassified(t *testing.T) {
	desc := gantryv1.NameServer_ServiceDesc
	var methods []string
	for _, m := range desc.Methods {
		methods = append(methods, "/"+desc.ServiceName+"/"+m.MethodName)
	}
	for _, s := range desc.Streams {
		methods = append(methods, "/"+desc.ServiceName+"/"+s.StreamName)
	}
	require.NotEmpty(t, methods)
	for _, m := range methods {
		_, ok := nameserver.MethodClass(m)
		assert.True(t, ok, "gRPC method %s has no access class", m)
	}

	h := nameserver.NewRemotingHandler(newRegistry(t, nil, nameserver.Config{}), nil)
	handled := 0
	for code := range math.MaxInt16 + 1 {
		req := remoting.NewRequest(remoting.RequestCode(code), nil)
		resp := h.ServeRemoting(t.Context(), nil, req)
		if ns := remoting.NotSupported(req); resp != nil && resp.Code == ns.Code && resp.Remark == ns.Remark {
			continue
		}
		handled++
		_, ok := nameserver.RemotingClass(req.RequestCode())
		assert.True(t, ok, "remoting code %s is answered but has no access class", req.RequestCode())
	}
	assert.Equal(t, 6, handled, "the codes the nameserver answers (update the test with the table)")
}

// The test users: a broker's cluster identity, a client, an admin.
var testUsers = auth.File{Users: []auth.User{
	{AccessKey: "broker-key", SecretKey: "broker-secret", Role: auth.RoleCluster},
	{AccessKey: "alice-key", SecretKey: "alice-secret", Rules: []auth.Rule{{Resource: "*", Actions: []string{"All"}}}},
	{AccessKey: "admin-key", SecretKey: "admin-secret", Role: auth.RoleAdmin},
}}

// writeUsers writes f as an ACL file at path.
func writeUsers(t *testing.T, path string, f auth.File) {
	t.Helper()
	b, err := json.Marshal(f)
	require.NoError(t, err)
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, b, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// authServer is a nameserver with authentication on, serving gRPC and
// remoting on one loopback port.
type authServer struct {
	addr    string
	aclFile string
}

func startAuthServer(t *testing.T) authServer {
	t.Helper()
	acl := filepath.Join(t.TempDir(), "acl.json")
	writeUsers(t, acl, testUsers)
	s, err := nameserver.NewServer(nameserver.Config{AuthenticationEnabled: true, ACLFile: acl,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	require.NotNil(t, s.Guard())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, s.Close(ctx))
		require.NoError(t, <-done)
	})
	return authServer{addr: lis.Addr().String(), aclFile: acl}
}

// signing signs every call with a user's keys at the clock's time plus
// skew (credentials.PerRPCCredentials).
type signing struct {
	ak, sk string
	skew   time.Duration
}

func (s signing) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	ri, _ := credentials.RequestInfoFromContext(ctx)
	date, authz := auth.SignGRPC(s.ak, s.sk, ri.Method, time.Now().Add(s.skew))
	return map[string]string{auth.MDDate: date, auth.MDAuthorization: authz}, nil
}

func (signing) RequireTransportSecurity() bool { return false }

// client dials the nameserver, signing as s (zero: anonymous).
func (a authServer) client(t *testing.T, s signing) gantryv1.NameServerClient {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if s.ak != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(s))
	}
	cc, err := grpc.NewClient(a.addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return gantryv1.NewNameServerClient(cc)
}

// register opens a registration stream and sends req; it returns the
// stream and the answer's error.
func register(t *testing.T, ns gantryv1.NameServerClient, req *gantryv1.RegisterBrokerRequest) (grpc.BidiStreamingClient[gantryv1.RegisterBrokerRequest, gantryv1.RegisterBrokerResponse], error) {
	t.Helper()
	stream, err := ns.RegisterBroker(t.Context())
	require.NoError(t, err)
	if err := stream.Send(req); err != nil {
		_, err = stream.Recv() // the status of a refused stream
		return stream, err
	}
	_, err = stream.Recv()
	return stream, err
}

func brokerReg(addr string) *gantryv1.RegisterBrokerRequest {
	return &gantryv1.RegisterBrokerRequest{
		Cluster: "DefaultCluster", BrokerName: "broker-a", Addr: addr, RemotingAddr: addr,
		Topics:      map[string]*gantryv1.TopicInfo{"Orders": {ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}},
		DataVersion: &gantryv1.DataVersion{TimestampMs: time.Now().UnixMilli(), Counter: 1},
	}
}

// signRemoting signs a remoting request as the official RocketMQ Go
// client does.
func signRemoting(req *remoting.Command, ak, sk string) *remoting.Command {
	req.SetExt(auth.ExtAccessKey, ak)
	req.SetExt(auth.ExtSignature, auth.SignRemoting(sk, req.ExtFields, req.Body))
	return req
}

// Issue 41's route hijack: with authentication on, registering broker-a
// at an attacker's address, or unregistering it, is refused without
// credentials, for a user who is no cluster user, with a wrong signature
// and after the signature's window, over gRPC and remoting alike; the
// real broker's route is unchanged. A broker with cluster credentials
// registers; routes stay public.
func TestRouteHijackRefused(t *testing.T) {
	const real, attacker = "10.0.0.1:10911", "203.0.113.66:10911"
	a := startAuthServer(t)
	_, err := register(t, a.client(t, signing{ak: "broker-key", sk: "broker-secret"}), brokerReg(real))
	require.NoError(t, err, "a broker with cluster credentials registers")
	public := a.client(t, signing{})
	routedTo := func() string {
		t.Helper()
		route, err := public.GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "Orders"})
		require.NoError(t, err, "routes are public")
		require.Len(t, route.BrokerDatas, 1)
		return route.BrokerDatas[0].BrokerAddrs[0]
	}
	require.Equal(t, real, routedTo())

	for _, tc := range []struct {
		name string
		as   signing
		code codes.Code
		says string
	}{
		{"no credentials", signing{}, codes.Unauthenticated, "cluster operations need credentials"},
		{"a normal user", signing{ak: "alice-key", sk: "alice-secret"}, codes.PermissionDenied, "cluster operations need a cluster or admin user"},
		{"a wrong signature", signing{ak: "broker-key", sk: "guessed-secret"}, codes.Unauthenticated, "signature does not match"},
		{"a replay after the window", signing{ak: "broker-key", sk: "broker-secret", skew: -2 * auth.DefaultWindow}, codes.Unauthenticated, "outside the 1m0s window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := a.client(t, tc.as)
			_, err := register(t, ns, brokerReg(attacker))
			assert.Equal(t, tc.code, status.Code(err), "%v", err)
			assert.ErrorContains(t, err, tc.says)
			_, err = ns.UnregisterBroker(t.Context(), &gantryv1.UnregisterBrokerRequest{Cluster: "DefaultCluster", BrokerName: "broker-a", Addr: real})
			assert.Equal(t, tc.code, status.Code(err), "%v", err)
			assert.Equal(t, real, routedTo(), "the route still leads to the real broker")
		})
	}

	_, err = a.client(t, signing{ak: "broker-key", sk: "guessed-secret"}).GetRoute(t.Context(), &gantryv1.GetRouteRequest{Topic: "Orders"})
	assert.Equal(t, codes.Unauthenticated, status.Code(err), "a wrong signature is refused on a public method too: %v", err)

	cl := dialRemoting(t, a.addr)
	for _, tc := range []struct {
		name string
		req  *remoting.Command
		want remoting.ResponseCode
	}{
		{"route, anonymous", remoting.NewRequest(remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": "Orders"}), remoting.ResSuccess},
		{"cluster info, anonymous", remoting.NewRequest(remoting.ReqGetBrokerClusterInfo, nil), remoting.ResSuccess},
		{"route, wrong signature", signRemoting(remoting.NewRequest(remoting.ReqGetRouteInfoByTopic, map[string]string{"topic": "Orders"}), "alice-key", "guessed"), remoting.ResNoPermission},
		{"register, anonymous", remoting.NewRequest(remoting.ReqRegisterBroker, map[string]string{"brokerName": "broker-a", "brokerAddr": attacker}), remoting.ResNoPermission},
		{"unregister, a user", signRemoting(remoting.NewRequest(remoting.ReqUnregisterBroker, map[string]string{"brokerName": "broker-a"}), "alice-key", "alice-secret"), remoting.ResNoPermission},
		{"delete topic, anonymous", remoting.NewRequest(remoting.ReqDeleteTopicInNameServer, map[string]string{"topic": "Orders"}), remoting.ResNoPermission},
		{"delete topic, a cluster user", signRemoting(remoting.NewRequest(remoting.ReqDeleteTopicInNameServer, map[string]string{"topic": "Orders"}), "broker-key", "broker-secret"), remoting.ResNoPermission},
	} {
		t.Run("remoting "+tc.name, func(t *testing.T) {
			resp, err := cl.Invoke(t.Context(), tc.req)
			require.NoError(t, err)
			assert.Equal(t, tc.want, resp.ResponseCode(), resp.Remark)
			if tc.want == remoting.ResNoPermission {
				assert.Contains(t, resp.Remark, "auth: ")
			}
		})
	}
	assert.Equal(t, real, routedTo(), "the route still leads to the real broker")
	resp, err := cl.Invoke(t.Context(), signRemoting(remoting.NewRequest(remoting.ReqDeleteTopicInNameServer, map[string]string{"topic": "Orders"}), "admin-key", "admin-secret"))
	require.NoError(t, err)
	assert.Equal(t, remoting.ResSuccess, resp.ResponseCode(), "an admin deletes a topic's route: %s", resp.Remark)
}

// A registration stream of a user removed from the ACL file ends at its
// next registration.
func TestRevokedBrokerStreamEnds(t *testing.T) {
	a := startAuthServer(t)
	stream, err := register(t, a.client(t, signing{ak: "broker-key", sk: "broker-secret"}), brokerReg("10.0.0.1:10911"))
	require.NoError(t, err)
	writeUsers(t, a.aclFile, auth.File{Users: testUsers.Users[1:]})
	require.Eventually(t, func() bool {
		if err := stream.Send(brokerReg("10.0.0.1:10911")); err != nil {
			_, err = stream.Recv()
			return status.Code(err) == codes.Unauthenticated
		}
		_, err := stream.Recv()
		return status.Code(err) == codes.Unauthenticated
	}, 30*time.Second, 50*time.Millisecond)
}

// A nameserver with authentication on and nobody in its users' file
// refuses to start; the settings are checked.
func TestAuthConfig(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "acl.json")
	writeUsers(t, empty, auth.File{})
	_, err := nameserver.NewServer(nameserver.Config{AuthenticationEnabled: true, ACLFile: empty})
	require.ErrorContains(t, err, "authentication on with no users in "+empty)
	_, err = nameserver.NewServer(nameserver.Config{AuthenticationEnabled: true, ACLFile: filepath.Join(t.TempDir(), "missing.json")})
	require.ErrorContains(t, err, "missing.json")

	for _, tc := range []struct {
		cfg  nameserver.Config
		says string
	}{
		{nameserver.Config{AuthenticationEnabled: true}, "AuthenticationEnabled without ACLFile"},
		{nameserver.Config{ACLFile: empty}, fmt.Sprintf("ACLFile %s without AuthenticationEnabled", empty)},
		{nameserver.Config{AuthenticationEnabled: true, ACLFile: empty, AuthWindow: time.Millisecond}, "AuthWindow 1ms: want at least 1s"},
	} {
		assert.ErrorContains(t, tc.cfg.Validate(), tc.says)
	}
}
