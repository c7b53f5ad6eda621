package embedded_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/remoting"
)

// configWrites counts what the broker writes under its config directory
// (the metadata files, their backups and temporary copies).
type configWrites struct {
	bytes, syncs atomic.Int64
}

// countingFS is the OS filesystem, counting the writes and syncs of files
// under config/.
type countingFS struct {
	fsx.FS
	n *configWrites
}

func (c countingFS) OpenFile(name string, flag int, perm fs.FileMode) (fsx.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.Contains(name, string(filepath.Separator)+"config"+string(filepath.Separator)) {
		return f, err
	}
	return countingFile{File: f, n: c.n}, nil
}

type countingFile struct {
	fsx.File
	n *configWrites
}

func (f countingFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(b, off)
	f.n.bytes.Add(int64(n))
	return n, err
}

func (f countingFile) Sync() error {
	f.n.syncs.Add(1)
	return f.File.Sync()
}

// heartbeatOfGroups is a HEART_BEAT whose client consumes topic in each of
// groups, with the body the official Go client sends.
func heartbeatOfGroups(t *testing.T, clientID, topic string, groups []string) *remoting.Command {
	t.Helper()
	type sub struct {
		Topic          string `json:"topic"`
		SubString      string `json:"subString"`
		ExpressionType string `json:"expressionType"`
	}
	type consumer struct {
		GroupName           string `json:"groupName"`
		ConsumeType         string `json:"consumeType"`
		MessageModel        string `json:"messageModel"`
		ConsumeFromWhere    string `json:"consumeFromWhere"`
		SubscriptionDataSet []sub  `json:"subscriptionDataSet"`
		UnitMode            bool   `json:"unitMode"`
	}
	body := struct {
		ClientID        string     `json:"clientID"`
		ConsumerDataSet []consumer `json:"consumerDataSet"`
	}{ClientID: clientID}
	for _, g := range groups {
		body.ConsumerDataSet = append(body.ConsumerDataSet, consumer{
			GroupName: g, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "Clustering", ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
			SubscriptionDataSet: []sub{{Topic: topic, SubString: "*", ExpressionType: "TAG"}},
		})
	}
	req := remoting.NewRequest(remoting.ReqHeartBeat, nil)
	var err error
	req.Body, err = json.Marshal(body)
	require.NoError(t, err)
	return req
}

func groupNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

// One HEART_BEAT listing 10,000 consumer groups creates them and their
// retry topics, registered with the nameserver, with one save of each
// metadata file: not one per group, which rewrites and fsyncs a growing
// topics.json once per group (docs/decisions/0003-heartbeat-groups-saved-once.md).
func TestHeartbeatOfManyGroupsSavesOnce(t *testing.T) {
	const n = 10_000
	var w configWrites
	c, _ := start(t, embedded.Options{Broker: func(bc *broker.Config) {
		bc.MaxGroupsPerHeartbeat = n
		bc.StoreOverride = func(sc *store.Config) { sc.FS = countingFS{FS: fsx.OS, n: &w} }
	}})
	cl, err := remoting.Dial(t.Context(), c.BrokerRemotingAddr(), remoting.DialOptions{})
	require.NoError(t, err)
	defer cl.Close()
	before, syncsBefore := w.bytes.Load(), w.syncs.Load()
	start := time.Now()
	// A save per group would take minutes: fail at a minute rather than
	// wait for it.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := cl.Invoke(ctx, heartbeatOfGroups(t, "10.0.0.1@many", "T", groupNames("G", n)))
	took := time.Since(start)
	require.NoError(t, err)
	require.Equal(t, remoting.ResSuccess, resp.ResponseCode(), resp.Remark)
	require.NoError(t, c.Broker().SaveMetadata()) // the groups, else saved with the offsets
	written, syncs := w.bytes.Load()-before, w.syncs.Load()-syncsBefore
	t.Logf("heartbeat of %d groups: %s, %d bytes written to config/ in %d fsyncs", n, took.Round(time.Millisecond), written, syncs)

	assert.Equal(t, n, len(c.Broker().Groups()))
	for _, g := range []string{"G00000", "G09999"} {
		_, ok := c.Broker().Topic(broker.RetryTopic(g))
		assert.True(t, ok, "retry topic of %s", g)
	}
	assert.Equal(t, c.BrokerRemotingAddr(), remotingRoute(t, c, "%RETRY%G09999"), "registered with the nameserver")
	// Each file is written (with its backup and temporary copy) a few
	// times at most, not once per group.
	files := int64(0)
	for _, name := range []string{metadata.TopicsFile, metadata.GroupsFile} {
		fi, err := os.Stat(filepath.Join(c.Broker().Config().StorePathRootDir, "config", name))
		require.NoError(t, err)
		files += fi.Size()
	}
	assert.Less(t, written, 8*files, "bytes written to config/ (the files hold %d)", files)
	assert.Less(t, syncs, int64(40), "fsyncs")
}

