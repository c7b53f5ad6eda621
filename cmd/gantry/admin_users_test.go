package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/embedded"
)

// initACL writes a new ACL file with the admin user admin1 through
// gantry admin initAcl, as an operator bootstraps one.
func initACL(t *testing.T, path string) {
	t.Helper()
	code, out, errOut := execute(t, "admin", "initAcl", "--file", path, "--access-key", "admin1", "--secret-key", "adminsecret")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "wrote "+path+": admin user admin1 (give the broker aclFile="+path+" and authenticationEnabled=true)\n", out)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestInitACL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config", "acl.json")
	initACL(t, path)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	users, err := auth.ParseFile(data)
	require.NoError(t, err)
	assert.Equal(t, auth.File{Users: []auth.User{{AccessKey: "admin1", SecretKey: "adminsecret", Role: auth.RoleAdmin}}}, users.File())

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--file", path, "--access-key", "other1", "--secret-key", "othersecret"}, exitProblems, path + " exists"},
		{[]string{"--file", path + ".2"}, exitUsage, "the admin user's keys are missing"},
		{[]string{"--file", path + ".2", "--access-key", "other1"}, exitUsage, "--secret-key (or $GANTRY_SECRET_KEY) is missing"},
		{[]string{"--file", path + ".2", "--access-key", "ab", "--secret-key", "othersecret"}, exitProblems, "accessKey: want 6 to 128 characters"},
		{[]string{"--access-key", "other1", "--secret-key", "othersecret"}, exitUsage, `"file" not set`},
	} {
		code, _, errOut := execute(t, append([]string{"admin", "initAcl"}, tc.args...)...)
		assert.Equal(t, tc.code, code, "%q", tc.args)
		assert.Contains(t, errOut, tc.want, "%q", tc.args)
	}
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, data, after, "an existing file is not touched")
	assert.NoFileExists(t, path+".2")
}

