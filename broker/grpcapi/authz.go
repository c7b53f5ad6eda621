package grpcapi

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
)

// methodClasses is the class of every method the broker serves
// (docs/SECURITY.md, "Operations and rights"). With authentication on, a
// method missing here is refused to everyone, admins included.
var methodClasses = map[string]auth.Class{
	// Messaging: what producers and consumers call.
	gantryv1.Messaging_Send_FullMethodName:            auth.ClassPub, // PUB on the topic
	gantryv1.Messaging_SendStream_FullMethodName:      auth.ClassPub, // PUB on each request's topic
	gantryv1.Messaging_Pull_FullMethodName:            auth.ClassSub, // SUB on the topic and the group
	gantryv1.Messaging_QueryOffset_FullMethodName:     auth.ClassSub, // SUB on the group and the topic
	gantryv1.Messaging_CommitOffset_FullMethodName:    auth.ClassSub, // SUB on the group and the topic
	gantryv1.Messaging_CommitOffsets_FullMethodName:   auth.ClassSub, // SUB on the group and every entry's topic
	gantryv1.Messaging_GetQueueOffsets_FullMethodName: auth.ClassSub, // SUB on the topic
	gantryv1.Messaging_SearchOffset_FullMethodName:    auth.ClassSub, // SUB on the topic
	gantryv1.Messaging_Heartbeat_FullMethodName:       auth.ClassSub, // SUB on the group and its subscriptions' topics
	gantryv1.Messaging_GetConsumerList_FullMethodName: auth.ClassSub, // SUB on the group
	gantryv1.Messaging_SendBack_FullMethodName:        auth.ClassSub, // SUB on the group and the message's topic
	gantryv1.Messaging_SendBackBatch_FullMethodName:   auth.ClassSub, // SUB on every request's group and message's topic
	gantryv1.Messaging_LockQueues_FullMethodName:      auth.ClassSub, // SUB on the group and the queues' topics
	gantryv1.Messaging_UnlockQueues_FullMethodName:    auth.ClassSub, // SUB on the group and the queues' topics
	gantryv1.Messaging_WatchGroup_FullMethodName:      auth.ClassSub, // SUB on the group
	// Admin: changes, dead letters and broker-wide state need an admin;
	// what reads one topic or group needs SUB on it.
	gantryv1.Admin_CreateTopic_FullMethodName:        auth.ClassAdmin,
	gantryv1.Admin_DeleteTopic_FullMethodName:        auth.ClassAdmin,
	gantryv1.Admin_ListTopics_FullMethodName:         auth.ClassAdmin,
	gantryv1.Admin_TopicStatus_FullMethodName:        auth.ClassSub, // SUB on the topic
	gantryv1.Admin_CreateGroup_FullMethodName:        auth.ClassAdmin,
	gantryv1.Admin_DeleteGroup_FullMethodName:        auth.ClassAdmin,
	gantryv1.Admin_ListGroups_FullMethodName:         auth.ClassAdmin,
	gantryv1.Admin_ConsumerProgress_FullMethodName:   auth.ClassSub, // SUB on the group (and the topic asked)
	gantryv1.Admin_ConsumerConnection_FullMethodName: auth.ClassSub, // SUB on the group
	gantryv1.Admin_ResetOffsetByTime_FullMethodName:  auth.ClassAdmin,
	gantryv1.Admin_QueryMessageById_FullMethodName:   auth.ClassAdmin, // an id names a message of any topic
	gantryv1.Admin_QueryMessageByKey_FullMethodName:  auth.ClassSub,   // SUB on the topic
	gantryv1.Admin_BrokerStatus_FullMethodName:       auth.ClassAdmin,
	gantryv1.Admin_HAStatus_FullMethodName:           auth.ClassAdmin,
	gantryv1.Admin_DLQList_FullMethodName:            auth.ClassAdmin,
	gantryv1.Admin_DLQShow_FullMethodName:            auth.ClassAdmin,
	gantryv1.Admin_DLQResend_FullMethodName:          auth.ClassAdmin,
	gantryv1.Admin_DLQExport_FullMethodName:          auth.ClassAdmin,
	gantryv1.Admin_DLQPurge_FullMethodName:           auth.ClassAdmin,
	// Users and rules (admin_users.go).
	gantryv1.Admin_CreateUser_FullMethodName: auth.ClassAdmin,
	gantryv1.Admin_UpdateUser_FullMethodName: auth.ClassAdmin,
	gantryv1.Admin_DeleteUser_FullMethodName: auth.ClassAdmin,
	gantryv1.Admin_ListUsers_FullMethodName:  auth.ClassAdmin,
	gantryv1.Admin_GetUser_FullMethodName:    auth.ClassAdmin,
	gantryv1.Admin_CreateAcl_FullMethodName:  auth.ClassAdmin,
	gantryv1.Admin_UpdateAcl_FullMethodName:  auth.ClassAdmin,
	gantryv1.Admin_DeleteAcl_FullMethodName:  auth.ClassAdmin,
	gantryv1.Admin_ListAcl_FullMethodName:    auth.ClassAdmin,
}

