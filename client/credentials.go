package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/gantrymq/gantry/auth"
)

// Credentials are a user's keys on brokers and nameservers with
// authentication on (docs/SECURITY.md): the client signs every call with
// them, with the call's method and time, so that a captured call is
// refused once its window (a minute by default) has passed. Use them over
// TLS: the signature proves the keys, it does not hide the call.
type Credentials struct {
	AccessKey string
	SecretKey string
}

func (c Credentials) set() bool { return c.AccessKey != "" || c.SecretKey != "" }

// dialOption returns the option signing every call with c, nil without
// keys.
func (c Credentials) dialOption() (grpc.DialOption, error) {
	if !c.set() {
		return nil, nil
	}
	s, err := auth.NewSigner(c.AccessKey, c.SecretKey)
	if err != nil {
		return nil, fmt.Errorf("client: Config.Credentials: %w: %w", ErrInvalidArgument, err)
	}
	return grpc.WithPerRPCCredentials(rpcCredentials{s}), nil
}

// rpcCredentials signs each call (credentials.PerRPCCredentials).
type rpcCredentials struct{ s *auth.Signer }

func (r rpcCredentials) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	ri, ok := credentials.RequestInfoFromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("client: sign a call: no method in its context")
	}
	date, authz := r.s.SignGRPC(ri.Method, time.Now())
	return map[string]string{auth.MDDate: date, auth.MDAuthorization: authz}, nil
}

// RequireTransportSecurity is false: the keys never travel, so signed
// calls work without TLS too (they are then readable, not forgeable).
func (rpcCredentials) RequireTransportSecurity() bool { return false }
