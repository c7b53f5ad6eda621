package auth

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testUsers(t *testing.T) *Users {
	t.Helper()
	u, err := NewUsers(File{Users: []User{
		{AccessKey: "rocketmq2", SecretKey: "12345678"},
		{AccessKey: "admin1", SecretKey: "adminsecret", Role: RoleAdmin},
		{AccessKey: "broker1", SecretKey: "clustersecret", Role: RoleCluster},
		{AccessKey: "app001", SecretKey: "appsecret", Rules: []Rule{
			{Resource: "Topic:orders", Actions: []string{"Pub", "Sub"}},
			{Resource: "Topic:audit-*", Actions: []string{"Sub"}},
			{Resource: "Topic:audit-secret", Actions: []string{"All"}, Decision: Deny},
			{Resource: "Group:billing", Actions: []string{"Sub"}},
		}},
	}})
	require.NoError(t, err)
	return u
}

// The expected signatures were computed independently (Python's hmac over
// the values in key order and the body).
func TestSignRemotingAsTheGoClient(t *testing.T) {
	ext := map[string]string{"AccessKey": "rocketmq2", "topic": "orders", "queueId": "3", "a": "group1"}
	assert.Equal(t, "E4JZBU+S7JjwN9uNspLB0Lg+4oQ=", SignRemoting("12345678", ext, []byte("hello")))

	u := testUsers(t)
	ext[ExtSignature] = "E4JZBU+S7JjwN9uNspLB0Lg+4oQ="
	p, err := u.VerifyRemoting(ext, []byte("hello"))
	require.NoError(t, err)
	assert.Equal(t, "rocketmq2", p.AccessKey())

	// The Go client leaves SecurityToken out of what it signs.
	ext[ExtSecurityToken] = "tok"
	_, err = u.VerifyRemoting(ext, []byte("hello"))
	require.NoError(t, err)
	// Java's clients sign it.
	ext[ExtSignature] = "yl/J5akkluNvIkQsvAGtv1ddB8U="
	_, err = u.VerifyRemoting(ext, []byte("hello"))
	require.NoError(t, err)
}

func TestVerifyRemotingRefusals(t *testing.T) {
	u := testUsers(t)
	signed := func(ak, sk string) map[string]string {
		ext := map[string]string{"AccessKey": ak, "topic": "orders"}
		ext[ExtSignature] = SignRemoting(sk, ext, []byte("body"))
		return ext
	}
	for _, tc := range []struct {
		name   string
		ext    map[string]string
		body   string
		reason Reason
	}{
		{"unknown key", signed("nobody1", "12345678"), "body", ReasonUnknownKey},
		{"wrong secret", signed("rocketmq2", "wrongsecret"), "body", ReasonBadSignature},
		{"body changed", signed("rocketmq2", "12345678"), "bodx", ReasonBadSignature},
		{"no signature", map[string]string{"AccessKey": "rocketmq2"}, "", ReasonMalformed},
		{"no access key", map[string]string{"Signature": "x"}, "", ReasonMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := u.VerifyRemoting(tc.ext, []byte(tc.body))
			require.Error(t, err)
			assert.Nil(t, p)
			assert.ErrorIs(t, err, ErrUnauthenticated)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tc.reason, e.Reason)
			assert.NotContains(t, err.Error(), "12345678")
		})
	}
	t.Run("a changed field", func(t *testing.T) {
		ext := signed("rocketmq2", "12345678")
		ext["topic"] = "other"
		_, err := u.VerifyRemoting(ext, []byte("body"))
		assert.ErrorIs(t, err, ErrUnauthenticated)
	})
	t.Run("anonymous", func(t *testing.T) {
		p, err := u.VerifyRemoting(map[string]string{"topic": "t"}, nil)
		require.NoError(t, err)
		assert.Nil(t, p)
	})
}

