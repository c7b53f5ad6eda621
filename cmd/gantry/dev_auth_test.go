package main

import (
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gantry dev --auth prints an admin user's keys: gantry bench and admin
// signing with them get through, unsigned they are refused; a second run
// on the same directory keeps the users.
func TestDevAuth(t *testing.T) {
	dir := t.TempDir()
	start := func() (ns, ak, sk string, stop func()) {
		var out, errOut syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- run([]string{"dev", "--auth", "--dir", dir, "--namesrv-listen", "127.0.0.1:0",
				"--broker-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
				"--namesrv-remoting-listen", "127.0.0.1:0", "--broker-remoting-listen", "127.0.0.1:0"}, &out, &errOut)
		}()
		require.Eventually(t, func() bool { return regexp.MustCompile("Ctrl-C to stop").MatchString(out.String()) }, 20*time.Second, 5*time.Millisecond, errOut.String())
		m := regexp.MustCompile(`export GANTRY_ACCESS_KEY=(\S+) GANTRY_SECRET_KEY=(\S+)`).FindStringSubmatch(out.String())
		require.NotNil(t, m, out.String())
		n := regexp.MustCompile(`nameserver  (\S+)   \(gRPC`).FindStringSubmatch(out.String())
		require.NotNil(t, n, out.String())
		return n[1], m[1], m[2], func() {
			require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGINT))
			select {
			case code := <-done:
				assert.Equal(t, exitOK, code, errOut.String())
			case <-time.After(20 * time.Second):
				t.Fatal("gantry dev did not stop on SIGINT")
			}
		}
	}
	ns, ak, sk, stop := start()
	assert.Equal(t, devAdmin, ak)

	var bout, berr syncBuffer
	code := run([]string{"bench", "produce", "-n", ns, "--access-key", ak, "--secret-key", sk, "-t", "AuthBench", "--count", "100", "--inflight", "8"}, &bout, &berr)
	require.Equal(t, exitOK, code, bout.String(), berr.String())
	bout, berr = syncBuffer{}, syncBuffer{}
	code = run([]string{"bench", "produce", "-n", ns, "-t", "AuthBench", "--count", "10", "--inflight", "1"}, &bout, &berr)
	assert.NotEqual(t, exitOK, code, "an unsigned send is refused")
	assert.Contains(t, bout.String()+berr.String(), "need credentials")

	var aout, aerr syncBuffer
	code = run([]string{"admin", "createUser", "-n", ns, "--access-key", ak, "--secret-key", sk, "-u", "app001", "-p", "appsecret"}, &aout, &aerr)
	require.Equal(t, exitOK, code, aerr.String())
	stop()

	// The same directory: the same admin, and the user created.
	ns, ak2, sk2, stop := start()
	defer stop()
	assert.Equal(t, []string{ak, sk}, []string{ak2, sk2})
	aout, aerr = syncBuffer{}, syncBuffer{}
	code = run([]string{"admin", "listUser", "-n", ns, "--access-key", ak, "--secret-key", sk}, &aout, &aerr)
	require.Equal(t, exitOK, code, aerr.String())
	assert.Contains(t, aout.String(), "app001")
}
