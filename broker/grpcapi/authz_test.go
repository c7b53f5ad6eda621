package grpcapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/grpcapi"
	"github.com/gantrymq/gantry/broker/server"
	"github.com/gantrymq/gantry/message"
)

// The users of the authorization tests: an admin, a cluster member, a
// producer and a consumer of topic T (group G), and a user with every
// right on other resources.
const testACL = `{"users": [
  {"accessKey": "admin1", "secretKey": "admin-secret", "role": "admin"},
  {"accessKey": "cluster1", "secretKey": "cluster-secret", "role": "cluster"},
  {"accessKey": "producer1", "secretKey": "producer1-secret", "rules": [{"resource": "Topic:T", "actions": ["Pub"]}]},
  {"accessKey": "consumer1", "secretKey": "consumer1-secret", "rules": [
    {"resource": "Topic:T", "actions": ["Sub"]}, {"resource": "Group:G", "actions": ["Sub"]}]},
  {"accessKey": "grouponly1", "secretKey": "grouponly1-secret", "rules": [{"resource": "Group:G", "actions": ["Sub"]}]},
  {"accessKey": "other1", "secretKey": "other1-secret", "rules": [{"resource": "*", "actions": ["All"]},
    {"resource": "Topic:T", "actions": ["All"], "decision": "Deny"}, {"resource": "Group:G", "actions": ["All"], "decision": "Deny"}]}
]}`

// cred signs a call: a user's keys, signed skew away from now.
type cred struct {
	ak, sk string
	skew   time.Duration
}

var (
	admin1   = &cred{ak: "admin1", sk: "admin-secret"}
	cluster1 = &cred{ak: "cluster1", sk: "cluster-secret"}
	pub1     = &cred{ak: "producer1", sk: "producer1-secret"}
	sub1     = &cred{ak: "consumer1", sk: "consumer1-secret"}
	other1   = &cred{ak: "other1", sk: "other1-secret"}
	group1   = &cred{ak: "grouponly1", sk: "grouponly1-secret"} // SUB on G, no topic
)

// sign returns ctx with c's signature of method, or ctx for nil c.
func (c *cred) sign(ctx context.Context, method string) context.Context {
	if c == nil {
		return ctx
	}
	date, authz := auth.SignGRPC(c.ak, c.sk, method, time.Now().Add(c.skew))
	return metadata.AppendToOutgoingContext(ctx, auth.MDDate, date, auth.MDAuthorization, authz)
}

