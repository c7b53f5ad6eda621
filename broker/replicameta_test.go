package broker_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/delivery"
	"github.com/gantrymq/gantry/broker/metadata"
)

// A slave that restores its master's metadata snapshot has the master's
// topics, groups and offsets (and keeps them across a restart), and its
// delivery state files; MetaVersion moves with a change.
func TestMetaSnapshotRestore(t *testing.T) {
	master := openBroker(t, testConfig(t))
	createTopic(t, master, "T", 4)
	require.NoError(t, master.PutGroup(metadata.DefaultSubscriptionGroup("G")))
	send(t, master, newMsg("T", 1, "a", ""), newMsg("T", 1, "b", ""))
	waitVisible(t, master, "T", 1, 2)
	v0 := master.MetaVersion()
	require.NoError(t, master.CommitOffset("G", "T", 1, 2))
	assert.NotEqual(t, v0, master.MetaVersion())
	v, snap, err := master.MetaSnapshot()
	require.NoError(t, err)
	assert.Equal(t, master.MetaVersion(), v)

	scfg := testConfig(t)
	slave := openBroker(t, scfg)
	require.NoError(t, slave.RestoreMeta(snap))
	tc, ok := slave.Topic("T")
	require.True(t, ok)
	assert.Equal(t, int32(4), tc.WriteQueueNums)
	_, ok = slave.Group("G")
	assert.True(t, ok)
	off, ok := slave.QueryOffset("G", "T", 1)
	assert.True(t, ok)
	assert.Equal(t, int64(2), off)
	assert.FileExists(t, filepath.Join(scfg.StorePathRootDir, "config", delivery.DLQStateFile))

	closeBroker(t, slave)
	again := openBroker(t, scfg)
	off, ok = again.QueryOffset("G", "T", 1)
	assert.True(t, ok)
	assert.Equal(t, int64(2), off)
}

// A damaged snapshot is refused with an error naming the problem and
// changes nothing.
func TestRestoreMetaRefusesBadSnapshots(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 2)
	for _, bad := range []string{`{"metadata":`, `{"metadata":{},"x":1}`, `{"metadata":{"topics":{"topicConfigTable":{}}}}`} {
		err := b.RestoreMeta([]byte(bad))
		require.Error(t, err, bad)
		_, ok := b.Topic("T")
		assert.True(t, ok, "a refused snapshot removed a topic: %s", bad)
	}
	err := b.RestoreMeta([]byte(`{"metadata":`))
	assert.ErrorIs(t, err, broker.ErrInvalidArgument)
}

