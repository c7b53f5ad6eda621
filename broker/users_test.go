package broker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
)

const adminFile = `{"users": [{"accessKey": "admin1", "secretKey": "adminsecret", "role": "admin"}]}`

// authConfig is testConfig with authentication on and the ACL file file.
func authConfig(t *testing.T, file string) broker.Config {
	t.Helper()
	cfg := testConfig(t)
	cfg.AuthenticationEnabled = true
	cfg.ACLFile = filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(cfg.ACLFile, []byte(file), 0o600))
	return cfg
}

// signIn authenticates a gRPC call signed with the keys through b's guard.
func signIn(t *testing.T, b *broker.Broker, ak, sk string) (*auth.Principal, error) {
	t.Helper()
	s, err := auth.NewSigner(ak, sk)
	require.NoError(t, err)
	const method = "/gantry.v1.Messaging/Send"
	date, authz := s.SignGRPC(method, time.Now())
	return b.Guard().GRPC(method, date, authz, "test")
}

// fileUsers reads the ACL file as it is on disk.
func fileUsers(t *testing.T, path string) auth.File {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	u, err := auth.ParseFile(data)
	require.NoError(t, err)
	return u.File()
}

func TestUserVerbs(t *testing.T) {
	cfg := authConfig(t, adminFile)
	b := openBroker(t, cfg)

	require.NoError(t, b.CreateUser(auth.User{AccessKey: "alice1", SecretKey: "alicesecret"}))
	assert.ErrorIs(t, b.CreateUser(auth.User{AccessKey: "alice1", SecretKey: "othersecret"}), auth.ErrExists)
	for _, bad := range []struct {
		u    auth.User
		want string
	}{
		{auth.User{AccessKey: "bob", SecretKey: "bobsecret"}, "accessKey: want 6 to 128 characters, got 3"},
		{auth.User{AccessKey: "bob123", SecretKey: "short"}, "secretKey: want 6 to 128 characters"},
		{auth.User{AccessKey: "bob123", SecretKey: "bobsecret", Role: "root"}, `role "root": want admin, cluster or none`},
		{auth.User{AccessKey: "bob 12", SecretKey: "bobsecret"}, "printable ASCII without spaces"},
	} {
		err := b.CreateUser(bad.u)
		assert.ErrorIs(t, err, broker.ErrInvalidArgument, bad.want)
		assert.ErrorContains(t, err, bad.want)
	}
	_, ok := b.Users().Users().Lookup("bob123")
	assert.False(t, ok, "a refused user was added")

	// The file on disk holds the user; the user signs in at once.
	assert.Equal(t, []string{"admin1", "alice1"}, accessKeys(fileUsers(t, cfg.ACLFile)))
	p, err := signIn(t, b, "alice1", "alicesecret")
	require.NoError(t, err)
	assert.Equal(t, auth.RoleUser, p.Role())

	// A new secret key: the old one no longer signs in.
	require.NoError(t, b.UpdateUser("alice1", "newalicesecret", ""))
	_, err = signIn(t, b, "alice1", "alicesecret")
	assert.ErrorIs(t, err, auth.ErrUnauthenticated)
	p, err = signIn(t, b, "alice1", "newalicesecret")
	require.NoError(t, err)
	assert.Equal(t, auth.RoleUser, p.Role(), "an empty role keeps it")

	// A new role, the secret key kept.
	require.NoError(t, b.UpdateUser("alice1", "", "Cluster"))
	p, err = signIn(t, b, "alice1", "newalicesecret")
	require.NoError(t, err)
	assert.Equal(t, auth.RoleCluster, p.Role())
	require.NoError(t, b.UpdateUser("alice1", "", "none"))
	u, err := b.GetUser("alice1")
	require.NoError(t, err)
	assert.Equal(t, auth.RoleUser, u.Role)

	assert.ErrorIs(t, b.UpdateUser("alice1", "", ""), broker.ErrInvalidArgument, "nothing to change")
	assert.ErrorIs(t, b.UpdateUser("alice1", "tiny", ""), broker.ErrInvalidArgument)
	assert.ErrorIs(t, b.UpdateUser("nobody1", "nobodysecret", ""), auth.ErrNotFound)
	_, err = b.GetUser("nobody1")
	assert.ErrorIs(t, err, auth.ErrNotFound)

	// The only admin keeps its role and stays; with a second one it goes.
	assert.ErrorIs(t, b.DeleteUser("admin1"), broker.ErrLastAdmin)
	assert.ErrorIs(t, b.UpdateUser("admin1", "", "none"), broker.ErrLastAdmin)
	require.NoError(t, b.UpdateUser("admin1", "adminsecret2", "admin"), "a new secret for the only admin")
	require.NoError(t, b.CreateUser(auth.User{AccessKey: "admin2", SecretKey: "admin2secret", Role: "super"}))
	require.NoError(t, b.DeleteUser("admin1"))
	assert.ErrorIs(t, b.DeleteUser("admin1"), auth.ErrNotFound)
	_, err = signIn(t, b, "admin1", "adminsecret2")
	assert.ErrorIs(t, err, auth.ErrUnauthenticated)

	list, err := b.ListUsers("")
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, auth.User{AccessKey: "admin2", Role: auth.RoleAdmin}, list[0], "no secret key")
	assert.Equal(t, auth.User{AccessKey: "alice1"}, list[1])
	list, err = b.ListUsers("dmin")
	require.NoError(t, err)
	assert.Len(t, list, 1)
	assert.Equal(t, []string{"admin2", "alice1"}, accessKeys(fileUsers(t, cfg.ACLFile)))
}