// authServer starts a broker with authentication on (the users of
// testACL) and returns it with a connection to its gRPC port.
func authServer(t *testing.T, adjust func(*broker.Config)) (*server.Server, *grpc.ClientConn) {
	t.Helper()
	dir := t.TempDir()
	acl := filepath.Join(dir, "acl.json")
	require.NoError(t, os.WriteFile(acl, []byte(testACL), 0o600))
	listen := func() net.Listener {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		return lis
	}
	bc := broker.Config{
		StorePathRootDir: filepath.Join(dir, "store"),
		Logger:           slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})),
		AuthConfig:       broker.AuthConfig{AuthenticationEnabled: true, ACLFile: acl},
		// Sent-back messages wait an hour: none lands in the retry topic
		// while a test compares the broker's state around a refusal.
		MessageDelayLevel: slices.Repeat([]time.Duration{time.Hour}, 18),
	}
	if adjust != nil {
		adjust(&bc)
	}
	s, err := server.Start(t.Context(), server.Config{Broker: bc, GRPCListener: listen(), HTTPListener: listen(), RemotingListener: listen()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	cc, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return s, cc
}

// Every method the broker's gRPC server registers has a class, and the
// table names no method it does not serve.
func TestEveryMethodHasAClass(t *testing.T) {
	b, err := broker.Open(t.Context(), broker.Config{StorePathRootDir: filepath.Join(t.TempDir(), "store")})
	require.NoError(t, err)
	defer b.Close(context.Background())
	gs, _ := grpcapi.NewServer(b, nil)
	var methods []string
	for svc, info := range gs.GetServiceInfo() {
		for _, m := range info.Methods {
			full := "/" + svc + "/" + m.Name
			methods = append(methods, full)
			c, ok := grpcapi.MethodClass(full)
			if assert.True(t, ok, "%s is served without a class", full) {
				assert.Contains(t, []auth.Class{auth.ClassPublic, auth.ClassPub, auth.ClassSub, auth.ClassAdmin, auth.ClassCluster}, c, full)
			}
		}
	}
	assert.Len(t, methods, len(authOps(nil)), "the operations table of TestOperationsNeedTheirRights covers every method")
	for _, op := range authOps(nil) {
		assert.Contains(t, methods, op.method)
		c, _ := grpcapi.MethodClass(op.method)
		assert.Equal(t, op.class, c, "%s: the table of the test and the broker's agree", op.method)
	}
}

// fixture is what the operations of the table test act on: topic T (4
// queues) with messages, group G with an offset, two dead letters of G,
// and TDel and GDel to delete.
type fixture struct {
	b    *broker.Broker
	cc   *grpc.ClientConn
	sent []broker.SendResult
}

func newFixture(t *testing.T, b *broker.Broker, cc *grpc.ClientConn) *fixture {
	t.Helper()
	for _, name := range []string{"T", "TDel"} {
		require.NoError(t, b.CreateOrUpdateTopic(broker.TopicConfig{TopicName: name, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}))
	}
	for _, g := range []string{"G", "GDel"} {
		require.NoError(t, b.PutGroup(broker.DefaultSubscriptionGroup(g)))
	}
	f := &fixture{b: b, cc: cc}
	for i := range 4 {
		res, err := b.Send(t.Context(), "T", []*message.Message{{Topic: "T", QueueID: 0, Body: fmt.Appendf(nil, "m%d", i),
			Properties: message.Properties{{Key: message.PropKeys, Value: fmt.Sprintf("key-%d", i)}}}})
		require.NoError(t, err)
		f.sent = append(f.sent, res...)
	}
	for _, r := range f.sent[2:] {
		sb, err := b.SendBack(t.Context(), broker.SendBackRequest{Group: "G", PhysicalOffset: r.PhysicalOffset, DelayLevel: -1, Reason: "test"})
		require.NoError(t, err)
		require.True(t, sb.DeadLettered)
	}
	require.NoError(t, b.CommitOffset("G", "T", 0, 1))
	require.Eventually(t, func() bool {
		_, hi := b.QueueOffsets("T", 0)
		_, dlq := b.QueueOffsets(broker.DLQTopic("G"), 0)
		return hi == 4 && dlq == 2
	}, 5*time.Second, time.Millisecond)
	return f
}

// snapshot is what a refused call must not change: topics, groups, every
// queue's offsets, the committed offsets, the dead letters and the
// group's consumers.
func (f *fixture) snapshot() string {
	var sb strings.Builder
	writeLog(&sb, f.b)
	for _, tc := range f.b.Topics() {
		fmt.Fprintf(&sb, "topic %s:", tc.TopicName)
		for q := range tc.ReadQueueNums {
			lo, hi := f.b.QueueOffsets(tc.TopicName, q)
			fmt.Fprintf(&sb, " %d-%d", lo, hi)
		}
		sb.WriteString("\n")
	}
	for _, g := range f.b.Groups() {
		fmt.Fprintf(&sb, "group %s\n", g.GroupName)
	}
	for _, k := range f.b.OffsetKeys("") {
		for q := range int32(4) {
			off, ok := f.b.QueryOffset(k.Group, k.Topic, q)
			fmt.Fprintf(&sb, "offset %s %s %d: %d %v\n", k.Group, k.Topic, q, off, ok)
		}
	}
	stats := f.b.DLQStats()
	slices.SortFunc(stats, func(a, b broker.DLQGroupStats) int { return strings.Compare(a.Group, b.Group) })
	for _, s := range stats {
		fmt.Fprintf(&sb, "dlq %s: %d stored, %d held, %d resent\n", s.Group, s.Stored, s.Held, s.Resent)
	}
	fmt.Fprintf(&sb, "consumers of G: %v\n", f.b.ConsumerList("G"))
	users, err := f.b.Users().Bytes()
	if err != nil {
		panic(err)
	}
	sb.Write(users)
	return sb.String()
}

// authOp is one method of the broker, called with a context signed (or
// not) for it.
type authOp struct {
	method string
	class  auth.Class
	call   func(ctx context.Context) error
}

// authOps is the table of every method the broker serves, each with a
// call that succeeds with the right credentials on the fixture f, in
// this order (deletions and the purge last of what they touch).
func authOps(f *fixture) []authOp {
	var cc *grpc.ClientConn
	var phys int64
	var msgID string
	if f != nil {
		cc, phys, msgID = f.cc, f.sent[0].PhysicalOffset, f.sent[0].MsgID
	}
	return append(messagingOps(f, gantryv1.NewMessagingClient(cc), phys), adminOps(gantryv1.NewAdminClient(cc), msgID)...)
}

// messagingOps are authOps's Messaging methods; phys is a message of T.
func messagingOps(f *fixture, m gantryv1.MessagingClient, phys int64) []authOp {
	return []authOp{
		{gantryv1.Messaging_Send_FullMethodName, auth.ClassPub, func(ctx context.Context) error {
			_, err := m.Send(ctx, &gantryv1.SendRequest{Topic: "T", Messages: []*gantryv1.Message{{QueueId: 1, Body: []byte("x")}}})
			return err
		}},
		{gantryv1.Messaging_SendStream_FullMethodName, auth.ClassPub, func(ctx context.Context) error {
			st, err := m.SendStream(ctx)
			if err != nil {
				return err
			}
			defer st.CloseSend()
			if err := st.Send(&gantryv1.SendRequest{Topic: "T", RequestId: 7, Messages: []*gantryv1.Message{{QueueId: 1, Body: []byte("x")}}}); err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			resp, err := st.Recv()
			if err != nil {
				return err
			}
			if e := resp.GetError(); e != nil {
				return status.Error(codes.Code(e.GetCode()), e.GetMessage())
			}
			return nil
		}},
		{gantryv1.Messaging_Pull_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			_, err := m.Pull(ctx, &gantryv1.PullRequest{Group: "G", Topic: "T", QueueId: 0, Offset: 0, MaxMessages: 1})
			return err
		}},
		{gantryv1.Messaging_QueryOffset_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			_, err := m.QueryOffset(ctx, &gantryv1.QueryOffsetRequest{Group: "G", Topic: "T", QueueId: 0})
			return err
		}},
		{gantryv1.Messaging_CommitOffset_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			_, err := m.CommitOffset(ctx, &gantryv1.CommitOffsetRequest{Group: "G", Topic: "T", QueueId: 0, Offset: 2})
			return err
		}},
		{gantryv1.Messaging_CommitOffsets_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			_, err := m.CommitOffsets(ctx, &gantryv1.CommitOffsetsRequest{Group: "G", Entries: []*gantryv1.OffsetEntry{
				{Topic: "T", QueueId: 1, Offset: 1}, {Topic: "T", QueueId: 2, Offset: 0}}})
			return err
		}},
		{gantryv1.Messaging_GetQueueOffsets_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			_, err := m.GetQueueOffsets(ctx, &gantryv1.GetQueueOffsetsRequest{Topic: "T", QueueId: 0})
			return err
		}},
		{gantryv1.Messaging_SearchOffset_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			_, err := m.SearchOffset(ctx, &gantryv1.SearchOffsetRequest{Topic: "T", QueueId: 0, TimestampMs: time.Now().UnixMilli()})
			return err
		}},
		{gantryv1.Messaging_Heartbeat_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			_, err := m.Heartbeat(ctx, &gantryv1.HeartbeatRequest{ClientId: "c1", Group: "G",
				Subscriptions: []*gantryv1.Subscription{{Topic: "T", Expression: "*"}}})
			return err
		}},
		{gantryv1.Messaging_GetConsumerList_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			_, err := m.GetConsumerList(ctx, &gantryv1.GetConsumerListRequest{Group: "G"})
			return err
		}},
		{gantryv1.Messaging_SendBack_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			_, err := m.SendBack(ctx, &gantryv1.SendBackRequest{Group: "G", PhysicalOffset: phys, DelayLevel: 1})
			return err
		}},
		{gantryv1.Messaging_SendBackBatch_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			resp, err := m.SendBackBatch(ctx, &gantryv1.SendBackBatchRequest{Requests: []*gantryv1.SendBackRequest{
				{Group: "G", PhysicalOffset: phys, DelayLevel: 1}}})
			if err == nil && resp.GetResults()[0].GetError() != nil {
				err = errors.New(resp.GetResults()[0].GetError().GetMessage())
			}
			return err
		}},
		{gantryv1.Messaging_LockQueues_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			resp, err := m.LockQueues(ctx, &gantryv1.LockQueuesRequest{Group: "G", ClientId: "c1", Queues: []*gantryv1.QueueRef{{Topic: "T", QueueId: 3}}})
			if err == nil && len(resp.GetLocked()) != 1 {
				err = fmt.Errorf("queue T/3 not locked: %v (a refused call locked it?)", resp.GetLocked())
			}
			return err
		}},
		{gantryv1.Messaging_UnlockQueues_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			_, err := m.UnlockQueues(ctx, &gantryv1.UnlockQueuesRequest{Group: "G", ClientId: "c1", Queues: []*gantryv1.QueueRef{{Topic: "T", QueueId: 3}}})
			return err
		}},
		{gantryv1.Messaging_WatchGroup_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			// A watch that ends unregisters its client: c1 registers again
			// (Heartbeat registered it before the refused calls).
			if !slices.Contains(f.b.ConsumerList("G"), "c1") {
				if err := f.b.Heartbeat(broker.Heartbeat{ClientID: "c1", Group: "G", Subscriptions: []broker.Subscription{{Topic: "T", Expression: "*"}}}); err != nil {
					return err
				}
			}
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			st, err := m.WatchGroup(ctx, &gantryv1.WatchGroupRequest{Group: "G", ClientId: "c1"})
			if err != nil {
				return err
			}
			if _, err = st.Recv(); err != nil {
				return err
			}
			cancel()
			for deadline := time.Now().Add(5 * time.Second); slices.Contains(f.b.ConsumerList("G"), "c1"); { // the watch's end: its client leaves
				if time.Now().After(deadline) {
					return errors.New("c1 still registered 5 s after its watch ended")
				}
				time.Sleep(time.Millisecond)
			}
			return nil
		}},
	}
}

