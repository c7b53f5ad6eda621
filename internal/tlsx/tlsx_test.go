package tlsx_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gantrymq/gantry/internal/tlsx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseMode(t *testing.T) {
	tests := []struct {
		in   string
		want tlsx.Mode
		ok   bool
	}{
		{"disabled", tlsx.Disabled, true}, {"Permissive", tlsx.Permissive, true}, {" enforcing ", tlsx.Enforcing, true},
		{"", tlsx.Disabled, false}, {"strict", tlsx.Disabled, false},
	}
	for _, tt := range tests {
		m, err := tlsx.ParseMode(tt.in)
		if !tt.ok {
			assert.ErrorContains(t, err, "want disabled, permissive or enforcing", tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, m, tt.in)
		assert.Equal(t, tt.want, must(tlsx.ParseMode(m.String())))
	}
	for _, s := range []string{"none", "optional", "REQUIRE"} {
		a, err := tlsx.ParseClientAuth(s)
		require.NoError(t, err)
		assert.Equal(t, a, must(tlsx.ParseClientAuth(a.String())))
	}
	_, err := tlsx.ParseClientAuth("yes")
	assert.ErrorContains(t, err, "want none, optional or require")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// devCerts writes a CA and its certificates into a new directory.
func devCerts(t *testing.T) tlsx.DevFiles {
	t.Helper()
	f, err := tlsx.WriteDevCerts(t.TempDir(), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	return f
}

func TestServerConfigValidate(t *testing.T) {
	f, other := devCerts(t), devCerts(t)
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("not PEM"), 0o600))
	missing := filepath.Join(dir, "missing.pem")
	encrypted := filepath.Join(dir, "enc-key.pem")
	require.NoError(t, os.WriteFile(encrypted, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY",
		Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-256-CBC,00"}, Bytes: []byte{1}}), 0o600))
	ok := tlsx.ServerConfig{Mode: tlsx.Enforcing, CertFile: f.ServerCert, KeyFile: f.ServerKey}
	tests := []struct {
		name string
		set  func(*tlsx.ServerConfig)
		want []string // each in the error; none: valid
	}{
		{"valid", func(*tlsx.ServerConfig) {}, nil},
		{"disabled ignores the rest", func(c *tlsx.ServerConfig) { c.Mode, c.CertFile = tlsx.Disabled, missing }, nil},
		{"mutual", func(c *tlsx.ServerConfig) { c.ClientAuth, c.ClientCAFile = tlsx.RequireClientAuth, f.CA }, nil},
		{"no certificate", func(c *tlsx.ServerConfig) { c.CertFile = "" }, []string{"tls.server.mode=enforcing needs tls.server.certPath"}},
		{"no key", func(c *tlsx.ServerConfig) { c.KeyFile = "" }, []string{"needs tls.server.keyPath"}},
		{"missing certificate", func(c *tlsx.ServerConfig) { c.CertFile = missing }, []string{"tls.server.certPath " + missing, "no such file"}},
		{"missing key", func(c *tlsx.ServerConfig) { c.KeyFile = missing }, []string{"tls.server.keyPath " + missing, "no such file"}},
		{"not a certificate", func(c *tlsx.ServerConfig) { c.CertFile = junk }, []string{"tls.server.certPath " + junk, "no PEM CERTIFICATE"}},
		{"another key", func(c *tlsx.ServerConfig) { c.KeyFile = other.ServerKey },
			[]string{"tls.server.keyPath " + other.ServerKey, "not the private key of tls.server.certPath " + f.ServerCert}},
		{"encrypted key", func(c *tlsx.ServerConfig) { c.KeyFile = encrypted }, []string{"tls.server.keyPath " + encrypted, "encrypted"}},
		{"client auth without CA", func(c *tlsx.ServerConfig) { c.ClientAuth = tlsx.OptionalClientAuth },
			[]string{"tls.server.need.client.auth=optional needs tls.server.trustCertPath"}},
		{"CA not PEM", func(c *tlsx.ServerConfig) { c.ClientAuth, c.ClientCAFile = tlsx.RequireClientAuth, junk },
			[]string{"tls.server.trustCertPath " + junk, "no PEM certificate"}},
		{"flag names", func(c *tlsx.ServerConfig) {
			c.CertFile, c.Names = "", tlsx.Names{Mode: "--tls-mode", Cert: "--tls-cert", Key: "--tls-key", CA: "--tls-client-ca", ClientAuth: "--tls-client-auth"}
		}, []string{"--tls-mode=enforcing needs --tls-cert"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.set(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			_, nerr := tlsx.NewServer(c)
			assert.Error(t, nerr)
		})
	}
	var fe *tlsx.FileError
	err := tlsx.ServerConfig{Mode: tlsx.Permissive, CertFile: missing, KeyFile: f.ServerKey}.Validate()
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, missing, fe.Path)
	assert.ErrorIs(t, err, tlsx.ErrBadFile)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestClientConfigValidate(t *testing.T) {
	f := devCerts(t)
	assert.NoError(t, tlsx.ClientConfig{}.Validate(), "system roots, no certificate")
	assert.NoError(t, tlsx.ClientConfig{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey}.Validate())
	assert.ErrorContains(t, tlsx.ClientConfig{CertFile: f.ClientCert}.Validate(), "tls.client.certPath is set without tls.client.keyPath")
	assert.ErrorContains(t, tlsx.ClientConfig{KeyFile: f.ClientKey}.Validate(), "tls.client.keyPath is set without tls.client.certPath")
	assert.ErrorContains(t, tlsx.ClientConfig{CAFile: f.ClientKey}.Validate(), "tls.client.trustCertPath "+f.ClientKey)
	assert.ErrorContains(t, tlsx.ClientConfig{CertFile: f.ClientCert, KeyFile: f.ServerKey}.Validate(), "tls.client.keyPath "+f.ServerKey)
}

// tlsServer accepts TLS connections with cfg on loopback: each finishes its
// handshake, reads one line and echoes it. It returns the address.
func tlsServer(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { lis.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				tc := tls.Server(c, cfg)
				if tc.Handshake() != nil {
					return
				}
				b := make([]byte, 5)
				if _, err := io.ReadFull(tc, b); err == nil {
					_, _ = tc.Write(b)
				}
			})
		}
	})
	return lis.Addr().String()
}

