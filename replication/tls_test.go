package replication_test

import (
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/tlsx"
	"github.com/gantrymq/gantry/replication"
	"github.com/gantrymq/gantry/replication/epoch"
)

// A slave dialing with TLS (SlaveConfig.Dial) replicates from a master
// whose listener serves TLS and requires its certificate.
func TestReplicationOverTLS(t *testing.T) {
	f, err := tlsx.WriteDevCerts(t.TempDir(), []string{"127.0.0.1"})
	require.NoError(t, err)
	srv, err := tlsx.NewServer(tlsx.ServerConfig{Mode: tlsx.Enforcing, CertFile: f.ServerCert, KeyFile: f.ServerKey,
		ClientCAFile: f.CA, ClientAuth: tlsx.RequireClientAuth})
	require.NoError(t, err)
	cl, err := tlsx.NewClient(tlsx.ClientConfig{CAFile: f.CA, CertFile: f.ClientCert, KeyFile: f.ClientKey})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	master := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	replica := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	appendN(t, master, 0, 30, 300)
	mcfg := masterConfig(t)
	mcfg.Listener = tls.NewListener(ln, srv.Config())
	m := startMaster(t, mcfg, master)
	scfg := slaveConfig(t, m.Addr().String())
	scfg.Dial = cl.Dial
	startSlave(t, scfg, replica)
	appendN(t, master, 30, 30, 300)
	m.Notify()
	waitCaughtUp(t, master, replica)
	requireSameBytes(t, master, replica)
}

// ServeRefusals tells a slave why it is refused, and a slave with an
// epoch file and data keeps both and goes on trying.
func TestServeRefusals(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- replication.ServeRefusals(ln, "this master's HA port requires TLS", 5*time.Second) }()

	dir := t.TempDir()
	replica := openLog(t, dir, segBytes, commitlog.AsyncFlush)
	end := appendN(t, replica, 0, 10, 300)
	epochs, err := epoch.Open(nil, filepath.Join(dir, "epochs"))
	require.NoError(t, err)
	require.NoError(t, epochs.Append(3, 0))
	scfg := slaveConfig(t, ln.Addr().String())
	scfg.Epochs = epochs
	s := startSlave(t, scfg, replica)
	var st replication.SlaveStatus
	require.Eventually(t, func() bool { st = s.Status(); return st.LastErr != nil }, patience, 2*time.Millisecond)
	var re *replication.RefusedError
	require.ErrorAs(t, st.LastErr, &re)
	assert.Equal(t, "this master's HA port requires TLS", re.Reason)
	assert.False(t, st.Stopped, "a refusal is retried")
	assert.Equal(t, end, replica.MaxOffset())
	assert.Equal(t, []epoch.Entry{{Epoch: 3, StartOffset: 0}}, epochs.Entries())

	require.NoError(t, s.Close())
	require.NoError(t, ln.Close())
	require.NoError(t, <-served)
}