func TestGRPCSignature(t *testing.T) {
	u := testUsers(t)
	at := time.UnixMilli(1700000000000)
	date, authz := SignGRPC("rocketmq2", "12345678", "/gantry.v1.Messaging/Send", at)
	assert.Equal(t, "1700000000000", date)
	assert.Equal(t, "GANTRY-HMAC-SHA256 Credential=rocketmq2, Signature=GkwrTZoxk8NuJ6UV6ppxk0Ecfz4k2K2kuNMAacwxs6w=", authz)

	p, err := u.VerifyGRPC("/gantry.v1.Messaging/Send", date, authz, at.Add(30*time.Second), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, "rocketmq2", p.AccessKey())

	for _, tc := range []struct {
		name, method, date, authz string
		now                       time.Time
		reason                    Reason
	}{
		{"replayed after its window", "/gantry.v1.Messaging/Send", date, authz, at.Add(61 * time.Second), ReasonExpired},
		{"dated ahead", "/gantry.v1.Messaging/Send", date, authz, at.Add(-61 * time.Second), ReasonExpired},
		{"another method", "/gantry.v1.Admin/DeleteTopic", date, authz, at, ReasonBadSignature},
		{"another date", "/gantry.v1.Messaging/Send", "1700000000001", authz, at, ReasonBadSignature},
		{"garbled", "/gantry.v1.Messaging/Send", date, "Basic abc", at, ReasonMalformed},
		{"bad date", "/gantry.v1.Messaging/Send", "yesterday", authz, at, ReasonMalformed},
		{"no date", "/gantry.v1.Messaging/Send", "", authz, at, ReasonMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := u.VerifyGRPC(tc.method, tc.date, tc.authz, tc.now, time.Minute)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tc.reason, e.Reason, "%v", err)
		})
	}
}

