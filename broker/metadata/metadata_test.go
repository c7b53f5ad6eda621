package metadata_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/internal/fsx"
)

func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config")
	m := open(t, testConfig(t, dir, nil))
	assert.Equal(t, allSources(metadata.SourceNone), sourcesOf(m.Report()))
	fill(t, m, 5)
	require.NoError(t, m.Close())

	m2 := open(t, testConfig(t, dir, nil))
	assert.Equal(t, allSources(metadata.SourceMain), sourcesOf(m2.Report()))
	assert.Equal(t, want(same(5)), stateOf(m2))
	assert.Equal(t, m.TopicsVersion(), m2.TopicsVersion())
	require.NoError(t, m2.Close())
}

func TestJSONShape(t *testing.T) {
	dir := t.TempDir()
	m := open(t, testConfig(t, dir, nil))
	fill(t, m, 3)
	require.NoError(t, m.Save())

	read := func(name string) map[string]any {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		var v map[string]any
		require.NoError(t, json.Unmarshal(b, &v), name)
		return v
	}
	topics := read(metadata.TopicsFile)
	topic := topics["topicConfigTable"].(map[string]any)["TopicA"].(map[string]any)
	assert.Equal(t, map[string]any{
		"topicName": "TopicA", "readQueueNums": 8.0, "writeQueueNums": 8.0, "perm": 6.0,
		"topicFilterType": "SINGLE_TAG", "topicSysFlag": 0.0, "order": false,
		"attributes": map[string]any{"v": "3", "+message.type": "NORMAL"},
	}, topic)
	version := topics["dataVersion"].(map[string]any)
	assert.Equal(t, 1_700_000_000_000.0, version["timestamp"])
	assert.Equal(t, 2.0, version["counter"], "one change per PutTopic")

	group := read(metadata.GroupsFile)["subscriptionGroupTable"].(map[string]any)["GroupA"].(map[string]any)
	assert.Equal(t, map[string]any{
		"groupName": "GroupA", "consumeEnable": true, "consumeFromMinEnable": false,
		"consumeBroadcastEnable": true, "consumeMessageOrderly": false, "retryQueueNums": 1.0,
		"retryMaxTimes": 3.0, "brokerId": 0.0, "whichBrokerWhenConsumeSlowly": 1.0,
		"notifyConsumerIdsChangedEnable": true,
	}, group)
	assert.Contains(t, read(metadata.GroupsFile), "dataVersion")

	assert.Equal(t, map[string]any{
		"offsetTable": map[string]any{
			"TopicA@GroupA": map[string]any{"0": 3.0, "1": 6.0, "7": 100.0},
		},
		"clientOffsetTable": map[string]any{
			"TopicA@GroupA@10.0.0.1@4242": map[string]any{"0": 9.0, "5": 5.0},
		},
	}, read(metadata.OffsetsFile))
	assert.Equal(t, map[string]any{"offsetTable": map[string]any{"1": 3.0, "3": 7.0, "18": 4.0}},
		read(metadata.DelayOffsetsFile))
}

func TestSaveKeepsBackup(t *testing.T) {
	dir := t.TempDir()
	m := open(t, testConfig(t, dir, nil))
	fill(t, m, 1)
	require.NoError(t, m.Save())
	v1 := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		v1[f] = b
		assert.NoFileExists(t, filepath.Join(dir, f+".bak"), "the first save has nothing to back up")
	}
	fill(t, m, 2)
	require.NoError(t, m.Save())
	for _, f := range files {
		bak, err := os.ReadFile(filepath.Join(dir, f+".bak"))
		require.NoError(t, err)
		assert.Equal(t, string(v1[f]), string(bak), f)
		assert.NoFileExists(t, filepath.Join(dir, f+".tmp"))
	}
}

func TestSaveWritesOnlyDirtyTables(t *testing.T) {
	mem := fsx.NewMemFS()
	m := open(t, testConfig(t, "/store/config", mem))
	fill(t, m, 1)
	require.NoError(t, m.Save())

	var mu sync.Mutex
	written := map[string]bool{}
	mem.SetHook(func(_ fsx.Op, path string) {
		mu.Lock()
		written[filepath.Base(path)] = true
		mu.Unlock()
	})
	require.NoError(t, m.Save())
	mu.Lock()
	assert.Empty(t, written, "nothing changed, nothing written")
	mu.Unlock()

	fill(t, m, 1) // the same values again change only topics' and groups' data versions
	require.NoError(t, m.CommitOffset("GroupA", "TopicA", 0, 1))
	require.NoError(t, m.SetDelayOffset(1, 1))
	assert.False(t, m.DeleteTopic("NoSuchTopic"))
	require.NoError(t, m.Save())
	mem.SetHook(nil)

	for name := range written {
		assert.True(t, strings.HasPrefix(name, metadata.TopicsFile) || strings.HasPrefix(name, metadata.GroupsFile) ||
			name == "config", "unexpected write to %s", name)
	}
	assert.True(t, written[metadata.TopicsFile+".tmp"])
}

