package client

import (
	"fmt"

	"google.golang.org/grpc"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/auth/grpcauth"
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
	return grpc.WithPerRPCCredentials(grpcauth.Credentials(s)), nil
}