// roundTrip dials addr with cl, echoes a message and returns the
// server's leaf certificate.
func roundTrip(t *testing.T, cl *tlsx.Client, addr string) (*x509.Certificate, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := cl.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("hello")); err != nil {
		return nil, err
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, err // TLS 1.3: a refused client certificate shows here
	}
	require.Equal(t, "hello", string(b))
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

func TestClientAuthModes(t *testing.T) {
	f, stranger := devCerts(t), devCerts(t)
	tests := []struct {
		auth                  tlsx.ClientAuth
		none, signed, foreign bool // whether each client gets through
	}{
		{tlsx.NoClientAuth, true, true, true},
		{tlsx.OptionalClientAuth, true, true, false},
		{tlsx.RequireClientAuth, false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.auth.String(), func(t *testing.T) {
			srv, err := tlsx.NewServer(tlsx.ServerConfig{Mode: tlsx.Enforcing, CertFile: f.ServerCert, KeyFile: f.ServerKey,
				ClientCAFile: f.CA, ClientAuth: tt.auth})
			require.NoError(t, err)
			addr := tlsServer(t, srv.Config())
			for _, c := range []struct {
				name       string
				cert, key  string
				getThrough bool
			}{{"no certificate", "", "", tt.none}, {"certificate of the CA", f.ClientCert, f.ClientKey, tt.signed},
				{"certificate of another CA", stranger.ClientCert, stranger.ClientKey, tt.foreign}} {
				cl, err := tlsx.NewClient(tlsx.ClientConfig{CAFile: f.CA, CertFile: c.cert, KeyFile: c.key})
				require.NoError(t, err)
				_, err = roundTrip(t, cl, addr)
				if c.getThrough {
					assert.NoError(t, err, c.name)
				} else {
					assert.Error(t, err, c.name)
				}
			}
		})
	}
}

