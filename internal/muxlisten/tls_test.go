package muxlisten_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/muxlisten"
	"github.com/gantrymq/gantry/internal/tlsx"
)

// tlsSetup is a CA's server config and a client config trusting it.
type tlsSetup struct {
	files  tlsx.DevFiles
	server *tlsx.Server
	client *tls.Config
}

func newTLS(t *testing.T, auth tlsx.ClientAuth) tlsSetup {
	t.Helper()
	f, err := tlsx.WriteDevCerts(t.TempDir(), []string{"127.0.0.1"})
	require.NoError(t, err)
	srv, err := tlsx.NewServer(tlsx.ServerConfig{Mode: tlsx.Enforcing, CertFile: f.ServerCert, KeyFile: f.ServerKey,
		ClientCAFile: f.CA, ClientAuth: auth})
	require.NoError(t, err)
	caPEM, err := os.ReadFile(f.CA)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	return tlsSetup{files: f, server: srv, client: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}}
}

// dialTLS connects with TLS, offering protos by ALPN.
func dialTLS(t *testing.T, addr net.Addr, conf *tls.Config, protos ...string) *tls.Conn {
	t.Helper()
	conf = conf.Clone()
	conf.NextProtos = protos
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr.String(), conf)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// tlsState is what a delivered connection says of its TLS, if it came
// over TLS.
func tlsState(c net.Conn) (tls.ConnectionState, bool) {
	s, ok := c.(interface{ ConnectionState() tls.ConnectionState })
	if !ok {
		return tls.ConnectionState{}, false
	}
	return s.ConnectionState(), true
}

// Over TLS, each protocol goes to its listener as in plaintext, with every
// byte sent inside TLS, both ways; a gRPC client gets h2 by ALPN.
func TestTLSRoutesByInnerBytes(t *testing.T) {
	ts := newTLS(t, tlsx.NoClientAuth)
	var wrapped atomic.Int64
	m, h2, rem := startMux(t, muxlisten.Config{TLS: ts.server.Config(),
		WrapTLS: func(c net.Conn) net.Conn { wrapped.Add(1); return c }})
	h1 := m.Listener(muxlisten.HTTP1)
	tests := []struct {
		name   string
		first  []byte
		protos []string
		lis    net.Listener
		alpn   string
	}{
		{"gRPC", []byte(h2Preface), []string{"h2"}, h2, "h2"},
		{"remoting", remotingFrame, nil, rem, ""},
		{"HTTPS", []byte("GET /metrics HTTP/1.1\r\n\r\n"), []string{"http/1.1"}, h1, "http/1.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialTLS(t, m.Addr(), ts.client, tt.protos...)
			assert.Equal(t, tt.alpn, c.ConnectionState().NegotiatedProtocol)
			_, err := c.Write(tt.first)
			require.NoError(t, err)
			s := accept(t, tt.lis)
			assert.Equal(t, tt.first, readN(t, s, len(tt.first)))
			st, ok := tlsState(s)
			require.True(t, ok, "the connection says it came over TLS")
			assert.True(t, st.HandshakeComplete)
			_, err = s.Write([]byte("pong"))
			require.NoError(t, err)
			assert.Equal(t, "pong", string(readN(t, c, 4)))
		})
	}
	assert.Equal(t, int64(len(tests)), wrapped.Load(), "WrapTLS wraps each socket TLS runs over")
}

// Permissive serves plaintext and TLS on the port; enforcing hands
// plaintext to the Refused listener, or closes it without one.
func TestPermissiveAndEnforcing(t *testing.T) {
	ts := newTLS(t, tlsx.NoClientAuth)
	t.Run("permissive", func(t *testing.T) {
		m, _, rem := startMux(t, muxlisten.Config{TLS: ts.server.Config()})
		c := dial(t, m.Addr())
		_, err := c.Write(remotingFrame)
		require.NoError(t, err)
		s := accept(t, rem)
		_, secure := tlsState(s)
		assert.False(t, secure)
		tc := dialTLS(t, m.Addr(), ts.client)
		_, err = tc.Write(remotingFrame)
		require.NoError(t, err)
		_, secure = tlsState(accept(t, rem))
		assert.True(t, secure)
	})
	t.Run("enforcing", func(t *testing.T) {
		var logs syncBuffer
		m, _, rem := startMux(t, muxlisten.Config{TLS: ts.server.Config(), RequireTLS: true,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		refused := m.Refused(muxlisten.Remoting)
		c := dial(t, m.Addr())
		_, err := c.Write(remotingFrame)
		require.NoError(t, err)
		s := accept(t, refused)
		assert.Equal(t, remotingFrame, readN(t, s, len(remotingFrame)), "the refusing server reads the request")
		tc := dialTLS(t, m.Addr(), ts.client)
		_, err = tc.Write(remotingFrame)
		require.NoError(t, err)
		accept(t, rem)

		c = dial(t, m.Addr()) // no Refused listener for HTTP/2: closed
		_, err = c.Write([]byte(h2Preface))
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err = c.Read(make([]byte, 1))
		assertClosed(t, err)
		assert.Contains(t, logs.String(), "closing plaintext connection: this port requires TLS")
	})
}

// A handshake that stalls is closed after Timeout, like a silent
// plaintext peer; a failed one is closed and logged; a TLS client on a
// port without TLS is closed.
func TestTLSHandshakeFailures(t *testing.T) {
	ts := newTLS(t, tlsx.RequireClientAuth)
	var logs syncBuffer
	m, _, rem := startMux(t, muxlisten.Config{TLS: ts.server.Config(), Timeout: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})

	stalled := dial(t, m.Addr())
	_, err := stalled.Write([]byte{0x16, 0x03, 0x01, 0x00, 0xf0, 0x01}) // a ClientHello's first bytes, no more
	require.NoError(t, err)
	require.NoError(t, stalled.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = stalled.Read(make([]byte, 1))
	assertClosed(t, err)

	conf := ts.client.Clone() // no client certificate, which the port requires
	c, err := tls.Dial("tcp", m.Addr().String(), conf)
	if err == nil { // TLS 1.3: the client learns of the refusal at its first read
		defer c.Close()
		_, _ = c.Write(remotingFrame)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err = c.Read(make([]byte, 1))
	}
	assert.ErrorContains(t, err, "certificate required")
	require.Eventually(t, func() bool { return bytes.Contains(logs.Bytes(), []byte("TLS handshake failed")) }, 10*time.Second, time.Millisecond)

	pair, err := tls.LoadX509KeyPair(ts.files.ClientCert, ts.files.ClientKey)
	require.NoError(t, err)
	conf.Certificates = []tls.Certificate{pair}
	tc := dialTLS(t, m.Addr(), conf)
	_, err = tc.Write(remotingFrame)
	require.NoError(t, err)
	s := accept(t, rem)
	st, _ := tlsState(s)
	require.Len(t, st.PeerCertificates, 1)
	assert.Equal(t, "gantry-dev-client", st.PeerCertificates[0].Subject.CommonName)

	plain, _, _ := startMux(t, muxlisten.Config{})
	_, err = tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", plain.Addr().String(), ts.client)
	assert.Error(t, err, "a TLS client on a port without TLS")
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func (s *syncBuffer) String() string { return string(s.Bytes()) }