func TestDataVersion(t *testing.T) {
	now := time.UnixMilli(1_000)
	cfg := testConfig(t, t.TempDir(), nil)
	cfg.Now = func() time.Time { return now }
	m := open(t, cfg)
	assert.Equal(t, metadata.DataVersion{}, m.TopicsVersion())

	require.NoError(t, m.PutTopic(wantTopics(1)[1]))
	assert.Equal(t, metadata.DataVersion{Timestamp: 1_000, Counter: 1}, m.TopicsVersion())
	now = time.UnixMilli(2_000)
	assert.True(t, m.DeleteTopic("TopicA"))
	assert.Equal(t, metadata.DataVersion{Timestamp: 2_000, Counter: 2}, m.TopicsVersion())
	now = time.UnixMilli(3_000)
	assert.False(t, m.DeleteTopic("TopicA"))
	assert.Equal(t, metadata.DataVersion{Timestamp: 2_000, Counter: 2}, m.TopicsVersion(), "no change, no bump")

	assert.Equal(t, metadata.DataVersion{}, m.GroupsVersion())
	require.NoError(t, m.PutGroup(metadata.DefaultSubscriptionGroup("G")))
	assert.Equal(t, metadata.DataVersion{Timestamp: 3_000, Counter: 1}, m.GroupsVersion())
	assert.False(t, m.DeleteGroup("Nope"))
	assert.Equal(t, metadata.DataVersion{Timestamp: 3_000, Counter: 1}, m.GroupsVersion(), "no change, no bump")
}

func TestTopicsAndGroups(t *testing.T) {
	m := open(t, testConfig(t, t.TempDir(), nil))
	require.NoError(t, m.PutTopic(metadata.TopicConfig{TopicName: "b", ReadQueueNums: 1, WriteQueueNums: 1}))
	require.NoError(t, m.PutTopic(metadata.TopicConfig{TopicName: "a", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}))
	names := []string{}
	for _, tc := range m.Topics() {
		names = append(names, tc.TopicName)
	}
	assert.Equal(t, []string{"a", "b"}, names)

	tc, ok := m.Topic("b")
	require.True(t, ok)
	assert.Equal(t, metadata.FilterSingleTag, tc.TopicFilterType, "the default filter type")
	assert.NotNil(t, tc.Attributes)
	tc.Attributes["x"] = "y"
	again, _ := m.Topic("b")
	assert.Empty(t, again.Attributes, "callers get copies")

	assert.True(t, m.DeleteTopic("a"))
	_, ok = m.Topic("a")
	assert.False(t, ok)

	require.NoError(t, m.PutGroup(metadata.DefaultSubscriptionGroup("G2")))
	require.NoError(t, m.PutGroup(metadata.DefaultSubscriptionGroup("G1")))
	groups := m.Groups()
	require.Len(t, groups, 2)
	assert.Equal(t, "G1", groups[0].GroupName)
	assert.True(t, m.DeleteGroup("G1"))
	assert.False(t, m.DeleteGroup("G1"))
	_, ok = m.Group("G1")
	assert.False(t, ok)
}

