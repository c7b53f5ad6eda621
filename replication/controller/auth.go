package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
)

// methodClasses is the right each method of the Controller service needs
// with authentication on (docs/SECURITY.md, "Cluster"): the brokers'
// calls and reads of a group's state need a cluster (or admin) user, an
// election on request an admin, the members' metadata nothing. A method
// missing here is refused (a test checks that none is).
var methodClasses = map[string]auth.Class{
	gantryv1.Controller_RegisterBroker_FullMethodName:        auth.ClassCluster,
	gantryv1.Controller_BrokerHeartbeat_FullMethodName:       auth.ClassCluster,
	gantryv1.Controller_AlterSyncStateSet_FullMethodName:     auth.ClassCluster,
	gantryv1.Controller_GetSyncStateSet_FullMethodName:       auth.ClassCluster,
	gantryv1.Controller_GetGroup_FullMethodName:              auth.ClassCluster,
	gantryv1.Controller_ElectMaster_FullMethodName:           auth.ClassAdmin,
	gantryv1.Controller_GetControllerMetadata_FullMethodName: auth.ClassPublic,
}

// MethodClass returns the right a Controller method needs; ok is false
// for a method the service does not classify.
func MethodClass(fullMethod string) (c auth.Class, ok bool) {
	c, ok = methodClasses[fullMethod]
	return c, ok
}

// authOptions are the server options that authenticate and authorize
// every call with g; none when g is nil (authentication off).
func authOptions(g *auth.Guard) []grpc.ServerOption {
	if g == nil {
		return nil
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := authorize(ctx, g, info.FullMethod)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if _, err := authorize(ss.Context(), g, info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// authorize checks a call's signature (a present but wrong one is refused
// even for a public method) and its method's class.
func authorize(ctx context.Context, g *auth.Guard, method string) (context.Context, error) {
	from := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		from = p.Addr.String()
	}
	class, ok := methodClasses[method]
	if !ok {
		return nil, status.Errorf(codes.PermissionDenied, "controller: %s has no access class: refused", method)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	p, err := g.GRPC(method, mdValue(md, auth.MDDate), mdValue(md, auth.MDAuthorization), from)
	if err == nil {
		err = g.Authorize(p, class, method, from)
	}
	if err != nil {
		return nil, authStatus(err)
	}
	return auth.NewContext(ctx, p), nil
}

func mdValue(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// authStatus is a refusal as a gRPC status: Unauthenticated or
// PermissionDenied, with the refusal's message.
func authStatus(err error) error {
	if errors.Is(err, auth.ErrDenied) {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return status.Error(codes.Unauthenticated, err.Error())
}

// signedCalls signs each call of a client with a user's keys
// (credentials.PerRPCCredentials; docs/SECURITY.md, "gRPC").
type signedCalls struct{ s *auth.Signer }

func (c signedCalls) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	ri, ok := credentials.RequestInfoFromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("controller: client: sign a call: no method in its context")
	}
	date, authz := c.s.SignGRPC(ri.Method, time.Now())
	return map[string]string{auth.MDDate: date, auth.MDAuthorization: authz}, nil
}

// RequireTransportSecurity is false: the keys never travel, so signed
// calls work without TLS (readable then, not forgeable).
func (signedCalls) RequireTransportSecurity() bool { return false }
