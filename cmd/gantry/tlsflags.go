package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/internal/tlsx"
)

// serverTLSFlags are the TLS flags of the server commands (namesrv,
// controller, broker; docs/SECURITY.md, "TLS"): how their ports serve TLS,
// and how they dial with TLS (the controller its raft peers, the broker
// its nameservers, controllers and master).
type serverTLSFlags struct {
	mode, cert, key, clientCA, clientAuth string
	ca, clientCert, clientKey             string
	dial                                  bool // the broker's --tls
	changed                               func(name string) bool
}

var (
	serverFlagNames = tlsx.Names{Mode: "--tls-mode", Cert: "--tls-cert", Key: "--tls-key", CA: "--tls-client-ca", ClientAuth: "--tls-client-auth"}
	dialFlagNames   = tlsx.Names{Mode: "--tls", Cert: "--tls-client-cert", Key: "--tls-client-key", CA: "--tls-ca"}
)

// register adds the flags; dials says what the server dials with TLS (for
// the help of --tls-ca and --tls-client-cert).
func (f *serverTLSFlags) register(fs *pflag.FlagSet, dials string) {
	fs.StringVar(&f.mode, "tls-mode", "disabled", "TLS on every port: disabled, permissive (TLS and plaintext) or enforcing (TLS only) (tls.server.mode)")
	fs.StringVar(&f.cert, "tls-cert", "", "the ports' certificate chain, PEM (tls.server.certPath); reloaded when it changes")
	fs.StringVar(&f.key, "tls-key", "", "the ports' private key, PEM (tls.server.keyPath); reloaded when it changes")
	fs.StringVar(&f.clientCA, "tls-client-ca", "", "CA bundle, PEM, that client certificates must chain to (tls.server.trustCertPath)")
	fs.StringVar(&f.clientAuth, "tls-client-auth", "none", "ask clients for a certificate: none, optional or require (tls.server.need.client.auth)")
	fs.StringVar(&f.ca, "tls-ca", "", "CA bundle, PEM, that the servers "+dials+" must chain to (tls.client.trustCertPath; default the system's)")
	fs.StringVar(&f.clientCert, "tls-client-cert", "", "certificate, PEM, shown when it dials "+dials+" (tls.client.certPath)")
	fs.StringVar(&f.clientKey, "tls-client-key", "", "key of --tls-client-cert, PEM (tls.client.keyPath)")
	f.changed = fs.Changed
}

// server returns the server side of the flags, nil with --tls-mode
// disabled.
func (f *serverTLSFlags) server(log *slog.Logger) (*tlsx.Server, error) {
	mode, auth, err := f.parse()
	if err != nil || mode == tlsx.Disabled {
		return nil, err
	}
	return tlsx.NewServer(tlsx.ServerConfig{Mode: mode, CertFile: f.cert, KeyFile: f.key, ClientCAFile: f.clientCA, ClientAuth: auth,
		Names: serverFlagNames, Logger: log})
}

func (f *serverTLSFlags) parse() (tlsx.Mode, tlsx.ClientAuth, error) {
	mode, err := tlsx.ParseMode(f.mode)
	if err != nil {
		return 0, 0, fmt.Errorf("--tls-mode %q: want disabled, permissive or enforcing", f.mode)
	}
	auth, err := tlsx.ParseClientAuth(f.clientAuth)
	if err != nil {
		return 0, 0, fmt.Errorf("--tls-client-auth %q: want none, optional or require", f.clientAuth)
	}
	return mode, auth, nil
}

// peerDialer returns what a controller member dials its raft peers with
// when its ports serve TLS: --tls-ca, and --tls-client-cert (default
// --tls-cert, which must then allow client authentication).
func (f *serverTLSFlags) peerDialer(log *slog.Logger) (*tlsx.Client, error) {
	cert, key := f.clientCert, f.clientKey
	if cert == "" && key == "" {
		cert, key = f.cert, f.key
	}
	return tlsx.NewClient(tlsx.ClientConfig{CAFile: f.ca, CertFile: cert, KeyFile: key, Names: dialFlagNames, Logger: log})
}

// applyBroker sets the broker.conf keys of the flags given.
func (f *serverTLSFlags) applyBroker(c *broker.Config) error {
	mode, auth, err := f.parse()
	if err != nil {
		return err
	}
	for _, s := range []struct {
		flag string
		set  func()
	}{
		{"tls-mode", func() { c.TLSServerMode = mode }},
		{"tls-cert", func() { c.TLSServerCertPath = f.cert }},
		{"tls-key", func() { c.TLSServerKeyPath = f.key }},
		{"tls-client-ca", func() { c.TLSServerTrustCertPath = f.clientCA }},
		{"tls-client-auth", func() { c.TLSServerNeedClientAuth = auth }},
		{"tls", func() { c.TLSEnable = f.dial }},
		{"tls-ca", func() { c.TLSClientTrustCertPath = f.ca }},
		{"tls-client-cert", func() { c.TLSClientCertPath = f.clientCert }},
		{"tls-client-key", func() { c.TLSClientKeyPath = f.clientKey }},
	} {
		if f.changed(s.flag) {
			s.set()
		}
	}
	return nil
}

// clientTLSFlags are the TLS flags of the client commands (admin, bench).
type clientTLSFlags struct {
	on, insecure  bool
	ca, cert, key string
}

func (f *clientTLSFlags) register(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.BoolVar(&f.on, "tls", false, "connect with TLS (implied by the other --tls-* flags)")
	pf.StringVar(&f.ca, "tls-ca", "", "CA bundle, PEM, that the servers' certificates must chain to (default the system's)")
	pf.StringVar(&f.cert, "tls-cert", "", "client certificate, PEM, for servers that require one (mutual TLS)")
	pf.StringVar(&f.key, "tls-key", "", "key of --tls-cert, PEM")
	pf.BoolVar(&f.insecure, "tls-insecure-skip-verify", false, "accept any server certificate (encryption without knowing who answers: trials only)")
}

// config returns the tls.Config of the flags, nil without TLS.
func (f *clientTLSFlags) config() (*tls.Config, error) {
	if !f.on && f.ca == "" && f.cert == "" && f.key == "" && !f.insecure {
		return nil, nil
	}
	return tlsx.StaticConfig(tlsx.ClientConfig{CAFile: f.ca, CertFile: f.cert, KeyFile: f.key, InsecureSkipVerify: f.insecure,
		Names: tlsx.Names{Mode: "--tls", Cert: "--tls-cert", Key: "--tls-key", CA: "--tls-ca"}})
}

// clientConfig is a client's configuration for the nameservers ns, with
// the TLS of the flags; a bad flag is a usage error.
func (f *clientTLSFlags) clientConfig(ns []string) (client.Config, error) {
	conf, err := f.config()
	if err != nil {
		return client.Config{}, &exitError{code: exitUsage, err: err}
	}
	return client.Config{NameServers: ns, TLS: conf}, nil
}