// PutTopics and PutGroups change their table once for all their entries
// (one data version), or not at all if one entry is invalid.
func TestPutMany(t *testing.T) {
	m := open(t, testConfig(t, t.TempDir(), nil))
	tcs := []metadata.TopicConfig{{TopicName: "a", ReadQueueNums: 1, WriteQueueNums: 1}, {TopicName: "b", ReadQueueNums: 2, WriteQueueNums: 2}}
	require.NoError(t, m.PutTopics(tcs))
	assert.Len(t, m.Topics(), 2)
	assert.Equal(t, int64(1), m.TopicsVersion().Counter, "one change")
	require.Error(t, m.PutTopics([]metadata.TopicConfig{{TopicName: "c", ReadQueueNums: 1, WriteQueueNums: 1}, {TopicName: "bad!"}}))
	_, ok := m.Topic("c")
	assert.False(t, ok, "all or nothing")
	require.NoError(t, m.PutTopics(nil))
	assert.Equal(t, int64(1), m.TopicsVersion().Counter, "nothing: no change")

	require.NoError(t, m.PutGroups([]metadata.SubscriptionGroup{metadata.DefaultSubscriptionGroup("G1"), metadata.DefaultSubscriptionGroup("G2")}))
	assert.Equal(t, 2, m.GroupCount())
	require.Error(t, m.PutGroups([]metadata.SubscriptionGroup{metadata.DefaultSubscriptionGroup("G3"), metadata.DefaultSubscriptionGroup("")}))
	assert.Equal(t, 2, m.GroupCount(), "all or nothing")
}

func TestGroupDefaultsWhenFieldsMissing(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, metadata.GroupsFile),
		[]byte(`{"subscriptionGroupTable": {"G": {"groupName": "G", "consumeBroadcastEnable": true}}}`), 0o644))
	m := open(t, testConfig(t, dir, nil))
	g, ok := m.Group("G")
	require.True(t, ok)
	want := metadata.DefaultSubscriptionGroup("G")
	want.ConsumeBroadcastEnable = true
	assert.Equal(t, want, g)
}

func TestOffsets(t *testing.T) {
	m := open(t, testConfig(t, t.TempDir(), nil))
	require.NoError(t, m.CommitOffset("G1", "T1", 0, 10))
	require.NoError(t, m.CommitOffset("G1", "T1", 3, 0))
	require.NoError(t, m.CommitOffset("G1", "T2", 0, 5))
	require.NoError(t, m.CommitOffset("G2", "T1", 0, 7))
	require.NoError(t, m.CommitOffset("G1", "T1", 0, 4), "offsets may move back (reset by time)")

	off, ok := m.Offset("G1", "T1", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(4), off)
	_, ok = m.Offset("G1", "T1", 1)
	assert.False(t, ok)
	got := m.Offsets("G1", "T1")
	assert.Equal(t, map[int32]int64{0: 4, 3: 0}, got)
	got[0] = 99
	assert.Equal(t, map[int32]int64{0: 4, 3: 0}, m.Offsets("G1", "T1"), "callers get copies")
	assert.Empty(t, m.Offsets("G9", "T1"))

	m.DeleteOffsets("G1", "T2")
	assert.Empty(t, m.Offsets("G1", "T2"))
	assert.NotEmpty(t, m.Offsets("G1", "T1"))
	m.DeleteOffsets("G1", "")
	assert.Empty(t, m.Offsets("G1", "T1"))
	assert.Equal(t, map[int32]int64{0: 7}, m.Offsets("G2", "T1"), "other groups keep theirs")

	require.NoError(t, m.SetDelayOffset(2, 17))
	off, ok = m.DelayOffset(2)
	assert.True(t, ok)
	assert.Equal(t, int64(17), off)
	_, ok = m.DelayOffset(3)
	assert.False(t, ok)
}