// MethodClass returns the class of a method the broker serves, by its
// full name ("/gantry.v1.Messaging/Send"); false for any other.
func MethodClass(fullMethod string) (auth.Class, bool) {
	c, ok := methodClasses[fullMethod]
	return c, ok
}

// authTap authenticates each call from its metadata before gRPC creates
// its stream (grpc.InTapHandle): a signed call's handlers find its user
// in their context (auth.FromContext); a call with a bad, unknown or
// expired signature is refused at once with UNAUTHENTICATED naming the
// problem. An unsigned call goes on, anonymous: its handler refuses it
// unless the operation is public, so that a send stream answers each
// request with the refusal. gRPC runs the tap under its transport's lock:
// it does one HMAC and nothing that waits.
func authTap(g *auth.Guard) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		date, authz := firstMD(info.Header, auth.MDDate), firstMD(info.Header, auth.MDAuthorization)
		if date == "" && authz == "" {
			return ctx, nil
		}
		p, err := g.GRPC(info.FullMethodName, date, authz, peerAddr(ctx))
		if err != nil {
			return ctx, refusal(err)
		}
		return auth.NewContext(ctx, p), nil
	}
}

// firstMD is the first value of key in md, "" if none.
func firstMD(md metadata.MD, key string) string {
	if v := md[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// guard authorizes the calls of a service: a nil guard (authentication
// off) allows everything at the cost of a nil check.
type guard struct{ g *auth.Guard }

// allow authorizes the caller of ctx to run method on rs: nil, or the
// status of the refusal (refusal).
func (a guard) allow(ctx context.Context, method string, rs ...auth.Resource) error {
	if a.g == nil {
		return nil
	}
	class, ok := methodClasses[method]
	if !ok {
		return status.Errorf(codes.PermissionDenied, "%s has no operation class on this broker: refused to everyone (docs/SECURITY.md, \"Operations and rights\")", method)
	}
	p := auth.FromContext(ctx)
	// What the rules allow the guard allows: the guard, which counts and
	// logs refusals with the caller's address, is asked only otherwise,
	// so that an allowed call allocates nothing.
	if auth.Authorize(p, class, rs...) == nil {
		return nil
	}
	if err := a.g.Authorize(p, class, method, peerAddr(ctx), rs...); err != nil {
		return refusal(err)
	}
	return nil
}

// refusal is the status of an auth error: UNAUTHENTICATED (no, or bad,
// credentials) or PERMISSION_DENIED, with the error's message, which
// names what was refused, and an ErrorInfo marking it definite: nothing
// was done.
func refusal(err error) error {
	code := codes.PermissionDenied
	if errors.Is(err, auth.ErrUnauthenticated) {
		code = codes.Unauthenticated
	}
	st := status.New(code, err.Error())
	if withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonDefinite, Domain: ErrorDomain}); derr == nil {
		st = withInfo
	}
	return st.Err()
}

// on reports whether calls are authorized, so that handlers build the
// resources of a request only then.
func (a guard) on() bool { return a.g != nil }
