package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gantry dev --tls serves TLS only and prints how to connect: gantry admin
// and bench with --tls-ca get through, without it they are told TLS is
// required, and the metrics are served over HTTPS.
func TestDevTLS(t *testing.T) {
	var out, errOut syncBuffer
	done := make(chan int, 1)
	dir := t.TempDir()
	go func() {
		done <- run([]string{"dev", "--tls", "--dir", dir, "--namesrv-listen", "127.0.0.1:0",
			"--broker-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
			"--namesrv-remoting-listen", "127.0.0.1:0", "--broker-remoting-listen", "127.0.0.1:0"}, &out, &errOut)
	}()
	require.Eventually(t, func() bool { return regexp.MustCompile("Ctrl-C to stop").MatchString(out.String()) }, 20*time.Second, 5*time.Millisecond, errOut.String())
	t.Cleanup(func() {
		require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGINT))
		select {
		case code := <-done:
			assert.Equal(t, exitOK, code, errOut.String())
		case <-time.After(20 * time.Second):
			t.Fatal("gantry dev did not stop on SIGINT")
		}
	})
	m := regexp.MustCompile(`gantry admin clusterList -n (\S+) --tls-ca (\S+)`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	ns, ca := m[1], m[2]
	assert.Contains(t, out.String(), "producer.WithTls(true)")
	assert.Contains(t, out.String(), "TLS: &tls.Config{RootCAs: roots}")

	var aout, aerr syncBuffer
	code := run([]string{"admin", "clusterList", "-n", ns, "--tls-ca", ca}, &aout, &aerr)
	require.Equal(t, exitOK, code, aerr.String())
	assert.Contains(t, aout.String(), "DefaultCluster")
	aout, aerr = syncBuffer{}, syncBuffer{}
	code = run([]string{"admin", "clusterList", "-n", ns}, &aout, &aerr)
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, aerr.String(), "requires TLS")

	var bout, berr syncBuffer
	code = run([]string{"bench", "produce", "-n", ns, "--tls-ca", ca, "-t", "TLSBench", "--count", "200", "--inflight", "16"}, &bout, &berr)
	require.Equal(t, exitOK, code, bout.String(), berr.String())
	assert.Contains(t, bout.String(), "200")

	hm := regexp.MustCompile(`metrics     https://(\S+)/metrics`).FindStringSubmatch(out.String())
	require.NotNil(t, hm, out.String())
	pem, err := os.ReadFile(ca)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pem))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	resp, err := hc.Get("https://" + hm[1] + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// A server's TLS flags are checked before it starts, naming the flag.
func TestServerTLSFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"namesrv", "--listen", "127.0.0.1:0", "--remoting-listen", "127.0.0.1:0", "--tls-mode", "enforcing"},
			"--tls-mode=enforcing needs --tls-cert"},
		{[]string{"namesrv", "--listen", "127.0.0.1:0", "--remoting-listen", "127.0.0.1:0", "--tls-mode", "strict"},
			`--tls-mode "strict": want disabled, permissive or enforcing`},
		{[]string{"namesrv", "--listen", "127.0.0.1:0", "--remoting-listen", "127.0.0.1:0", "--tls-mode", "permissive",
			"--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"}, "--tls-cert /nonexistent/cert.pem"},
		{[]string{"controller", "--id", "c1", "--peers", "c1=127.0.0.1:0=127.0.0.1:0", "--data-dir", "x", "--tls-mode", "enforcing"},
			"--tls-mode=enforcing needs --tls-cert"},
		{[]string{"broker", "--tls-mode", "enforcing"}, "tls.server.mode=enforcing needs tls.server.certPath"},
		{[]string{"admin", "clusterList", "--tls-ca", "/nonexistent/ca.pem"}, "--tls-ca /nonexistent/ca.pem"},
	} {
		var out, errOut syncBuffer
		code := run(tc.args, &out, &errOut)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut.String())
		assert.Contains(t, errOut.String(), tc.want, "%v", tc.args)
	}
}