// adminOps are authOps's Admin methods; msgID is a message of T.
func adminOps(a gantryv1.AdminClient, msgID string) []authOp {
	return append([]authOp{
		{gantryv1.Admin_CreateTopic_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.CreateTopic(ctx, &gantryv1.CreateTopicRequest{Topic: &gantryv1.TopicConfig{Name: "TNew"}})
			return err
		}},
		{gantryv1.Admin_DeleteTopic_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.DeleteTopic(ctx, &gantryv1.DeleteTopicRequest{Name: "TDel"})
			return err
		}},
		{gantryv1.Admin_ListTopics_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.ListTopics(ctx, &gantryv1.AdminListTopicsRequest{})
			return err
		}},
		{gantryv1.Admin_TopicStatus_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			_, err := a.TopicStatus(ctx, &gantryv1.TopicStatusRequest{Topic: "T"})
			return err
		}},
		{gantryv1.Admin_CreateGroup_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.CreateGroup(ctx, &gantryv1.CreateGroupRequest{Group: &gantryv1.GroupConfig{Name: "GNew", ConsumeEnable: true}})
			return err
		}},
		{gantryv1.Admin_DeleteGroup_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.DeleteGroup(ctx, &gantryv1.DeleteGroupRequest{Name: "GDel"})
			return err
		}},
		{gantryv1.Admin_ListGroups_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.ListGroups(ctx, &gantryv1.ListGroupsRequest{})
			return err
		}},
		{gantryv1.Admin_ConsumerProgress_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			_, err := a.ConsumerProgress(ctx, &gantryv1.ConsumerProgressRequest{Group: "G", Topic: "T"})
			return err
		}},
		{gantryv1.Admin_ConsumerConnection_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			_, err := a.ConsumerConnection(ctx, &gantryv1.ConsumerConnectionRequest{Group: "G"})
			return err
		}},
		{gantryv1.Admin_ResetOffsetByTime_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.ResetOffsetByTime(ctx, &gantryv1.ResetOffsetByTimeRequest{Group: "G", Topic: "T", TimestampMs: 0})
			return err
		}},
		{gantryv1.Admin_QueryMessageById_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.QueryMessageById(ctx, &gantryv1.QueryMessageByIdRequest{MsgId: msgID})
			return err
		}},
		{gantryv1.Admin_QueryMessageByKey_FullMethodName, auth.ClassSub, func(ctx context.Context) error {
			_, err := a.QueryMessageByKey(ctx, &gantryv1.QueryMessageByKeyRequest{Topic: "T", Key: "key-0"})
			return err
		}},
		{gantryv1.Admin_BrokerStatus_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.BrokerStatus(ctx, &gantryv1.BrokerStatusRequest{})
			return err
		}},
		{gantryv1.Admin_HAStatus_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.HAStatus(ctx, &gantryv1.HAStatusRequest{})
			return err
		}},
		{gantryv1.Admin_DLQList_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.DLQList(ctx, &gantryv1.DLQListRequest{Filter: &gantryv1.DLQFilter{Group: "G"}})
			return err
		}},
		{gantryv1.Admin_DLQShow_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.DLQShow(ctx, &gantryv1.DLQShowRequest{Group: "G", Offset: 0})
			return err
		}},
		{gantryv1.Admin_DLQExport_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			st, err := a.DLQExport(ctx, &gantryv1.DLQExportRequest{Filter: &gantryv1.DLQFilter{Group: "G"}})
			if err != nil {
				return err
			}
			for {
				if _, err := st.Recv(); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
			}
		}},
		{gantryv1.Admin_DLQResend_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.DLQResend(ctx, &gantryv1.DLQResendRequest{Selection: &gantryv1.DLQSelection{
				Filter: &gantryv1.DLQFilter{Group: "G"}, Offsets: []int64{0}}})
			return err
		}},
		{gantryv1.Admin_DLQPurge_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.DLQPurge(ctx, &gantryv1.DLQPurgeRequest{Selection: &gantryv1.DLQSelection{
				Filter: &gantryv1.DLQFilter{Group: "G"}, All: true}})
			return err
		}},
	}, userOps(a)...)
}

