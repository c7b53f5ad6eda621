package tlsx

import (
	"context"
	"crypto/tls"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// TerminatedCredentials are gRPC server credentials for the connections of
// a port that terminates TLS itself (internal/muxlisten): they run no
// handshake, and report a connection that came over TLS as such
// (credentials.TLSInfo, with the client's verified certificates) and any
// other as without security. A connection came over TLS when it has a
// ConnectionState method, as muxlisten's do.
func TerminatedCredentials() credentials.TransportCredentials { return terminated{} }

type terminated struct{}

// stater is a connection that came over TLS.
type stater interface{ ConnectionState() tls.ConnectionState }

func (terminated) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if s, ok := c.(stater); ok {
		return c, credentials.TLSInfo{State: s.ConnectionState(),
			CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
	}
	return c, plainInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
}

func (terminated) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlsx: server credentials cannot dial")
}

func (terminated) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (t terminated) Clone() credentials.TransportCredentials { return t }

func (terminated) OverrideServerName(string) error { return nil }

// plainInfo is the AuthInfo of a plaintext connection.
type plainInfo struct{ credentials.CommonAuthInfo }

func (plainInfo) AuthType() string { return "insecure" }