// A heartbeat listing more consumers than maxGroupsPerHeartbeat is refused
// whole, naming the key, before anything is created; past
// maxConsumerGroups, unknown groups are refused and the others served.
func TestHeartbeatGroupLimits(t *testing.T) {
	c, _ := start(t, embedded.Options{Broker: func(bc *broker.Config) { bc.MaxConsumerGroups = 5 }})
	addr := c.BrokerRemotingAddr()

	resp := remotingInvoke(t, addr, heartbeatOfGroups(t, "10.0.0.1@too-many", "T", groupNames("A", broker.DefaultMaxGroupsPerHeartbeat+1)))
	assert.NotEqual(t, remoting.ResSuccess, resp.ResponseCode())
	assert.Contains(t, resp.Remark, "a heartbeat of 1001 consumers: at most 1000 (maxGroupsPerHeartbeat)")
	assert.Zero(t, len(c.Broker().Groups()), "nothing created")
	assert.Empty(t, c.Broker().ConsumerList("A00000"))

	cl, err := remoting.Dial(t.Context(), addr, remoting.DialOptions{})
	require.NoError(t, err)
	defer cl.Close()
	resp, err = cl.Invoke(t.Context(), heartbeatOfGroups(t, "10.0.0.1@some", "T", groupNames("B", 3)))
	require.NoError(t, err)
	require.Equal(t, remoting.ResSuccess, resp.ResponseCode(), resp.Remark)
	resp, err = cl.Invoke(t.Context(), heartbeatOfGroups(t, "10.0.0.1@more", "T", append(groupNames("B", 3), groupNames("C", 4)...)))
	require.NoError(t, err)
	assert.NotEqual(t, remoting.ResSuccess, resp.ResponseCode())
	assert.Contains(t, resp.Remark, `group "C00002" not created: the broker has 5 groups, at most 5 (maxConsumerGroups)`)
	assert.Contains(t, resp.Remark, `"C00003"`)
	assert.NotContains(t, resp.Remark, `"C00001"`)
	assert.Equal(t, 5, len(c.Broker().Groups()))
	assert.Equal(t, []string{"10.0.0.1@more", "10.0.0.1@some"}, c.Broker().ConsumerList("B00002"), "known groups are served")
	assert.Equal(t, []string{"10.0.0.1@more"}, c.Broker().ConsumerList("C00001"))
	assert.Empty(t, c.Broker().ConsumerList("C00002"))
	_, ok := c.Broker().Topic(broker.RetryTopic("C00002"))
	assert.False(t, ok, "no retry topic for a group refused")

	// A group an administrator created is not refused, and counts.
	require.NoError(t, c.Broker().PutGroup(broker.DefaultSubscriptionGroup("Admin")))
	resp, err = cl.Invoke(t.Context(), heartbeatOfGroups(t, "10.0.0.1@admin", "T", []string{"Admin"}))
	require.NoError(t, err)
	require.Equal(t, remoting.ResSuccess, resp.ResponseCode(), resp.Remark)

	// The connection's consumers leave with it.
	require.NoError(t, cl.Close())
	require.Eventually(t, func() bool { return len(c.Broker().ConsumerList("B00002")) == 0 }, 10*time.Second, 5*time.Millisecond)
}