// userOps are the user and rule methods, in an order each succeeds in
// when run by an admin.
func userOps(a gantryv1.AdminClient) []authOp {
	rule := []*gantryv1.AclRule{{Resource: "Topic:T", Actions: []string{"Pub"}}}
	return []authOp{
		{gantryv1.Admin_CreateUser_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.CreateUser(ctx, &gantryv1.CreateUserRequest{AccessKey: "newuser1", SecretKey: "newsecret1"})
			return err
		}},
		{gantryv1.Admin_UpdateUser_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.UpdateUser(ctx, &gantryv1.UpdateUserRequest{AccessKey: "newuser1", SecretKey: "newsecret2"})
			return err
		}},
		{gantryv1.Admin_GetUser_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.GetUser(ctx, &gantryv1.GetUserRequest{AccessKey: "newuser1"})
			return err
		}},
		{gantryv1.Admin_ListUsers_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.ListUsers(ctx, &gantryv1.ListUsersRequest{})
			return err
		}},
		{gantryv1.Admin_CreateAcl_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.CreateAcl(ctx, &gantryv1.CreateAclRequest{AccessKey: "newuser1", Rules: rule})
			return err
		}},
		{gantryv1.Admin_UpdateAcl_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.UpdateAcl(ctx, &gantryv1.UpdateAclRequest{AccessKey: "newuser1", Rules: rule})
			return err
		}},
		{gantryv1.Admin_ListAcl_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.ListAcl(ctx, &gantryv1.ListAclRequest{})
			return err
		}},
		{gantryv1.Admin_DeleteAcl_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.DeleteAcl(ctx, &gantryv1.DeleteAclRequest{AccessKey: "newuser1"})
			return err
		}},
		{gantryv1.Admin_DeleteUser_FullMethodName, auth.ClassAdmin, func(ctx context.Context) error {
			_, err := a.DeleteUser(ctx, &gantryv1.DeleteUserRequest{AccessKey: "newuser1"})
			return err
		}},
	}
}