// A master's users reach a slave with authentication on through the
// metadata snapshot (file and all); a slave with authentication off
// ignores them; MetaVersion moves with a user change.
func TestMetaSnapshotCarriesUsers(t *testing.T) {
	master := openBroker(t, authConfig(t, adminFile))
	v0 := master.MetaVersion()
	require.NoError(t, master.CreateUser(auth.User{AccessKey: "alice1", SecretKey: "alicesecret", Role: "cluster"}))
	v1 := master.MetaVersion()
	assert.NotEqual(t, v0, v1)
	require.NoError(t, master.CreateACL("alice1", []auth.Rule{{Resource: "Topic:orders", Actions: []string{"Pub"}}}))
	assert.NotEqual(t, v1, master.MetaVersion())
	v, snap, err := master.MetaSnapshot()
	require.NoError(t, err)
	assert.Equal(t, master.MetaVersion(), v)

	scfg := authConfig(t, `{"users": [{"accessKey": "slaveadmin", "secretKey": "slavesecret", "role": "admin"}]}`)
	scfg.BrokerRole, scfg.BrokerID = broker.Slave, 1
	slave := openBroker(t, scfg)
	require.NoError(t, slave.RestoreMeta(snap))
	p, err := signIn(t, slave, "alice1", "alicesecret")
	require.NoError(t, err)
	assert.Equal(t, auth.RoleCluster, p.Role())
	_, ok := slave.Users().Users().Lookup("slaveadmin")
	assert.False(t, ok, "the master's users replace the slave's")
	assert.Equal(t, []string{"admin1", "alice1"}, accessKeys(fileUsers(t, scfg.ACLFile)))
	entries, err := slave.ListACL("alice1", "")
	require.NoError(t, err)
	assert.Len(t, entries, 1)

	// The same users again (a snapshot for an offset) leave the file be.
	gen := slave.Users().Generation()
	require.NoError(t, slave.RestoreMeta(snap))
	assert.Equal(t, gen, slave.Users().Generation())

	off := openBroker(t, testConfig(t))
	require.NoError(t, off.RestoreMeta(snap), "a broker with authentication off ignores the users")
	assert.Nil(t, off.Users())

	// Users that do not load are refused and change nothing.
	for _, bad := range []string{`{"metadata":{},"users":{"users":[{"accessKey":"x"}]}}`, `{"metadata":{},"users":{"users":[]}}`} {
		err := slave.RestoreMeta([]byte(bad))
		assert.ErrorIs(t, err, broker.ErrInvalidArgument, bad)
		assert.ErrorContains(t, err, "metadata snapshot: users:", bad)
		_, ok := slave.Users().Users().Lookup("alice1")
		assert.True(t, ok, bad)
	}

	// A master with authentication off sends no users: the slave keeps its own.
	_, snap, err = off.MetaSnapshot()
	require.NoError(t, err)
	require.NoError(t, slave.RestoreMeta(snap))
	_, ok = slave.Users().Users().Lookup("alice1")
	assert.True(t, ok)
}

// FuzzRestoreMetaUsers: a master's snapshot (peer input) with any users
// part is taken or refused; a refused one leaves the slave's users as
// they were, and the slave always keeps at least one user.
func FuzzRestoreMetaUsers(f *testing.F) {
	for _, s := range []string{
		`{"users":[{"accessKey":"alice1","secretKey":"alicesecret","rules":[{"resource":"Topic:a*","actions":["Pub"]}]}]}`,
		`{"users":[{"accessKey":"admin1","secretKey":"adminsecret","role":"super"}]}`,
		`{"users":[]}`, `{"users":[{"accessKey":"x"}]}`, `{"users":null}`, `[]`, `"x"`, `{"users":[{"accessKey":"alice1","secretKey":"alicesecret","role":"root"}]}`,
	} {
		f.Add(s)
	}
	open := func(cfg broker.Config) *broker.Broker {
		b, err := broker.Open(context.Background(), cfg)
		require.NoError(f, err)
		f.Cleanup(func() { _ = b.Close(context.Background()) })
		return b
	}
	_, snap, err := open(broker.Config{StorePathRootDir: filepath.Join(f.TempDir(), "store"), StoreOverride: smallStore}).MetaSnapshot()
	require.NoError(f, err)
	var parts map[string]json.RawMessage
	require.NoError(f, json.Unmarshal(snap, &parts))
	scfg := broker.Config{StorePathRootDir: filepath.Join(f.TempDir(), "store"), StoreOverride: smallStore, BrokerRole: broker.Slave, BrokerID: 1}
	scfg.AuthenticationEnabled, scfg.ACLFile = true, filepath.Join(f.TempDir(), "acl.json")
	require.NoError(f, os.WriteFile(scfg.ACLFile, []byte(adminFile), 0o600))
	slave := open(scfg)
	f.Fuzz(func(t *testing.T, users string) {
		before, gen := slave.Users().Users().File(), slave.Users().Generation()
		err := slave.RestoreMeta([]byte(`{"metadata":` + string(parts["metadata"]) + `,"users":` + users + `}`))
		after := slave.Users().Users()
		assert.Positive(t, after.Len())
		if err != nil {
			assert.Equal(t, gen, slave.Users().Generation(), "a refused snapshot changed the users")
			assert.Equal(t, before, after.File())
		}
	})
}
