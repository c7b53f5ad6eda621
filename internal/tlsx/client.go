package tlsx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc/credentials"
)

// ClientConfig is the dialing side of TLS: what verifies the servers and
// the certificate shown to them.
type ClientConfig struct {
	// CAFile is the PEM bundle of CAs a server's certificate must chain
	// to. Default: the system's roots.
	CAFile string
	// CertFile and KeyFile, both or neither, are the certificate and key
	// shown to a server that asks for one (mutual TLS). Default none.
	CertFile, KeyFile string
	// InsecureSkipVerify accepts any server certificate
	// (tls.client.authServer=false): encryption without knowing who
	// answers. For tests and trials only.
	InsecureSkipVerify bool
	// Names name the settings in errors. Default ClientKeys.
	Names Names
	// CheckInterval bounds how often a dial looks at the files. Default
	// DefaultCheckInterval.
	CheckInterval time.Duration
	// Logger receives reloads and files that failed to reload. Default:
	// discard.
	Logger *slog.Logger
}

func (c ClientConfig) withDefaults() ClientConfig {
	if c.Names == (Names{}) {
		c.Names = ClientKeys
	}
	if c.CheckInterval <= 0 {
		c.CheckInterval = DefaultCheckInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem of c, reading its files.
func (c ClientConfig) Validate() error {
	c = c.withDefaults()
	n := c.Names
	switch {
	case c.CertFile != "" && c.KeyFile == "":
		return fmt.Errorf("%s is set without %s: a client certificate needs its key", n.Cert, n.Key)
	case c.KeyFile != "" && c.CertFile == "":
		return fmt.Errorf("%s is set without %s: a client key needs its certificate", n.Key, n.Cert)
	}
	_, err := c.load()
	return err
}

// clientMaterial is what the files hold: nil fields for files not set.
type clientMaterial struct {
	cert  *tls.Certificate
	roots *x509.CertPool
}

func (c ClientConfig) load() (*clientMaterial, error) {
	n := c.Names
	var (
		m    clientMaterial
		errs []error
	)
	if c.CertFile != "" {
		pair, err := loadKeyPair(n.Cert, c.CertFile, n.Key, c.KeyFile)
		m.cert = &pair
		errs = append(errs, err)
	}
	if c.CAFile != "" {
		var err error
		m.roots, err = loadCAs(n.CA, c.CAFile)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &m, nil
}

func (c ClientConfig) paths() []string {
	var ps []string
	for _, p := range []string{c.CertFile, c.KeyFile, c.CAFile} {
		if p != "" {
			ps = append(ps, p)
		}
	}
	return ps
}

// Client is the dialing side of TLS with its files loaded.
type Client struct {
	cfg      ClientConfig
	mat      *watched[clientMaterial]
	sessions tls.ClientSessionCache
}

// NewClient loads cfg's files.
func NewClient(cfg ClientConfig) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mat, err := newWatched("client certificate and CAs", cfg.paths(), cfg.CheckInterval, cfg.Logger, cfg.load)
	if err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, mat: mat, sessions: tls.NewLRUClientSessionCache(64)}, nil
}

// Config returns a tls.Config for one connection to serverName (a host
// name or IP address the server's certificate must name), with the
// current CAs and certificate (a changed file is loaded first).
func (c *Client) Config(serverName string) *tls.Config {
	m := c.mat.get()
	conf := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         serverName,
		RootCAs:            m.roots,
		InsecureSkipVerify: c.cfg.InsecureSkipVerify, //nolint:gosec // tls.client.authServer=false, documented as for trials
		ClientSessionCache: c.sessions,
	}
	if m.cert != nil {
		conf.Certificates = []tls.Certificate{*m.cert}
	}
	return conf
}

// Dial connects to addr (host:port) and runs the TLS handshake; ctx bounds
// both.
func (c *Client) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	conn, err := c.Handshake(ctx, raw, addr)
	if err != nil {
		raw.Close()
		return nil, err
	}
	return conn, nil
}

// Handshake runs the client's TLS handshake on conn, a connection to addr
// (host:port); ctx bounds it.
func (c *Client) Handshake(ctx context.Context, conn net.Conn, addr string) (*tls.Conn, error) {
	tc := tls.Client(conn, c.Config(hostOf(addr)))
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("tlsx: TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// hostOf is addr's host, or addr when it has no port.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// Credentials returns gRPC transport credentials that dial with the
// client's current CAs and certificate.
func (c *Client) Credentials() credentials.TransportCredentials { return clientCreds{c} }

// clientCreds are a Client as gRPC credentials: each handshake builds
// gRPC's own TLS credentials from the current Config.
type clientCreds struct{ c *Client }

func (g clientCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(g.c.Config(hostOf(authority))).ClientHandshake(ctx, authority, raw)
}

func (clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlsx: client credentials cannot serve")
}

func (clientCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.2"}
}

func (g clientCreds) Clone() credentials.TransportCredentials { return g }

func (clientCreds) OverrideServerName(string) error { return nil }

// StaticConfig returns a tls.Config of cfg's files as they are now, for a
// client that takes a fixed tls.Config (Gantry's client.Config.TLS, whose
// gRPC credentials fill in each connection's server name): its
// certificates are not reloaded.
func StaticConfig(cfg ClientConfig) (*tls.Config, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := cfg.load()
	if err != nil {
		return nil, err
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: m.roots, InsecureSkipVerify: cfg.InsecureSkipVerify} //nolint:gosec // asked for
	if m.cert != nil {
		conf.Certificates = []tls.Certificate{*m.cert}
	}
	return conf, nil
}
