package broker

import (
	"errors"
	"log/slog"

	"github.com/gantrymq/gantry/internal/tlsx"
)

// TLSMode is tls.server.mode: TLSDisabled, TLSPermissive or TLSEnforcing.
type TLSMode = tlsx.Mode

// The values of tls.server.mode.
const (
	TLSDisabled   = tlsx.Disabled   // plaintext only (default)
	TLSPermissive = tlsx.Permissive // TLS and plaintext on every port
	TLSEnforcing  = tlsx.Enforcing  // TLS only
)

// TLSClientAuth is tls.server.need.client.auth.
type TLSClientAuth = tlsx.ClientAuth

// The values of tls.server.need.client.auth.
const (
	TLSClientAuthNone     = tlsx.NoClientAuth       // no client certificate asked for (default)
	TLSClientAuthOptional = tlsx.OptionalClientAuth // verified when sent
	TLSClientAuthRequire  = tlsx.RequireClientAuth  // mutual TLS
)

// TLSConfig holds the TLS keys (docs/SECURITY.md, "TLS"), RocketMQ's
// names: how the broker's ports serve TLS (tls.server.*) and whether its
// own connections dial it (tls.enable, tls.client.*). Certificate, key
// and CA files changed on disk are used from the next handshake on.
type TLSConfig struct {
	// TLSServerMode (tls.server.mode): disabled (default), permissive (TLS
	// and plaintext on every port: gRPC, remoting, HTTP and HA) or
	// enforcing (TLS only; a plaintext client is told so in its protocol).
	TLSServerMode TLSMode
	// TLSServerCertPath (tls.server.certPath) and TLSServerKeyPath
	// (tls.server.keyPath): the ports' certificate chain and private key,
	// PEM; required unless the mode is disabled.
	TLSServerCertPath, TLSServerKeyPath string
	// TLSServerTrustCertPath (tls.server.trustCertPath): the PEM bundle of
	// CAs client certificates must chain to.
	TLSServerTrustCertPath string
	// TLSServerNeedClientAuth (tls.server.need.client.auth): none
	// (default), optional (verified when sent) or require (mutual TLS).
	TLSServerNeedClientAuth TLSClientAuth
	// TLSEnable (tls.enable): the broker dials TLS to the nameservers, the
	// controllers and, as a slave, its master's HA port. Default false.
	TLSEnable bool
	// TLSClientCertPath (tls.client.certPath) and TLSClientKeyPath
	// (tls.client.keyPath): the certificate the broker shows when it
	// dials, for servers that require one. Default none.
	TLSClientCertPath, TLSClientKeyPath string
	// TLSClientTrustCertPath (tls.client.trustCertPath): the PEM bundle of
	// CAs the servers' certificates must chain to. Default the system's.
	TLSClientTrustCertPath string
	// TLSClientSkipVerify is tls.client.authServer=false: any server
	// certificate is accepted. For trials only; default false
	// (authServer=true).
	TLSClientSkipVerify bool
}

// The TLS keys.
func init() {
	ConfigKeys = append(ConfigKeys, "tls.server.mode", "tls.server.certPath", "tls.server.keyPath",
		"tls.server.trustCertPath", "tls.server.need.client.auth", "tls.enable", "tls.client.certPath",
		"tls.client.keyPath", "tls.client.trustCertPath", "tls.client.authServer")
	for k, f := range map[string]func(c *Config, v string) error{
		"tls.server.mode": func(c *Config, v string) (err error) {
			if c.TLSServerMode, err = tlsx.ParseMode(v); err != nil {
				return errors.New("want disabled, permissive or enforcing")
			}
			return nil
		},
		"tls.server.certPath":      func(c *Config, v string) error { c.TLSServerCertPath = v; return nil },
		"tls.server.keyPath":       func(c *Config, v string) error { c.TLSServerKeyPath = v; return nil },
		"tls.server.trustCertPath": func(c *Config, v string) error { c.TLSServerTrustCertPath = v; return nil },
		"tls.server.need.client.auth": func(c *Config, v string) (err error) {
			if c.TLSServerNeedClientAuth, err = tlsx.ParseClientAuth(v); err != nil {
				return errors.New("want none, optional or require")
			}
			return nil
		},
		"tls.enable":               func(c *Config, v string) error { return parseBool(v, &c.TLSEnable) },
		"tls.client.certPath":      func(c *Config, v string) error { c.TLSClientCertPath = v; return nil },
		"tls.client.keyPath":       func(c *Config, v string) error { c.TLSClientKeyPath = v; return nil },
		"tls.client.trustCertPath": func(c *Config, v string) error { c.TLSClientTrustCertPath = v; return nil },
		"tls.client.authServer": func(c *Config, v string) error {
			var verify bool
			err := parseBool(v, &verify)
			c.TLSClientSkipVerify = !verify
			return err
		},
	} {
		setters[k] = f
	}
}

// validateTLS checks the keys, and that the files they name load.
func (c TLSConfig) validateTLS(bad badFunc) {
	if err := c.serverTLS(nil).Validate(); err != nil {
		bad("%v", err)
	}
	if c.TLSEnable {
		if err := c.clientTLS(nil).Validate(); err != nil {
			bad("%v", err)
		}
	}
}

func (c TLSConfig) serverTLS(log *slog.Logger) tlsx.ServerConfig {
	return tlsx.ServerConfig{Mode: c.TLSServerMode, CertFile: c.TLSServerCertPath, KeyFile: c.TLSServerKeyPath,
		ClientCAFile: c.TLSServerTrustCertPath, ClientAuth: c.TLSServerNeedClientAuth, Logger: log}
}

func (c TLSConfig) clientTLS(log *slog.Logger) tlsx.ClientConfig {
	return tlsx.ClientConfig{CAFile: c.TLSClientTrustCertPath, CertFile: c.TLSClientCertPath, KeyFile: c.TLSClientKeyPath,
		InsecureSkipVerify: c.TLSClientSkipVerify, Logger: log}
}

// ServerTLS loads the ports' TLS (broker/server serves with it); nil
// with tls.server.mode=disabled.
func (c TLSConfig) ServerTLS(log *slog.Logger) (*tlsx.Server, error) {
	if c.TLSServerMode == TLSDisabled {
		return nil, nil
	}
	return tlsx.NewServer(c.serverTLS(tlsLogger(log)))
}

// ClientTLS loads the TLS the broker dials with; nil without tls.enable.
func (c TLSConfig) ClientTLS(log *slog.Logger) (*tlsx.Client, error) {
	if !c.TLSEnable {
		return nil, nil
	}
	return tlsx.NewClient(c.clientTLS(tlsLogger(log)))
}

func tlsLogger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return nil
	}
	return log.With("component", "tls")
}