// The user and ACL verbs against a master and its slave with
// authentication on, started from files initAcl wrote: the admin's keys
// by flags and by environment, the tables, refusals naming the problem,
// the new user signing in with its rights, and the slave getting the
// master's users.
func TestAdminUserVerbs(t *testing.T) {
	dir := t.TempDir()
	masterACL, slaveACL := filepath.Join(dir, "master-acl.json"), filepath.Join(dir, "slave-acl.json")
	initACL(t, masterACL)
	initACL(t, slaveACL)
	c, err := embedded.Start(t.Context(), embedded.Options{
		Slaves: 1,
		Broker: func(bc *broker.Config) {
			bc.MappedFileSizeCommitLog = 4 << 20 // a slave's segments must be its master's size
			bc.AuthenticationEnabled, bc.ACLFile = true, masterACL
			bc.InnerAccessKey, bc.InnerSecretKey = "admin1", "adminsecret"
		},
		Slave: func(_ int64, bc *broker.Config) { bc.ACLFile = slaveACL },
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	admin := func(args ...string) (int, string, string) {
		return execute(t, append([]string{"admin", "-n", c.NameServerAddr(), "--access-key", "admin1", "--secret-key", "adminsecret"}, args...)...)
	}

	code, out, errOut := admin("createUser", "-u", "alice1", "-p", "alicesecret")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "create user alice1 success: role none\n", out)
	code, _, errOut = admin("createUser", "-u", "alice1", "-p", "alicesecret")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, `user "alice1"`)
	assert.Contains(t, errOut, "already exists")
	code, _, errOut = admin("createUser", "-u", "bob", "-p", "bobsecret")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, "accessKey: want 6 to 128 characters, got 3")
	code, _, errOut = admin("createUser", "-u", "bob123", "-p", "bobsecret", "-t", "root")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, `role "root": want admin, cluster or none`)

	code, out, errOut = admin("updateUser", "-u", "alice1", "-p", "alicesecret2", "-t", "cluster")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "update user alice1 success: secret key changed, role cluster\n", out)
	code, _, errOut = admin("updateUser", "-u", "alice1")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "nothing to change")
	code, out, errOut = admin("updateUser", "-u", "alice1", "-t", "none")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "update user alice1 success: role none\n", out)

	code, out, errOut = admin("createAcl", "-s", "User:alice1", "-r", "Topic:orders,Group:billing", "--actions", "Pub,Sub")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "create acl success: alice1 Allow Pub,Sub on Topic:orders, Group:billing\n", out)
	code, _, errOut = admin("createAcl", "-s", "alice1", "-r", "Topic:orders", "--actions", "Pub")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, "has a rule on Topic:orders (updateAcl changes it)")
	code, _, errOut = admin("createAcl", "-s", "alice1", "-r", "Queue:x", "--actions", "Pub")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, "want Topic:<name>, Group:<name>")
	code, _, errOut = admin("createAcl", "-s", "alice1", "-r", ",", "--actions", "Pub")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "-r (resources) and --actions need at least one value each")
	code, _, errOut = admin("createAcl", "-s", "nobody1", "-r", "Topic:x", "--actions", "Pub")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, `user "nobody1"`)
	code, out, errOut = admin("updateAcl", "-s", "alice1", "-r", "Topic:orders-eu*", "--actions", "Pub", "-d", "Deny")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "update acl success: alice1 Deny Pub on Topic:orders-eu*\n", out)

	// The admin's keys from the environment.
	t.Setenv("GANTRY_ACCESS_KEY", "admin1")
	t.Setenv("GANTRY_SECRET_KEY", "adminsecret")
	code, out, errOut = execute(t, "admin", "-n", c.NameServerAddr(), "listUser")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `^#Broker Addr\s+#Access Key\s+#Role\s+#Rules\n`+
		`127\.0\.0\.1:\d+\s+admin1\s+admin\s+0\n`+
		`127\.0\.0\.1:\d+\s+alice1\s+none\s+3\n$`, out)
	assert.NotContains(t, out, "secret")
	code, out, errOut = admin("listUser", "-f", "nobody")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "no user found\n", out)
	code, out, errOut = admin("getUser", "-u", "alice1", "-b", c.BrokerAddr())
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `^access key  alice1\nrole        none\n#Resource\s+#Actions\s+#Decision\n`+
		`Topic:orders\s+All\s+Allow\nGroup:billing\s+All\s+Allow\nTopic:orders-eu\*\s+Pub\s+Deny\n$`, out)
	code, out, errOut = admin("listAcl", "-s", "alice1", "-r", "orders")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `^#Broker Addr\s+#Access Key\s+#Resource\s+#Actions\s+#Decision\n`+
		`127\.0\.0\.1:\d+\s+alice1\s+Topic:orders\s+All\s+Allow\n`+
		`127\.0\.0\.1:\d+\s+alice1\s+Topic:orders-eu\*\s+Pub\s+Deny\n$`, out)

	// alice1 signs in with her rights.
	g := c.Broker().Guard()
	signer, err := auth.NewSigner("alice1", "alicesecret2")
	require.NoError(t, err)
	date, authz := signer.SignGRPC("/gantry.v1.Messaging/Send", time.Now())
	p, err := g.GRPC("/gantry.v1.Messaging/Send", date, authz, "test")
	require.NoError(t, err)
	assert.NoError(t, g.Authorize(p, auth.ClassPub, "send", "test", auth.Topic("orders")))
	assert.NoError(t, g.Authorize(p, auth.ClassSub, "pull", "test", auth.Topic("%RETRY%billing"), auth.Group("billing")))
	assert.ErrorIs(t, g.Authorize(p, auth.ClassPub, "send", "test", auth.Topic("orders-eu-1")), auth.ErrDenied)
	assert.ErrorIs(t, g.Authorize(p, auth.ClassAdmin, "createTopic", "test"), auth.ErrDenied)

	// The slave has the master's users, its file too.
	slave := c.SlaveServer(1).Broker()
	require.Eventually(t, func() bool {
		u, err := slave.GetUser("alice1")
		return err == nil && len(u.Rules) == 3
	}, 30*time.Second, 10*time.Millisecond, "the slave never got the master's users")
	data, err := os.ReadFile(slaveACL)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"secretKey": "alicesecret2"`)
	code, _, errOut = admin("createUser", "-u", "carol1", "-p", "carolsecret", "-b", c.SlaveServer(1).GRPCAddr())
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, "not master")

	code, out, errOut = admin("deleteAcl", "-s", "alice1", "-r", "Topic:orders")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "delete acl success: alice1 on Topic:orders\n", out)
	code, _, errOut = admin("deleteAcl", "-s", "alice1", "-r", "Topic:orders")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, `user "alice1" has no rule on Topic:orders`)
	code, out, errOut = admin("deleteAcl", "-s", "alice1")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "delete acl success: every rule of alice1\n", out)
	code, out, errOut = admin("listAcl")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "no rule found\n", out)
	code, out, errOut = admin("deleteUser", "-u", "alice1")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "delete user alice1 success\n", out)
	code, _, errOut = admin("deleteUser", "-u", "admin1")
	assert.Equal(t, exitProblems, code)
	assert.Contains(t, errOut, `user "admin1" is the only admin`)
	_, err = signIn(c, "alice1", "alicesecret2")
	assert.ErrorIs(t, err, auth.ErrUnauthenticated)

	code, _, errOut = execute(t, "admin", "-n", c.NameServerAddr(), "--access-key", "admin1", "--secret-key", "", "listUser")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--secret-key (or $GANTRY_SECRET_KEY) is missing")
}

func signIn(c *embedded.Cluster, ak, sk string) (*auth.Principal, error) {
	s, err := auth.NewSigner(ak, sk)
	if err != nil {
		return nil, err
	}
	date, authz := s.SignGRPC("/gantry.v1.Admin/ListUsers", time.Now())
	return c.Broker().Guard().GRPC("/gantry.v1.Admin/ListUsers", date, authz, "test")
}

// Against a broker with authentication off the verbs say so.
func TestAdminUserVerbsWithAuthenticationOff(t *testing.T) {
	c, err := embedded.Start(t.Context(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	for _, args := range [][]string{
		{"listUser"},
		{"createUser", "-u", "alice1", "-p", "alicesecret"},
		{"listAcl", "-s", "alice1"},
	} {
		code, out, errOut := execute(t, append([]string{"admin", "-n", c.NameServerAddr()}, args...)...)
		assert.Equal(t, exitProblems, code, "%q", args)
		assert.Regexp(t, regexp.MustCompile(`FailedPrecondition: .*authentication is off on this broker \(authenticationEnabled=false\)`), errOut, "%q", args)
		assert.Empty(t, out, "%q", args)
	}
}