// Every operation is refused, and changes nothing, without credentials,
// with a wrong secret, an unknown access key or a signature outside the
// window (a replayed call), and to a user without its right; the right
// user runs it. Refusals are UNAUTHENTICATED or PERMISSION_DENIED naming
// what was refused, and /metrics-style counters count them by reason.
func TestOperationsNeedTheirRights(t *testing.T) {
	s, cc := authServer(t, nil)
	f := newFixture(t, s.Broker(), cc)
	unauthenticated := []struct {
		name string
		c    *cred
		want string
	}{
		{"no credentials", nil, "operations need credentials"},
		{"wrong secret", &cred{ak: "admin1", sk: "not-the-secret"}, "signature does not match"},
		{"unknown access key", &cred{ak: "nobody1", sk: "whatever1"}, `unknown access key "nobody1"`},
		{"replayed after its window", &cred{ak: "admin1", sk: "admin-secret", skew: -2 * broker.DefaultAuthWindow}, "outside the 1m0s window"},
		{"signed in the future", &cred{ak: "admin1", sk: "admin-secret", skew: 2 * broker.DefaultAuthWindow}, "outside the 1m0s window"},
	}
	for _, op := range authOps(f) {
		name := op.method[strings.LastIndex(op.method, "/")+1:]
		t.Run(name, func(t *testing.T) {
			before := f.snapshot()
			for _, u := range unauthenticated {
				err := op.call(u.c.sign(t.Context(), op.method))
				assert.Equal(t, codes.Unauthenticated, status.Code(err), "%s: %v", u.name, err)
				assert.Contains(t, status.Convert(err).Message(), u.want, u.name)
			}
			right, wrong := sub1, []*cred{pub1, other1, cluster1}
			switch op.class {
			case auth.ClassPub:
				right, wrong = pub1, []*cred{sub1, other1, cluster1}
			case auth.ClassAdmin:
				right, wrong = admin1, []*cred{pub1, sub1, other1, cluster1}
			}
			for _, u := range wrong {
				err := op.call(u.sign(t.Context(), op.method))
				assert.Equal(t, codes.PermissionDenied, status.Code(err), "%s: %v", u.ak, err)
				assert.Contains(t, status.Convert(err).Message(), `user "`+u.ak+`"`)
			}
			assert.Equal(t, before, f.snapshot(), "a refused call changed something")
			require.NoError(t, op.call(right.sign(t.Context(), op.method)), "%s", right.ak)
			if op.class != auth.ClassAdmin {
				require.NoError(t, op.call(admin1.sign(t.Context(), op.method)), "an admin may do everything")
			}
		})
	}
	refused := s.Broker().Guard().Refused()
	for _, r := range []auth.Reason{auth.ReasonNoCredentials, auth.ReasonBadSignature, auth.ReasonUnknownKey, auth.ReasonExpired, auth.ReasonDenied} {
		assert.NotZero(t, refused[r], r.String())
	}
}