func accessKeys(f auth.File) []string {
	var out []string
	for _, u := range f.Users {
		out = append(out, u.AccessKey)
	}
	return out
}

func TestACLVerbs(t *testing.T) {
	cfg := authConfig(t, adminFile)
	b := openBroker(t, cfg)
	require.NoError(t, b.CreateUser(auth.User{AccessKey: "alice1", SecretKey: "alicesecret"}))

	pub := func(res string) auth.Rule { return auth.Rule{Resource: res, Actions: []string{"Pub"}} }
	require.NoError(t, b.CreateACL("alice1", []auth.Rule{
		{Resource: "topic:orders", Actions: []string{"pub", "SUB"}},
		{Resource: "Group:billing", Actions: []string{"sub"}},
		pub("Topic:audit-*"),
	}))
	err := b.CreateACL("alice1", []auth.Rule{pub("Topic:orders")})
	assert.ErrorIs(t, err, auth.ErrExists)
	assert.ErrorContains(t, err, "updateAcl changes it")
	for _, bad := range []struct {
		rules []auth.Rule
		want  string
	}{
		{nil, "no rule given"},
		{[]auth.Rule{pub("Queue:x")}, "want Topic:<name>, Group:<name>"},
		{[]auth.Rule{{Resource: "Topic:x", Actions: []string{"Write"}}}, `action "Write": want Pub, Sub or All`},
		{[]auth.Rule{{Resource: "Topic:x", Actions: []string{"Pub"}, Decision: "Maybe"}}, `decision "Maybe": want Allow or Deny`},
		{[]auth.Rule{pub("Topic:a*b")}, "'*' only at the end"},
		{[]auth.Rule{pub("Topic:x"), pub("topic:x")}, "resource Topic:x given twice"},
	} {
		err := b.UpdateACL("alice1", bad.rules)
		assert.ErrorIs(t, err, broker.ErrInvalidArgument, bad.want)
		assert.ErrorContains(t, err, bad.want)
	}
	assert.ErrorIs(t, b.CreateACL("nobody1", []auth.Rule{pub("Topic:x")}), auth.ErrNotFound)

	p, err := signIn(t, b, "alice1", "alicesecret")
	require.NoError(t, err)
	g := b.Guard()
	assert.NoError(t, g.Authorize(p, auth.ClassPub, "send", "test", auth.Topic("orders")))
	assert.NoError(t, g.Authorize(p, auth.ClassPub, "send", "test", auth.Topic("audit-eu")))
	assert.NoError(t, g.Authorize(p, auth.ClassSub, "pull", "test", auth.Topic("orders"), auth.Group("billing")))
	assert.NoError(t, g.Authorize(p, auth.ClassSub, "pull", "test", auth.Topic("%RETRY%billing")), "the group's retry topic")
	assert.ErrorIs(t, g.Authorize(p, auth.ClassSub, "pull", "test", auth.Topic("audit-eu")), auth.ErrDenied)
	assert.ErrorIs(t, g.Authorize(p, auth.ClassAdmin, "createTopic", "test"), auth.ErrDenied)

	// A Deny beats the prefix's Allow; UpdateACL replaces the rule.
	require.NoError(t, b.UpdateACL("alice1", []auth.Rule{{Resource: "Topic:audit-secret", Actions: []string{"All"}, Decision: "deny"}}))
	require.NoError(t, b.UpdateACL("alice1", []auth.Rule{{Resource: "Topic:orders", Actions: []string{"Sub"}}}))
	p, err = signIn(t, b, "alice1", "alicesecret")
	require.NoError(t, err)
	assert.ErrorIs(t, g.Authorize(p, auth.ClassPub, "send", "test", auth.Topic("audit-secret")), auth.ErrDenied)
	assert.ErrorIs(t, g.Authorize(p, auth.ClassPub, "send", "test", auth.Topic("orders")), auth.ErrDenied)

	entries, err := b.ListACL("alice1", "")
	require.NoError(t, err)
	assert.Equal(t, []broker.ACLEntry{
		{AccessKey: "alice1", Rule: auth.Rule{Resource: "Topic:orders", Actions: []string{"Sub"}, Decision: auth.Allow}},
		{AccessKey: "alice1", Rule: auth.Rule{Resource: "Group:billing", Actions: []string{"Sub"}, Decision: auth.Allow}},
		{AccessKey: "alice1", Rule: auth.Rule{Resource: "Topic:audit-*", Actions: []string{"Pub"}, Decision: auth.Allow}},
		{AccessKey: "alice1", Rule: auth.Rule{Resource: "Topic:audit-secret", Actions: []string{"All"}, Decision: auth.Deny}},
	}, entries)
	entries, err = b.ListACL("", "audit")
	require.NoError(t, err)
	assert.Len(t, entries, 2)
	_, err = b.ListACL("nobody1", "")
	assert.ErrorIs(t, err, auth.ErrNotFound)

	// A resource without a rule removes nothing; then one goes; then all.
	assert.ErrorIs(t, b.DeleteACL("alice1", []string{"Topic:audit-*", "Topic:nope"}), auth.ErrNotFound)
	require.NoError(t, b.DeleteACL("alice1", []string{"topic:audit-*"}))
	entries, err = b.ListACL("alice1", "")
	require.NoError(t, err)
	assert.Len(t, entries, 3)
	require.NoError(t, b.DeleteACL("alice1", nil))
	entries, err = b.ListACL("", "")
	require.NoError(t, err)
	assert.Empty(t, entries)
	assert.Empty(t, fileUsers(t, cfg.ACLFile).Users[1].Rules)
}

