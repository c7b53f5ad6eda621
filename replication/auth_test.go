package replication_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/replication"
)

// The users of the authentication tests: a broker's cluster identity, a
// client and an admin.
const (
	clusterKey, clusterSecret = "cluster-a", "cluster-secret-a"
	userKey, userSecret       = "alice-key", "alice-secret"
)

// testGuard is a Guard of the test users, its clock now.
func testGuard(t *testing.T, now func() time.Time) *auth.Guard {
	t.Helper()
	users, err := auth.NewUsers(auth.File{Users: []auth.User{
		{AccessKey: clusterKey, SecretKey: clusterSecret, Role: auth.RoleCluster},
		{AccessKey: userKey, SecretKey: userSecret, Rules: []auth.Rule{{Resource: "*", Actions: []string{"All"}}}},
		{AccessKey: "admin-key", SecretKey: "admin-secret", Role: auth.RoleAdmin},
	}})
	require.NoError(t, err)
	return auth.NewGuard(auth.GuardConfig{Users: func() *auth.Users { return users }, Now: now, Logger: testLogger(t)})
}

// clusterOnly admits the slaves whose hello a cluster user signed, as a
// broker with authentication on does.
func clusterOnly(g *auth.Guard) func(replication.SignedHello, string) error {
	return func(h replication.SignedHello, from string) error {
		p, err := g.GRPC(h.Content, h.Date, h.Authorization, from)
		if err != nil {
			return err
		}
		return g.Authorize(p, auth.ClassCluster, "HA replication", from)
	}
}

func signer(t *testing.T, ak, sk string) *auth.Signer {
	t.Helper()
	s, err := auth.NewSigner(ak, sk)
	require.NoError(t, err)
	return s
}

// A slave signing its hello with cluster credentials replicates from a
// master that authenticates its slaves.
func TestSignedSlaveReplicates(t *testing.T) {
	master := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	appendN(t, master, 0, 20, 300)
	mc := masterConfig(t)
	mc.Authenticate = clusterOnly(testGuard(t, nil))
	m := startMaster(t, mc, master)
	replica := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	sc := slaveConfig(t, m.Addr().String())
	sc.Signer = signer(t, clusterKey, clusterSecret)
	startSlave(t, sc, replica)
	waitCaughtUp(t, master, replica)
	requireSameBytes(t, master, replica)
}

// A master that authenticates refuses, before serving any of its log, a
// slave without credentials, a user's, a wrong secret or an unknown key;
// the refusal names why, and the slave keeps nothing.
func TestMasterRefusesUnauthenticatedSlaves(t *testing.T) {
	master := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	appendN(t, master, 0, 20, 300)
	g := testGuard(t, nil)
	mc := masterConfig(t)
	mc.Authenticate = clusterOnly(g)
	m := startMaster(t, mc, master)
	for _, tc := range []struct {
		name   string
		signer replication.HelloSigner
		says   string
	}{
		{"no credentials", nil, "cluster operations need credentials"},
		{"a user's", signer(t, userKey, userSecret), "cluster operations need a cluster or admin user"},
		{"a wrong secret", signer(t, clusterKey, "not-the-secret"), "does not match"},
		{"an unknown key", signer(t, "mallory-key", clusterSecret), `unknown access key "mallory-key"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replica := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
			sc := slaveConfig(t, m.Addr().String())
			sc.Signer = tc.signer
			s := startSlave(t, sc, replica)
			var refused *replication.RefusedError
			require.Eventually(t, func() bool { return errors.As(s.Status().LastErr, &refused) }, patience, 2*time.Millisecond)
			assert.Equal(t, "master", refused.By)
			assert.Contains(t, refused.Reason, "authentication: auth: ")
			assert.Contains(t, refused.Reason, tc.says)
			assert.Zero(t, replica.MaxOffset(), "nothing of the master's log reached the slave")
			assert.Zero(t, s.Status().Sessions)
		})
	}
	for _, sl := range m.Slaves() {
		assert.Failf(t, "a refused slave is tracked", "replica %d", sl.ID)
	}
	refused := g.Refused()
	assert.NotZero(t, refused[auth.ReasonNoCredentials])
	assert.NotZero(t, refused[auth.ReasonDenied])
	assert.NotZero(t, refused[auth.ReasonBadSignature])
	assert.NotZero(t, refused[auth.ReasonUnknownKey])
}

// helloExchange sends raw hello bytes to addr and returns the welcome.
func helloExchange(t *testing.T, addr string, hello []byte) replication.Welcome {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(patience)))
	_, err = c.Write(hello)
	require.NoError(t, err)
	w, err := replication.ReadWelcome(c)
	require.NoError(t, err)
	return w
}

// signedHello is h signed by s at now with a fixed nonce.
func signedHello(h replication.Hello, s replication.HelloSigner, nonce byte, now time.Time) replication.Hello {
	p := &replication.HelloProof{}
	p.Nonce[0] = nonce
	p.Date, p.Authorization = s.SignGRPC(h.SignedContent(p.Nonce), now)
	h.Proof = p
	return h
}

// A captured signed hello is refused when sent again, once its date is
// out of the window, and when a field it signs is changed; a refusal
// tells the peer nothing of the log (a version 0 welcome of zeros).
func TestSignedHelloCannotBeReplayedOrAltered(t *testing.T) {
	master := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	appendN(t, master, 0, 10, 300)
	mc := masterConfig(t)
	mc.Authenticate = clusterOnly(testGuard(t, nil))
	m := startMaster(t, mc, master)
	addr := m.Addr().String()
	s := signer(t, clusterKey, clusterSecret)
	hello := replication.Hello{Version: replication.Version, ReplicaID: 2, SegmentBytes: segBytes, MaxFrameBytes: 1 << 20}

	captured := replication.AppendHello(nil, signedHello(hello, s, 1, time.Now()))
	w := helloExchange(t, addr, captured)
	require.Empty(t, w.Reason, "the first use is admitted")
	assert.Equal(t, master.MaxOffset(), w.End)

	w = helloExchange(t, addr, captured)
	assert.Contains(t, w.Reason, "a replayed hello")
	assert.Equal(t, replication.Welcome{Reason: w.Reason}, w, "a refusal carries nothing of the log")

	w = helloExchange(t, addr, replication.AppendHello(nil, signedHello(hello, s, 2, time.Now().Add(-2*auth.DefaultWindow))))
	assert.Contains(t, w.Reason, "outside the 1m0s window")

	altered := signedHello(hello, s, 3, time.Now())
	altered.ReplicaID = 3
	w = helloExchange(t, addr, replication.AppendHello(nil, altered))
	assert.Contains(t, w.Reason, "signature does not match")

	w = helloExchange(t, addr, replication.AppendHello(nil, hello))
	assert.Contains(t, w.Reason, "cluster operations need credentials")
}

// A master without Authenticate admits signed and unsigned hellos alike:
// a slave given credentials before its master enables authentication
// keeps replicating.
func TestMasterWithoutAuthenticationAdmitsSignedHellos(t *testing.T) {
	master := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	appendN(t, master, 0, 10, 300)
	m := startMaster(t, masterConfig(t), master)
	replica := openLog(t, t.TempDir(), segBytes, commitlog.AsyncFlush)
	sc := slaveConfig(t, m.Addr().String())
	sc.Signer = signer(t, userKey, userSecret)
	startSlave(t, sc, replica)
	waitCaughtUp(t, master, replica)
}