// A refusal names what was refused: the user, the right and the resource.
func TestRefusalNamesWhatWasRefused(t *testing.T) {
	s, cc := authServer(t, nil)
	require.NoError(t, s.Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}))
	m := gantryv1.NewMessagingClient(cc)
	_, err := m.Send(sub1.sign(t.Context(), gantryv1.Messaging_Send_FullMethodName),
		&gantryv1.SendRequest{Topic: "T", Messages: []*gantryv1.Message{{QueueId: -1, Body: []byte("x")}}})
	require.Equal(t, codes.PermissionDenied, status.Code(err))
	assert.Equal(t, `auth: permission denied: user "consumer1": PUB on Topic:T not allowed`, status.Convert(err).Message())
	_, err = m.Pull(pub1.sign(t.Context(), gantryv1.Messaging_Pull_FullMethodName), &gantryv1.PullRequest{Group: "G", Topic: "T"})
	require.Equal(t, codes.PermissionDenied, status.Code(err))
	assert.Equal(t, `auth: permission denied: user "producer1": SUB on Topic:T not allowed`, status.Convert(err).Message())
	// A signature is for one method: replayed on another, it does not hold.
	ctx := pub1.sign(t.Context(), gantryv1.Messaging_Send_FullMethodName)
	_, err = m.Pull(ctx, &gantryv1.PullRequest{Group: "G", Topic: "T"})
	require.Equal(t, codes.Unauthenticated, status.Code(err))
	assert.Contains(t, status.Convert(err).Message(), "does not match its method")
}

// The replay window follows the broker's clock (broker.Config.Now): a
// call signed now is refused by a broker whose clock is past the window.
func TestReplayWindowFollowsTheBrokersClock(t *testing.T) {
	skew := 5 * time.Minute
	s, cc := authServer(t, func(c *broker.Config) {
		c.Now = func() time.Time { return time.Now().Add(skew) }
		c.AuthWindow = 2 * time.Minute
	})
	require.NoError(t, s.Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}))
	a := gantryv1.NewAdminClient(cc)
	_, err := a.ListTopics(admin1.sign(t.Context(), gantryv1.Admin_ListTopics_FullMethodName), &gantryv1.AdminListTopicsRequest{})
	require.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "outside the 2m0s window")
	late := &cred{ak: admin1.ak, sk: admin1.sk, skew: skew}
	_, err = a.ListTopics(late.sign(t.Context(), gantryv1.Admin_ListTopics_FullMethodName), &gantryv1.AdminListTopicsRequest{})
	require.NoError(t, err)
}

