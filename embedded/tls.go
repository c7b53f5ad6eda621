package embedded

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/internal/tlsx"
	"github.com/gantrymq/gantry/replication/controller"
)

// TLSOptions serve every listener of the cluster with TLS (docs/SECURITY.md,
// "TLS"): the nameserver's, the brokers' (gRPC, remoting, HTTP, HA) and
// the controller's (gRPC, raft); the brokers and the controller dial with
// TLS too. DevTLS makes a set for tests and development.
type TLSOptions struct {
	// CertFile and KeyFile are every server's certificate and key, PEM;
	// the certificate must name the listen hosts (127.0.0.1). Required.
	CertFile, KeyFile string
	// CAFile is the PEM bundle of the CA that signed the certificates:
	// the servers verify client certificates with it, and the brokers and
	// the controller the servers they dial. Required.
	CAFile string
	// ClientCertFile and ClientKeyFile are the certificate the brokers
	// and the controller show when they dial. Default CertFile and
	// KeyFile (a certificate allowing client authentication too).
	ClientCertFile, ClientKeyFile string
	// Permissive serves plaintext clients too (tls.server.mode
	// permissive). Default false: enforcing.
	Permissive bool
	// ClientAuth is whether the servers ask clients for a certificate
	// (tls.server.need.client.auth). Default none.
	ClientAuth broker.TLSClientAuth
}

// clusterTLS is the loaded TLS of a cluster: its servers' side and its
// own dials'.
type clusterTLS struct {
	opts   TLSOptions
	server *tlsx.Server
	dial   *tlsx.Client
}

func (o TLSOptions) mode() broker.TLSMode {
	if o.Permissive {
		return broker.TLSPermissive
	}
	return broker.TLSEnforcing
}

func (o TLSOptions) clientCert() (cert, key string) {
	if o.ClientCertFile == "" && o.ClientKeyFile == "" {
		return o.CertFile, o.KeyFile
	}
	return o.ClientCertFile, o.ClientKeyFile
}

// load checks o and loads its files.
func (o TLSOptions) load() (*clusterTLS, error) {
	if o.CAFile == "" {
		return nil, errors.New("embedded: Options.TLS.CAFile is required")
	}
	srv, err := tlsx.NewServer(tlsx.ServerConfig{Mode: o.mode(), CertFile: o.CertFile, KeyFile: o.KeyFile, ClientCAFile: o.CAFile,
		ClientAuth: o.ClientAuth, Names: tlsx.Names{Mode: "Options.TLS", Cert: "Options.TLS.CertFile", Key: "Options.TLS.KeyFile",
			CA: "Options.TLS.CAFile", ClientAuth: "Options.TLS.ClientAuth"}})
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	cert, key := o.clientCert()
	dial, err := tlsx.NewClient(tlsx.ClientConfig{CAFile: o.CAFile, CertFile: cert, KeyFile: key,
		Names: tlsx.Names{Cert: "Options.TLS.ClientCertFile", Key: "Options.TLS.ClientKeyFile", CA: "Options.TLS.CAFile"}})
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	return &clusterTLS{opts: o, server: srv, dial: dial}, nil
}

// broker sets a broker's TLS keys.
func (t *clusterTLS) broker(bc *broker.Config) {
	cert, key := t.opts.clientCert()
	bc.TLSConfig = broker.TLSConfig{
		TLSServerMode: t.opts.mode(), TLSServerCertPath: t.opts.CertFile, TLSServerKeyPath: t.opts.KeyFile,
		TLSServerTrustCertPath: t.opts.CAFile, TLSServerNeedClientAuth: t.opts.ClientAuth,
		TLSEnable: true, TLSClientTrustCertPath: t.opts.CAFile, TLSClientCertPath: cert, TLSClientKeyPath: key,
	}
}

// controller sets the controller's TLS.
func (t *clusterTLS) controller(cc *controller.Config) {
	cc.TLS, cc.RequireTLS, cc.RaftDial = t.server.Config(), t.server.Required(), t.dial.Dial
}

// DevCerts are the files DevTLS writes: a throw-away CA, a server
// certificate it signed for localhost, 127.0.0.1, ::1 and the host name
// (allowing client authentication too), and a client certificate it
// signed, each with its key.
type DevCerts struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// DevTLS writes development certificates into dir (created if need be),
// or keeps those already there while they serve (valid for another day,
// covering the hosts). For tests and `gantry dev --tls`: the CA's key is
// not kept and the certificates are valid for 90 days.
func DevTLS(dir string) (DevCerts, error) {
	f, err := tlsx.EnsureDevCerts(dir, tlsx.DevHosts())
	if err != nil {
		return DevCerts{}, fmt.Errorf("embedded: %w", err)
	}
	return DevCerts(f), nil
}

// Options returns the TLSOptions serving d, enforcing, the servers'
// certificate shown by the brokers and the controller when they dial.
func (d DevCerts) Options() *TLSOptions {
	return &TLSOptions{CertFile: d.ServerCert, KeyFile: d.ServerKey, CAFile: d.CA}
}

// ClientTLS returns a tls.Config for Gantry's client (client.Config.TLS)
// that trusts d's CA and, with withCert, shows d's client certificate.
func (d DevCerts) ClientTLS(withCert bool) (*tls.Config, error) {
	cfg := tlsx.ClientConfig{CAFile: d.CA}
	if withCert {
		cfg.CertFile, cfg.KeyFile = d.ClientCert, d.ClientKey
	}
	return tlsx.StaticConfig(cfg)
}