// A hand-written file spelt otherwise ("Super", "topic:", "deny") is
// rewritten as the verbs spell it at the first change, so that its rules
// are found by their resource.
func TestACLVerbsOnAHandWrittenFile(t *testing.T) {
	cfg := authConfig(t, `{"users": [{"accessKey": "admin1", "secretKey": "adminsecret", "role": "Super"},
		{"accessKey": "alice1", "secretKey": "alicesecret", "rules": [{"resource": "topic:orders", "actions": ["pub"], "decision": "deny"}]}]}`)
	b := openBroker(t, cfg)
	list, err := b.ListUsers("")
	require.NoError(t, err)
	assert.Equal(t, auth.RoleAdmin, list[0].Role)
	require.NoError(t, b.UpdateACL("alice1", []auth.Rule{{Resource: "Topic:orders", Actions: []string{"Pub"}}}))
	entries, err := b.ListACL("alice1", "")
	require.NoError(t, err)
	assert.Equal(t, []broker.ACLEntry{{AccessKey: "alice1", Rule: auth.Rule{Resource: "Topic:orders", Actions: []string{"Pub"}, Decision: auth.Allow}}}, entries)
	assert.ErrorIs(t, b.DeleteUser("admin1"), broker.ErrLastAdmin, "Super is admin")
	f := fileUsers(t, cfg.ACLFile)
	assert.Equal(t, auth.RoleAdmin, f.Users[0].Role)
	assert.Equal(t, "adminsecret", f.Users[0].SecretKey, "the secrets stay")
}

// The users file is reloaded when it is edited by hand.
func TestUsersFileReloads(t *testing.T) {
	cfg := authConfig(t, adminFile)
	b := openBroker(t, cfg)
	v := b.MetaVersion()
	edited := strings.Replace(adminFile, `]}`, `, {"accessKey": "carol1", "secretKey": "carolsecret"}]}`, 1)
	require.NoError(t, os.WriteFile(cfg.ACLFile, []byte(edited), 0o600))
	require.Eventually(t, func() bool { _, ok := b.Users().Users().Lookup("carol1"); return ok }, 30*time.Second, 10*time.Millisecond)
	assert.NotEqual(t, v, b.MetaVersion(), "a reload is a change the slaves copy")
	_, err := signIn(t, b, "carol1", "carolsecret")
	assert.NoError(t, err)
}

func TestUserVerbsNeedAuthenticationAndAMaster(t *testing.T) {
	off := openBroker(t, testConfig(t))
	cfg := authConfig(t, adminFile)
	cfg.BrokerRole, cfg.BrokerID = broker.Slave, 1
	slave := openBroker(t, cfg)
	rules := []auth.Rule{{Resource: "Topic:x", Actions: []string{"Pub"}}}
	user := auth.User{AccessKey: "alice1", SecretKey: "alicesecret"}
	for _, tc := range []struct {
		b    *broker.Broker
		want error
	}{{off, broker.ErrAuthenticationOff}, {slave, broker.ErrNotMaster}} {
		assert.ErrorIs(t, tc.b.CreateUser(user), tc.want)
		assert.ErrorIs(t, tc.b.UpdateUser("admin1", "adminsecret2", ""), tc.want)
		assert.ErrorIs(t, tc.b.DeleteUser("admin1"), tc.want)
		assert.ErrorIs(t, tc.b.CreateACL("admin1", rules), tc.want)
		assert.ErrorIs(t, tc.b.UpdateACL("admin1", rules), tc.want)
		assert.ErrorIs(t, tc.b.DeleteACL("admin1", nil), tc.want)
	}
	_, err := off.ListUsers("")
	assert.ErrorIs(t, err, broker.ErrAuthenticationOff)
	assert.ErrorContains(t, err, "authentication is off on this broker (authenticationEnabled=false)")
	_, err = off.GetUser("admin1")
	assert.ErrorIs(t, err, broker.ErrAuthenticationOff)
	_, err = off.ListACL("", "")
	assert.ErrorIs(t, err, broker.ErrAuthenticationOff)
	list, err := slave.ListUsers("")
	require.NoError(t, err, "a slave lists its users")
	assert.Len(t, list, 1)
}