// With authorizationEnabled=false any authenticated user runs any
// operation; an unsigned call is still refused.
func TestAuthorizationDisabled(t *testing.T) {
	s, cc := authServer(t, func(c *broker.Config) { c.SkipAuthorization = true })
	require.NoError(t, s.Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}))
	a := gantryv1.NewAdminClient(cc)
	_, err := a.CreateTopic(pub1.sign(t.Context(), gantryv1.Admin_CreateTopic_FullMethodName),
		&gantryv1.CreateTopicRequest{Topic: &gantryv1.TopicConfig{Name: "ByPub1"}})
	require.NoError(t, err)
	_, err = a.ListTopics(t.Context(), &gantryv1.AdminListTopicsRequest{})
	require.Equal(t, codes.Unauthenticated, status.Code(err))
}

// A send stream goes on after a refused request: the refusal is that
// request's answer.
func TestSendStreamRefusesPerRequest(t *testing.T) {
	s, cc := authServer(t, nil)
	for _, name := range []string{"T", "U"} {
		require.NoError(t, s.Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: name, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}))
	}
	m := gantryv1.NewMessagingClient(cc)
	st, err := m.SendStream(pub1.sign(t.Context(), gantryv1.Messaging_SendStream_FullMethodName))
	require.NoError(t, err)
	for i, topic := range []string{"T", "U", "T"} {
		require.NoError(t, st.Send(&gantryv1.SendRequest{Topic: topic, RequestId: uint64(i), Messages: []*gantryv1.Message{{QueueId: 0, Body: []byte("x")}}}))
		resp, err := st.Recv()
		require.NoError(t, err)
		require.Equal(t, uint64(i), resp.GetRequestId())
		if topic == "U" {
			require.NotNil(t, resp.GetError())
			assert.Equal(t, int32(codes.PermissionDenied), resp.GetError().GetCode())
			assert.Contains(t, resp.GetError().GetMessage(), "PUB on Topic:U not allowed")
			continue
		}
		assert.Nil(t, resp.GetError())
	}
	require.NoError(t, st.CloseSend())
	_, err = st.Recv()
	require.ErrorIs(t, err, io.EOF)
	require.Eventually(t, func() bool {
		_, hi := s.Broker().QueueOffsets("T", 0)
		return hi == 2
	}, 5*time.Second, time.Millisecond)
	_, hi := s.Broker().QueueOffsets("U", 0)
	assert.Zero(t, hi, "nothing stored in U")
}

// A send-back copies a message into the group's retry topic, where the
// group's consumers read it: it needs SUB on the message's topic too.
func TestSendBackNeedsTheMessagesTopic(t *testing.T) {
	s, cc := authServer(t, nil)
	b := s.Broker()
	require.NoError(t, b.CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}))
	require.NoError(t, b.PutGroup(broker.DefaultSubscriptionGroup("G")))
	res, err := b.Send(t.Context(), "T", []*message.Message{{Topic: "T", QueueID: 0, Body: []byte("secret")}})
	require.NoError(t, err)
	m := gantryv1.NewMessagingClient(cc)
	req := &gantryv1.SendBackRequest{Group: "G", PhysicalOffset: res[0].PhysicalOffset, DelayLevel: 1}
	_, err = m.SendBack(group1.sign(t.Context(), gantryv1.Messaging_SendBack_FullMethodName), req)
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), `user "grouponly1": SUB on Topic:T not allowed`)
	_, err = m.SendBackBatch(group1.sign(t.Context(), gantryv1.Messaging_SendBackBatch_FullMethodName),
		&gantryv1.SendBackBatchRequest{Requests: []*gantryv1.SendBackRequest{req}})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	_, retried := b.QueueOffsets(broker.RetryTopic("G"), 0)
	assert.Zero(t, retried)
	_, err = m.SendBack(sub1.sign(t.Context(), gantryv1.Messaging_SendBack_FullMethodName), req)
	require.NoError(t, err)
}

// writeLog writes the commit log's end, once the dispatcher has indexed
// all of it (at most 5 s), so that the queues' offsets that follow are
// every stored message's.
func writeLog(sb *strings.Builder, b *broker.Broker) {
	st := b.Status()
	for deadline := time.Now().Add(5 * time.Second); st.Dispatch.LagBytes > 0 && time.Now().Before(deadline); st = b.Status() {
		time.Sleep(time.Millisecond)
	}
	fmt.Fprintf(sb, "commit log end %d, dispatch lag %d\n", st.MaxLogOffset, st.Dispatch.LagBytes)
}