func TestAuthorize(t *testing.T) {
	u := testUsers(t)
	get := func(ak string) *Principal { p, ok := u.Lookup(ak); require.True(t, ok); return p }
	app, admin, cluster := get("app001"), get("admin1"), get("broker1")
	for _, tc := range []struct {
		name string
		p    *Principal
		c    Class
		rs   []Resource
		want error
	}{
		{"public without credentials", nil, ClassPublic, nil, nil},
		{"pub without credentials", nil, ClassPub, []Resource{Topic("orders")}, ErrUnauthenticated},
		{"pub allowed", app, ClassPub, []Resource{Topic("orders")}, nil},
		{"pub on another topic", app, ClassPub, []Resource{Topic("payments")}, ErrDenied},
		{"sub by prefix", app, ClassSub, []Resource{Topic("audit-log"), Group("billing")}, nil},
		{"pub where only sub is allowed", app, ClassPub, []Resource{Topic("audit-log")}, ErrDenied},
		{"deny beats the prefix allow", app, ClassSub, []Resource{Topic("audit-secret")}, ErrDenied},
		{"a group not allowed", app, ClassSub, []Resource{Topic("orders"), Group("other")}, ErrDenied},
		{"the group's retry topic is the group's", app, ClassSub, []Resource{Topic("%RETRY%billing")}, nil},
		{"another group's retry topic", app, ClassPub, []Resource{Topic("%RETRY%other")}, ErrDenied},
		{"admin by a user", app, ClassAdmin, nil, ErrDenied},
		{"cluster by a user", app, ClassCluster, nil, ErrDenied},
		{"admin by admin", admin, ClassAdmin, nil, nil},
		{"cluster by admin", admin, ClassCluster, nil, nil},
		{"pub by admin", admin, ClassPub, []Resource{Topic("anything")}, nil},
		{"cluster by cluster", cluster, ClassCluster, nil, nil},
		{"admin by cluster", cluster, ClassAdmin, nil, ErrDenied},
		{"pub by cluster", cluster, ClassPub, []Resource{Topic("orders")}, ErrDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Authorize(tc.p, tc.c, tc.rs...)
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

func TestNewUsersRefusesBadFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    User
		want string
	}{
		{"short access key", User{AccessKey: "ab", SecretKey: "12345678"}, "accessKey"},
		{"short secret", User{AccessKey: "abcdef", SecretKey: "1"}, "secretKey"},
		{"space in key", User{AccessKey: "abc def", SecretKey: "12345678"}, "printable"},
		{"bad role", User{AccessKey: "abcdef", SecretKey: "12345678", Role: "root"}, "role"},
		{"bad resource", User{AccessKey: "abcdef", SecretKey: "12345678", Rules: []Rule{{Resource: "Queue:x", Actions: []string{"Pub"}}}}, "Topic:<name>"},
		{"bad action", User{AccessKey: "abcdef", SecretKey: "12345678", Rules: []Rule{{Resource: "Topic:x", Actions: []string{"Write"}}}}, "action"},
		{"no action", User{AccessKey: "abcdef", SecretKey: "12345678", Rules: []Rule{{Resource: "Topic:x"}}}, "actions"},
		{"star inside", User{AccessKey: "abcdef", SecretKey: "12345678", Rules: []Rule{{Resource: "Topic:a*b", Actions: []string{"Pub"}}}}, "end of a name"},
		{"bad decision", User{AccessKey: "abcdef", SecretKey: "12345678", Rules: []Rule{{Resource: "Topic:a", Actions: []string{"Pub"}, Decision: "Maybe"}}}, "decision"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewUsers(File{Users: []User{tc.u}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := NewUsers(File{Users: []User{{AccessKey: "abcdef", SecretKey: "12345678"}, {AccessKey: "abcdef", SecretKey: "87654321"}}})
	assert.ErrorContains(t, err, "listed twice")
}

func writeFile(t *testing.T, path string, f File) {
	t.Helper()
	data, err := json.Marshal(f)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600))
}

func TestStoreReloadsAndWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl.json")
	writeFile(t, path, File{Users: []User{{AccessKey: "admin1", SecretKey: "adminsecret", Role: RoleAdmin}}})
	s, err := OpenStore(StoreConfig{Path: path, ReloadInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, 1, s.Users().Len())

	// A change on disk is picked up; a broken file keeps the users.
	writeFile(t, path, File{Users: []User{{AccessKey: "admin1", SecretKey: "adminsecret", Role: RoleAdmin}, {AccessKey: "second", SecretKey: "secondsecret"}}})
	require.Eventually(t, func() bool { return s.Users().Len() == 2 }, 10*time.Second, 10*time.Millisecond)
	gen := s.Generation()
	require.NoError(t, os.WriteFile(path, []byte(`{"users": [`), 0o600))
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 2, s.Users().Len())
	assert.Equal(t, gen, s.Generation())

	// Changes through the Store are written, 0600, and read back.
	require.NoError(t, s.CreateUser(User{AccessKey: "third1", SecretKey: "thirdsecret"}))
	require.NoError(t, s.PutRules("third1", []Rule{{Resource: "Topic:t", Actions: []string{"Pub"}}}, true))
	assert.ErrorIs(t, s.PutRules("third1", []Rule{{Resource: "Topic:t", Actions: []string{"Sub"}}}, true), ErrExists)
	require.NoError(t, s.PutRules("third1", []Rule{{Resource: "Topic:t", Actions: []string{"Sub"}}}, false))
	assert.ErrorIs(t, s.CreateUser(User{AccessKey: "third1", SecretKey: "thirdsecret"}), ErrExists)
	assert.ErrorIs(t, s.DeleteUser("nobody"), ErrNotFound)
	assert.Error(t, s.CreateUser(User{AccessKey: "x", SecretKey: "y"}), "an invalid user is refused")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	again, err := OpenStore(StoreConfig{Path: path, ReloadInterval: -1})
	require.NoError(t, err)
	defer again.Close()
	p, ok := again.Users().Lookup("third1")
	require.True(t, ok)
	assert.NoError(t, Authorize(p, ClassSub, Topic("t")))
	assert.ErrorIs(t, Authorize(p, ClassPub, Topic("t")), ErrDenied)

	require.NoError(t, s.DeleteRules("third1", nil))
	require.NoError(t, s.UpdateUser("third1", "newsecret1", RoleAdmin))
	p, _ = s.Users().Lookup("third1")
	assert.Equal(t, RoleAdmin, p.Role())
	require.NoError(t, s.DeleteUser("third1"))
	_, ok = s.Users().Lookup("third1")
	assert.False(t, ok)
}

func TestOpenStoreErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := OpenStore(StoreConfig{Path: filepath.Join(dir, "missing.json")})
	assert.ErrorContains(t, err, "missing.json")
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"users":[{"accessKey":"abcdef","secretKey":"12345678","colour":"red"}]}`), 0o600))
	_, err = OpenStore(StoreConfig{Path: bad})
	assert.ErrorContains(t, err, "colour")
}

func TestGuardCountsAndNil(t *testing.T) {
	var off *Guard
	p, err := off.Remoting(map[string]string{"AccessKey": "x", "Signature": "y"}, nil, "peer")
	assert.NoError(t, err)
	assert.Nil(t, p)
	assert.NoError(t, off.Authorize(nil, ClassAdmin, "op", "peer"))

	u := testUsers(t)
	g := NewGuard(GuardConfig{Users: func() *Users { return u }})
	_, err = g.Remoting(map[string]string{"AccessKey": "rocketmq2", "Signature": "bad"}, nil, "peer")
	assert.Error(t, err)
	assert.ErrorIs(t, g.Authorize(nil, ClassAdmin, "deleteTopic", "peer"), ErrUnauthenticated)
	app, _ := u.Lookup("app001")
	assert.ErrorIs(t, g.Authorize(app, ClassAdmin, "deleteTopic", "peer"), ErrDenied)
	r := g.Refused()
	assert.Equal(t, uint64(1), r[ReasonBadSignature])
	assert.Equal(t, uint64(1), r[ReasonNoCredentials])
	assert.Equal(t, uint64(1), r[ReasonDenied])

	open := NewGuard(GuardConfig{Users: func() *Users { return u }, NoAuthorization: true})
	assert.NoError(t, open.Authorize(app, ClassAdmin, "deleteTopic", "peer"))
	assert.ErrorIs(t, open.Authorize(app, ClassCluster, "register", "peer"), ErrDenied)
	assert.True(t, errors.Is(open.Authorize(nil, ClassPub, "send", "peer", Topic("t")), ErrUnauthenticated))
}

func TestVerifyAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled objects at random")
	}
	u := testUsers(t)
	ext := map[string]string{"AccessKey": "rocketmq2", "topic": "orders", "queueId": "3"}
	ext[ExtSignature] = SignRemoting("12345678", ext, []byte("body"))
	date, authz := SignGRPC("rocketmq2", "12345678", "/m", time.Now())
	now := time.Now()
	body := []byte("body")
	_, _ = u.VerifyRemoting(ext, body) // fill the pools
	_, _ = u.VerifyGRPC("/m", date, authz, now, time.Minute)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = u.VerifyRemoting(ext, body) }))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = u.VerifyGRPC("/m", date, authz, now, time.Minute) }))
}

func FuzzVerifyGRPC(f *testing.F) {
	u, err := NewUsers(File{Users: []User{{AccessKey: "rocketmq2", SecretKey: "12345678"}}})
	require.NoError(f, err)
	date, authz := SignGRPC("rocketmq2", "12345678", "/m", time.UnixMilli(1))
	f.Add("/m", date, authz)
	f.Add("", "", "GANTRY-HMAC-SHA256 Credential=, Signature=")
	f.Fuzz(func(t *testing.T, method, date, authz string) {
		p, err := u.VerifyGRPC(method, date, authz, time.UnixMilli(1), time.Minute)
		if err == nil && p != nil {
			require.Equal(t, "rocketmq2", p.AccessKey())
		}
	})
}

func FuzzVerifyRemoting(f *testing.F) {
	u, err := NewUsers(File{Users: []User{{AccessKey: "rocketmq2", SecretKey: "12345678"}}})
	require.NoError(f, err)
	f.Add("rocketmq2", "sig", "topic", "t", []byte("body"))
	f.Fuzz(func(t *testing.T, ak, sig, k, v string, body []byte) {
		ext := map[string]string{ExtAccessKey: ak, ExtSignature: sig, k: v}
		p, err := u.VerifyRemoting(ext, body)
		if err == nil && p != nil {
			require.Equal(t, SignRemoting("12345678", ext, body), ext[ExtSignature])
		}
	})
}

func TestSignerSignsAsSignGRPC(t *testing.T) {
	s, err := NewSigner("rocketmq2", "12345678")
	require.NoError(t, err)
	at := time.UnixMilli(1700000000000)
	d1, a1 := s.SignGRPC("/gantry.v1.Messaging/Send", at)
	d2, a2 := SignGRPC("rocketmq2", "12345678", "/gantry.v1.Messaging/Send", at)
	assert.Equal(t, d2, d1)
	assert.Equal(t, a2, a1)
	_, err = NewSigner("ab", "12345678")
	assert.ErrorContains(t, err, "accessKey")
}