func TestValidation(t *testing.T) {
	topic := func(f func(*metadata.TopicConfig)) metadata.TopicConfig {
		tc := metadata.TopicConfig{TopicName: "T", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}
		f(&tc)
		return tc
	}
	group := func(f func(*metadata.SubscriptionGroup)) metadata.SubscriptionGroup {
		g := metadata.DefaultSubscriptionGroup("G")
		f(&g)
		return g
	}
	long := strings.Repeat("a", 128)
	tests := []struct {
		name    string
		do      func(m *metadata.Metadata) error
		wantErr string // "" means valid
	}{
		{"topic name with space", func(m *metadata.Metadata) error {
			return m.PutTopic(topic(func(tc *metadata.TopicConfig) { tc.TopicName = "bad topic!" }))
		}, `invalid topic name "bad topic!"`},
		{"empty topic name", func(m *metadata.Metadata) error {
			return m.PutTopic(topic(func(tc *metadata.TopicConfig) { tc.TopicName = "" }))
		}, `invalid topic name ""`},
		{"topic name too long", func(m *metadata.Metadata) error {
			return m.PutTopic(topic(func(tc *metadata.TopicConfig) { tc.TopicName = long }))
		}, long},
		{"topic name of 127", func(m *metadata.Metadata) error {
			return m.PutTopic(topic(func(tc *metadata.TopicConfig) { tc.TopicName = long[:127] }))
		}, ""},
		{"retry topic", func(m *metadata.Metadata) error {
			return m.PutTopic(topic(func(tc *metadata.TopicConfig) { tc.TopicName = "%RETRY%G-1_x" }))
		}, ""},
		{"no read queues", func(m *metadata.Metadata) error {
			return m.PutTopic(topic(func(tc *metadata.TopicConfig) { tc.ReadQueueNums = 0 }))
		}, `readQueueNums 0 of topic "T"`},
		{"too many write queues", func(m *metadata.Metadata) error {
			return m.PutTopic(topic(func(tc *metadata.TopicConfig) { tc.WriteQueueNums = 1025 }))
		}, `writeQueueNums 1025 of topic "T"`},
		{"perm", func(m *metadata.Metadata) error {
			return m.PutTopic(topic(func(tc *metadata.TopicConfig) { tc.Perm = 8 }))
		}, `perm 8 of topic "T"`},
		{"filter type", func(m *metadata.Metadata) error {
			return m.PutTopic(topic(func(tc *metadata.TopicConfig) { tc.TopicFilterType = "SQL" }))
		}, `topicFilterType "SQL"`},
		{"group name", func(m *metadata.Metadata) error {
			return m.PutGroup(group(func(g *metadata.SubscriptionGroup) { g.GroupName = "a@b" }))
		}, `invalid group name "a@b"`},
		{"retryMaxTimes too big", func(m *metadata.Metadata) error {
			return m.PutGroup(group(func(g *metadata.SubscriptionGroup) { g.RetryMaxTimes = 1001 }))
		}, `retryMaxTimes 1001 of group "G"`},
		{"retryMaxTimes -1", func(m *metadata.Metadata) error {
			return m.PutGroup(group(func(g *metadata.SubscriptionGroup) { g.RetryMaxTimes = -1 }))
		}, ""},
		{"retryMaxTimes -2", func(m *metadata.Metadata) error {
			return m.PutGroup(group(func(g *metadata.SubscriptionGroup) { g.RetryMaxTimes = -2 }))
		}, `retryMaxTimes -2`},
		{"retryQueueNums", func(m *metadata.Metadata) error {
			return m.PutGroup(group(func(g *metadata.SubscriptionGroup) { g.RetryQueueNums = -1 }))
		}, `retryQueueNums -1`},
		{"negative offset", func(m *metadata.Metadata) error { return m.CommitOffset("G", "T", 0, -1) },
			`offset -1 of T@G queue 0`},
		{"negative queue", func(m *metadata.Metadata) error { return m.CommitOffset("G", "T", -1, 0) },
			`queue id -1 of T@G`},
		{"offset of a bad group", func(m *metadata.Metadata) error { return m.CommitOffset("G G", "T", 0, 0) },
			`invalid group name "G G"`},
		{"offset of a bad topic", func(m *metadata.Metadata) error { return m.CommitOffset("G", "T@x", 0, 0) },
			`invalid topic name "T@x"`},
		{"client offset without a client", func(m *metadata.Metadata) error { return m.CommitClientOffset("G", "", "T", 0, 0) },
			`client id of T@G: empty`},
		{"negative client offset", func(m *metadata.Metadata) error { return m.CommitClientOffset("G", "c@1", "T", 0, -1) },
			`offset -1 of T@G queue 0`},
		{"client offset of a bad group", func(m *metadata.Metadata) error { return m.CommitClientOffset("G@x", "c", "T", 0, 0) },
			`invalid group name "G@x"`},
		{"delay level 0", func(m *metadata.Metadata) error { return m.SetDelayOffset(0, 1) }, `delay level 0`},
		{"negative delay offset", func(m *metadata.Metadata) error { return m.SetDelayOffset(2, -5) },
			`offset -5 of delay level 2`},
	}
	m := open(t, testConfig(t, t.TempDir(), nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do(m)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, metadata.ErrInvalid)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
	assert.ErrorIs(t, metadata.ValidTopicName("bad topic!"), metadata.ErrInvalid)
	assert.NoError(t, metadata.ValidTopicName("%DLQ%G"))
}

func TestConfigValidate(t *testing.T) {
	_, err := metadata.Open(metadata.Config{})
	assert.ErrorContains(t, err, "metadata: Dir is required")
}

func TestConcurrentUse(t *testing.T) {
	dir := t.TempDir()
	m := open(t, testConfig(t, dir, nil))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				assert.NoError(t, m.CommitOffset("G", "T", int32(w), int64(i)))
				if i%50 == 0 {
					assert.NoError(t, m.PutTopic(metadata.TopicConfig{TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4}))
				}
				m.Offsets("G", "T")
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			assert.NoError(t, m.Save())
		}
	})
	wg.Wait()
	require.NoError(t, m.Close())

	m2 := open(t, testConfig(t, dir, nil))
	assert.Equal(t, map[int32]int64{0: 199, 1: 199, 2: 199, 3: 199}, m2.Offsets("G", "T"),
		"commits made during a save are saved by the next one")
}

