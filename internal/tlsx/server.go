package tlsx

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// DefaultCheckInterval is how often, at most, a handshake looks whether
// the certificate, key and CA files changed.
const DefaultCheckInterval = time.Second

// Names are the names of the settings, used in error messages: broker.conf
// keys (ServerKeys, ClientKeys) or command-line flags.
type Names struct {
	Mode, Cert, Key, CA, ClientAuth string
}

// ServerKeys and ClientKeys are RocketMQ's names of the settings, as
// broker.conf spells them.
var (
	ServerKeys = Names{Mode: "tls.server.mode", Cert: "tls.server.certPath", Key: "tls.server.keyPath",
		CA: "tls.server.trustCertPath", ClientAuth: "tls.server.need.client.auth"}
	ClientKeys = Names{Mode: "tls.enable", Cert: "tls.client.certPath", Key: "tls.client.keyPath",
		CA: "tls.client.trustCertPath", ClientAuth: "tls.client.authServer"}
)

// ServerConfig is the server side of a port's TLS.
type ServerConfig struct {
	// Mode: Disabled (default), Permissive or Enforcing. NewServer needs
	// one of the last two.
	Mode Mode
	// CertFile and KeyFile are the server's certificate chain (leaf first)
	// and private key, PEM. Required unless Disabled.
	CertFile, KeyFile string
	// ClientCAFile is the PEM bundle of CAs a client certificate must
	// chain to; required when ClientAuth asks for certificates.
	ClientCAFile string
	// ClientAuth: NoClientAuth (default), OptionalClientAuth or
	// RequireClientAuth (mutual TLS).
	ClientAuth ClientAuth
	// Names name the settings in errors. Default ServerKeys.
	Names Names
	// CheckInterval bounds how often a handshake looks at the files.
	// Default DefaultCheckInterval.
	CheckInterval time.Duration
	// Logger receives reloads and files that failed to reload. Default:
	// discard.
	Logger *slog.Logger
}

func (c ServerConfig) withDefaults() ServerConfig {
	if c.Names == (Names{}) {
		c.Names = ServerKeys
	}
	if c.CheckInterval <= 0 {
		c.CheckInterval = DefaultCheckInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem of c: a setting missing for the mode, a
// file that is missing, unreadable or does not hold what it should, a
// key that does not match its certificate. It reads the files. A
// Disabled config is valid whatever the other fields say.
func (c ServerConfig) Validate() error {
	c = c.withDefaults()
	n := c.Names
	var errs []error
	switch {
	case c.Mode > Enforcing:
		return fmt.Errorf("%s %d: want disabled, permissive or enforcing", n.Mode, c.Mode)
	case c.Mode == Disabled:
		return nil
	}
	if c.CertFile == "" {
		errs = append(errs, fmt.Errorf("%s=%s needs %s (the server's certificate, PEM)", n.Mode, c.Mode, n.Cert))
	}
	if c.KeyFile == "" {
		errs = append(errs, fmt.Errorf("%s=%s needs %s (the server's private key, PEM)", n.Mode, c.Mode, n.Key))
	}
	switch {
	case c.ClientAuth > RequireClientAuth:
		errs = append(errs, fmt.Errorf("%s %d: want none, optional or require", n.ClientAuth, c.ClientAuth))
	case c.ClientAuth != NoClientAuth && c.ClientCAFile == "":
		errs = append(errs, fmt.Errorf("%s=%s needs %s (the CA bundle client certificates must chain to)", n.ClientAuth, c.ClientAuth, n.CA))
	}
	if len(errs) == 0 {
		_, err := c.load()
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// load reads the files into a server tls.Config.
func (c ServerConfig) load() (*tls.Config, error) {
	n := c.Names
	var errs []error
	pair, err := loadKeyPair(n.Cert, c.CertFile, n.Key, c.KeyFile)
	errs = append(errs, err)
	var cas *x509.CertPool
	if c.ClientCAFile != "" {
		cas, err = loadCAs(n.CA, c.ClientCAFile)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	auth := tls.NoClientCert
	switch c.ClientAuth {
	case OptionalClientAuth:
		auth = tls.VerifyClientCertIfGiven
	case RequireClientAuth:
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		ClientCAs:    cas,
		ClientAuth:   auth,
		NextProtos:   []string{"h2", "http/1.1"},
	}, nil
}

// paths are the files c reads.
func (c ServerConfig) paths() []string {
	ps := []string{c.CertFile, c.KeyFile}
	if c.ClientCAFile != "" {
		ps = append(ps, c.ClientCAFile)
	}
	return ps
}

// Server is the server side of TLS with its files loaded.
type Server struct {
	cfg  ServerConfig
	mat  *watched[tls.Config]
	base *tls.Config
}

// NewServer loads cfg's files. Its mode must be Permissive or Enforcing.
func NewServer(cfg ServerConfig) (*Server, error) {
	cfg = cfg.withDefaults()
	if cfg.Mode == Disabled {
		return nil, fmt.Errorf("tlsx: %s=disabled: no TLS to serve", cfg.Names.Mode)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mat, err := newWatched("server certificate "+cfg.CertFile, cfg.paths(), cfg.CheckInterval, cfg.Logger, cfg.load)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, mat: mat}
	s.base = &tls.Config{
		MinVersion:         tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.mat.get(), nil },
	}
	return s, nil
}

// Config returns the tls.Config to serve with: each handshake takes the
// current certificate and CAs (a changed file is loaded first). Callers
// may clone it but must keep its GetConfigForClient.
func (s *Server) Config() *tls.Config { return s.base }

// Mode is the server's mode, Permissive or Enforcing.
func (s *Server) Mode() Mode { return s.cfg.Mode }

// Required reports whether plaintext clients are refused (Enforcing).
func (s *Server) Required() bool { return s.cfg.Mode == Enforcing }
