// Package grpcauth carries package auth's signatures over gRPC: the
// per-call credentials of a client, and the interceptors of a server
// without a hot path (the nameserver, the controller) that authenticate
// and authorize every call (docs/SECURITY.md). The broker's front end,
// whose Pull answers pre-encoded only without interceptors, checks its
// calls itself (broker/grpcapi).
package grpcauth

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/gantrymq/gantry/auth"
)

// Credentials signs every call of a connection with s's keys, its
// method and the time (grpc.WithPerRPCCredentials).
func Credentials(s *auth.Signer) credentials.PerRPCCredentials { return signedCalls{s} }

type signedCalls struct{ s *auth.Signer }

func (c signedCalls) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	ri, ok := credentials.RequestInfoFromContext(ctx)
	if !ok {
		return nil, errors.New("grpcauth: sign a call: no method in its context")
	}
	date, authz := c.s.SignGRPC(ri.Method, time.Now())
	return map[string]string{auth.MDDate: date, auth.MDAuthorization: authz}, nil
}

// RequireTransportSecurity is false: the keys never travel, so signed
// calls work without TLS too (readable then, not forgeable).
func (signedCalls) RequireTransportSecurity() bool { return false }

// Status is a refusal as a gRPC status: UNAUTHENTICATED for
// auth.ErrUnauthenticated, else PERMISSION_DENIED, with the refusal's
// message, which names what was refused and never a secret.
func Status(err error) error {
	if errors.Is(err, auth.ErrUnauthenticated) {
		return status.Error(codes.Unauthenticated, err.Error())
	}
	return status.Error(codes.PermissionDenied, err.Error())
}

// FirstMD is the first value of key in md, "" if none.
func FirstMD(md metadata.MD, key string) string {
	if v := md[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// PeerAddr is the address of ctx's caller, "" if unknown.
func PeerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// ClassOf returns a method's class, or the status refusing a method
// without one.
type ClassOf func(fullMethod string) (auth.Class, error)

// Authorize checks a call's signature (a present but wrong one is refused
// even for a public method) and its method's class, returning ctx with
// the caller's principal (auth.FromContext).
func Authorize(ctx context.Context, g *auth.Guard, method string, classOf ClassOf) (context.Context, error) {
	class, err := classOf(method)
	if err != nil {
		return nil, err
	}
	from := PeerAddr(ctx)
	md, _ := metadata.FromIncomingContext(ctx)
	p, err := g.GRPC(method, FirstMD(md, auth.MDDate), FirstMD(md, auth.MDAuthorization), from)
	if err == nil {
		err = g.Authorize(p, class, method, from)
	}
	if err != nil {
		return nil, Status(err)
	}
	return auth.NewContext(ctx, p), nil
}

// ServerOptions are the interceptors that Authorize every unary and
// streaming call with g; none when g is nil (authentication off).
func ServerOptions(g *auth.Guard, classOf ClassOf) []grpc.ServerOption {
	if g == nil {
		return nil
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := Authorize(ctx, g, info.FullMethod, classOf)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, err := Authorize(ss.Context(), g, info.FullMethod, classOf)
			if err != nil {
				return err
			}
			return h(srv, principalStream{ss, ctx})
		}),
	}
}

// principalStream is a stream whose context carries its principal.
type principalStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s principalStream) Context() context.Context { return s.ctx }