func TestOffsetKeys(t *testing.T) {
	m := open(t, testConfig(t, t.TempDir(), nil))
	require.NoError(t, m.CommitOffset("g2", "T1", 0, 1))
	require.NoError(t, m.CommitOffset("g1", "T2", 0, 1))
	require.NoError(t, m.CommitOffset("g1", "T1", 3, 1))
	assert.Equal(t, [][2]string{{"g1", "T1"}, {"g1", "T2"}, {"g2", "T1"}}, m.OffsetKeys("", ""))
	assert.Equal(t, [][2]string{{"g1", "T1"}, {"g1", "T2"}}, m.OffsetKeys("g1", ""))
	assert.Equal(t, [][2]string{{"g1", "T1"}, {"g2", "T1"}}, m.OffsetKeys("", "T1"))
	assert.Empty(t, m.OffsetKeys("nope", ""))
}

// Broadcast consumers' offsets: one set per client, keyed by a client id
// that may hold '@', deleted with their group's, and left out of the file
// while there are none (RocketMQ's shape).
func TestClientOffsets(t *testing.T) {
	dir := t.TempDir()
	m := open(t, testConfig(t, dir, nil))
	require.NoError(t, m.CommitOffset("G1", "T1", 0, 1))
	require.NoError(t, m.Save())
	b, err := os.ReadFile(filepath.Join(dir, metadata.OffsetsFile))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "clientOffsetTable", "absent while empty")

	const c1, c2 = "10.0.0.1@100", "10.0.0.2@200@unit"
	require.NoError(t, m.CommitClientOffset("G1", c1, "T1", 0, 10))
	require.NoError(t, m.CommitClientOffset("G1", c1, "T1", 2, 12))
	require.NoError(t, m.CommitClientOffset("G1", c2, "T1", 0, 20))
	require.NoError(t, m.CommitClientOffset("G1", c1, "T2", 0, 30))
	require.NoError(t, m.CommitClientOffset("G2", c1, "T1", 0, 40))
	off, ok := m.ClientOffset("G1", c2, "T1", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(20), off)
	_, ok = m.ClientOffset("G1", c2, "T1", 2)
	assert.False(t, ok)
	_, ok = m.ClientOffset("G1", "10.0.0.2@200", "T1", 0)
	assert.False(t, ok, "a prefix of a client id is another client")
	assert.Equal(t, map[int32]int64{0: 1}, m.Offsets("G1", "T1"), "the group's offsets are apart")
	require.NoError(t, m.Close())

	m = open(t, testConfig(t, dir, nil))
	assert.Equal(t, map[int32]int64{0: 10, 2: 12}, m.ClientOffsets("G1", c1, "T1"), "reloaded")
	assert.Equal(t, map[int32]int64{0: 20}, m.ClientOffsets("G1", c2, "T1"))

	m.DeleteOffsets("G1", "T1")
	assert.Empty(t, m.ClientOffsets("G1", c1, "T1"))
	assert.Empty(t, m.ClientOffsets("G1", c2, "T1"))
	assert.Equal(t, map[int32]int64{0: 30}, m.ClientOffsets("G1", c1, "T2"), "other topics keep theirs")
	m.DeleteOffsets("G1", "")
	assert.Empty(t, m.ClientOffsets("G1", c1, "T2"))
	assert.Equal(t, map[int32]int64{0: 40}, m.ClientOffsets("G2", c1, "T1"), "other groups keep theirs")
	require.NoError(t, m.Close())
	m = open(t, testConfig(t, dir, nil))
	assert.Empty(t, m.ClientOffsets("G1", c1, "T2"), "the deletion was saved")
	assert.Equal(t, map[int32]int64{0: 40}, m.ClientOffsets("G2", c1, "T1"))
}