func TestClientVerifiesServer(t *testing.T) {
	f, stranger := devCerts(t), devCerts(t)
	srv, err := tlsx.NewServer(tlsx.ServerConfig{Mode: tlsx.Permissive, CertFile: f.ServerCert, KeyFile: f.ServerKey})
	require.NoError(t, err)
	addr := tlsServer(t, srv.Config())
	cl, err := tlsx.NewClient(tlsx.ClientConfig{CAFile: stranger.CA})
	require.NoError(t, err)
	_, err = roundTrip(t, cl, addr)
	var uerr x509.UnknownAuthorityError
	assert.ErrorAs(t, err, &uerr, "a server of another CA")
	cl, err = tlsx.NewClient(tlsx.ClientConfig{CAFile: stranger.CA, InsecureSkipVerify: true})
	require.NoError(t, err)
	_, err = roundTrip(t, cl, addr)
	assert.NoError(t, err, "tls.client.authServer=false")
	cl, err = tlsx.NewClient(tlsx.ClientConfig{CAFile: f.CA})
	require.NoError(t, err)
	_, err = roundTrip(t, cl, "localhost:"+portOf(addr))
	assert.NoError(t, err, "by a name the certificate holds")
	raw, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer raw.Close()
	_, err = cl.Handshake(t.Context(), raw, "gantry.example:"+portOf(addr))
	var herr x509.HostnameError
	assert.ErrorAs(t, err, &herr, "by a name it does not hold")
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// copyFiles copies the dev files of from over to's, leaving their paths.
func copyFiles(t *testing.T, from, to tlsx.DevFiles) {
	t.Helper()
	for _, p := range [][2]string{{from.CA, to.CA}, {from.ServerCert, to.ServerCert}, {from.ServerKey, to.ServerKey},
		{from.ClientCert, to.ClientCert}, {from.ClientKey, to.ClientKey}} {
		b, err := os.ReadFile(p[0])
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p[1], b, 0o600))
	}
}

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestServerReloadsChangedFiles(t *testing.T) {
	live, next := devCerts(t), devCerts(t)
	var logs logBuffer
	srv, err := tlsx.NewServer(tlsx.ServerConfig{Mode: tlsx.Enforcing, CertFile: live.ServerCert, KeyFile: live.ServerKey,
		ClientCAFile: live.CA, ClientAuth: tlsx.RequireClientAuth, CheckInterval: time.Nanosecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	addr := tlsServer(t, srv.Config())
	// Clients of each CA, with that CA's client certificate.
	clientOf := func(f tlsx.DevFiles) *tlsx.Client {
		cl, err := tlsx.NewClient(tlsx.ClientConfig{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey})
		require.NoError(t, err)
		return cl
	}
	oldCl := clientOf(devFilesCopy(t, live)) // a copy: live's files change below
	newCl := clientOf(next)
	leaf, err := roundTrip(t, oldCl, addr)
	require.NoError(t, err)
	first := leaf.SerialNumber

	copyFiles(t, next, live) // every file: the certificate, its key and the client CA
	leaf, err = roundTrip(t, newCl, addr)
	require.NoError(t, err, "the new certificate and client CA are used")
	assert.NotEqual(t, first, leaf.SerialNumber)
	_, err = roundTrip(t, oldCl, addr)
	assert.Error(t, err, "a client of the old CA no longer gets through")
	assert.Contains(t, logs.String(), "TLS files reloaded")

	// A broken certificate keeps the last good one, and says which file.
	require.NoError(t, os.WriteFile(live.ServerCert, []byte("-----BEGIN CERTIFICATE-----\ngarbage"), 0o600))
	leaf2, err := roundTrip(t, newCl, addr)
	require.NoError(t, err)
	assert.Equal(t, leaf.SerialNumber, leaf2.SerialNumber)
	assert.Contains(t, logs.String(), "tls.server.certPath "+live.ServerCert)
	// Logged once for the files as they are, not at every handshake.
	_, err = roundTrip(t, newCl, addr)
	require.NoError(t, err)
	assert.Equal(t, 1, bytes.Count([]byte(logs.String()), []byte("do not load")))
}

// devFilesCopy copies f's files into a new directory.
func devFilesCopy(t *testing.T, f tlsx.DevFiles) tlsx.DevFiles {
	t.Helper()
	to, err := tlsx.WriteDevCerts(t.TempDir(), []string{"localhost"})
	require.NoError(t, err)
	copyFiles(t, f, to)
	return to
}

func TestClientReloadsChangedFiles(t *testing.T) {
	a, b := devCerts(t), devCerts(t)
	srvA, err := tlsx.NewServer(tlsx.ServerConfig{Mode: tlsx.Enforcing, CertFile: a.ServerCert, KeyFile: a.ServerKey,
		ClientCAFile: a.CA, ClientAuth: tlsx.RequireClientAuth})
	require.NoError(t, err)
	srvB, err := tlsx.NewServer(tlsx.ServerConfig{Mode: tlsx.Enforcing, CertFile: b.ServerCert, KeyFile: b.ServerKey,
		ClientCAFile: b.CA, ClientAuth: tlsx.RequireClientAuth})
	require.NoError(t, err)
	addrA, addrB := tlsServer(t, srvA.Config()), tlsServer(t, srvB.Config())
	mine := devFilesCopy(t, a)
	cl, err := tlsx.NewClient(tlsx.ClientConfig{CAFile: mine.CA, CertFile: mine.ClientCert, KeyFile: mine.ClientKey, CheckInterval: time.Nanosecond})
	require.NoError(t, err)
	_, err = roundTrip(t, cl, addrA)
	require.NoError(t, err)
	_, err = roundTrip(t, cl, addrB)
	require.Error(t, err)
	copyFiles(t, b, mine)
	_, err = roundTrip(t, cl, addrB)
	require.NoError(t, err, "the new CA and client certificate are used")
	_, err = roundTrip(t, cl, addrA)
	assert.Error(t, err)
}

func TestEnsureDevCerts(t *testing.T) {
	dir := t.TempDir()
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	f, err := tlsx.EnsureDevCerts(dir, hosts)
	require.NoError(t, err)
	ca, err := os.ReadFile(f.CA)
	require.NoError(t, err)
	g, err := tlsx.EnsureDevCerts(dir, hosts)
	require.NoError(t, err)
	assert.Equal(t, f, g)
	ca2, _ := os.ReadFile(g.CA)
	assert.Equal(t, ca, ca2, "a usable set is kept")
	_, err = tlsx.EnsureDevCerts(dir, append(hosts, "gantry.example"))
	require.NoError(t, err)
	ca3, _ := os.ReadFile(g.CA)
	assert.NotEqual(t, ca, ca3, "a set that does not cover the hosts is replaced")
	fi, err := os.Stat(f.ServerKey)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.NoError(t, tlsx.ServerConfig{Mode: tlsx.Enforcing, CertFile: f.ServerCert, KeyFile: f.ServerKey}.Validate())
}
