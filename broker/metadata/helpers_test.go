package metadata_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/internal/fsx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var files = []string{metadata.TopicsFile, metadata.GroupsFile, metadata.OffsetsFile, metadata.DelayOffsetsFile}

func testConfig(t *testing.T, dir string, fsys fsx.FS) metadata.Config {
	return metadata.Config{
		Dir:    dir,
		FS:     fsys,
		Now:    func() time.Time { return time.UnixMilli(1_700_000_000_000) },
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
}

func open(t *testing.T, cfg metadata.Config) *metadata.Metadata {
	t.Helper()
	m, err := metadata.Open(cfg)
	require.NoError(t, err)
	return m
}

// versions is one version number per table, in the order of files.
type versions [4]int

func same(v int) versions { return versions{v, v, v, v} }

// fill sets every table to its content at version v.
func fill(t *testing.T, m *metadata.Metadata, v int) {
	t.Helper()
	fillTables(t, m, same(v))
}

func fillTables(t *testing.T, m *metadata.Metadata, v versions) {
	t.Helper()
	for _, tc := range wantTopics(v[0]) {
		require.NoError(t, m.PutTopic(tc))
	}
	for _, g := range wantGroups(v[1]) {
		require.NoError(t, m.PutGroup(g))
	}
	for qid, off := range wantOffsets(v[2]) {
		require.NoError(t, m.CommitOffset("GroupA", "TopicA", qid, off))
	}
	for qid, off := range wantClientOffsets(v[2]) {
		require.NoError(t, m.CommitClientOffset("GroupA", clientA, "TopicA", qid, off))
	}
	for level, off := range wantDelays(v[3]) {
		require.NoError(t, m.SetDelayOffset(level, off))
	}
}

func wantTopics(v int) []metadata.TopicConfig {
	return []metadata.TopicConfig{
		{TopicName: "%RETRY%GroupA", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6,
			TopicFilterType: metadata.FilterSingleTag, Attributes: map[string]string{}},
		{TopicName: "TopicA", ReadQueueNums: 8, WriteQueueNums: 8, Perm: metadata.PermRead | metadata.PermWrite,
			TopicFilterType: metadata.FilterSingleTag, Order: v%2 == 0,
			Attributes: map[string]string{"v": strconv.Itoa(v), "+message.type": "NORMAL"}},
	}
}

func wantGroups(v int) []metadata.SubscriptionGroup {
	g := metadata.DefaultSubscriptionGroup("GroupA")
	g.RetryMaxTimes = int32(v % 1000)
	g.ConsumeBroadcastEnable = v%2 == 1
	return []metadata.SubscriptionGroup{g}
}

func wantOffsets(v int) map[int32]int64 {
	return map[int32]int64{0: int64(v), 1: int64(2 * v), 7: 100}
}

// clientA is a broadcast consumer of GroupA; its id holds '@' as RocketMQ's do.
const clientA = "10.0.0.1@4242"

func wantClientOffsets(v int) map[int32]int64 {
	return map[int32]int64{0: int64(3 * v), 5: int64(v + 2)}
}

func wantDelays(v int) map[int]int64 { return map[int]int64{1: int64(v), 3: 7, 18: int64(v + 1)} }

// state is everything a test reads back from Metadata.
type state struct {
	Topics        []metadata.TopicConfig
	Groups        []metadata.SubscriptionGroup
	Offsets       map[int32]int64
	ClientOffsets map[int32]int64 // clientA's
	Delays        map[int]int64
}

func want(v versions) state {
	return state{wantTopics(v[0]), wantGroups(v[1]), wantOffsets(v[2]), wantClientOffsets(v[2]), wantDelays(v[3])}
}

func stateOf(m *metadata.Metadata) state {
	s := state{Topics: m.Topics(), Groups: m.Groups(), Offsets: m.Offsets("GroupA", "TopicA"),
		ClientOffsets: m.ClientOffsets("GroupA", clientA, "TopicA"), Delays: map[int]int64{}}
	for level := 1; level <= 18; level++ {
		if off, ok := m.DelayOffset(level); ok {
			s.Delays[level] = off
		}
	}
	return s
}

// versionOf reads each table's version marker; -1 means the table is empty.
func versionOf(m *metadata.Metadata) versions {
	v := versions{-1, -1, -1, -1}
	if tc, ok := m.Topic("TopicA"); ok {
		v[0], _ = strconv.Atoi(tc.Attributes["v"])
	}
	if g, ok := m.Group("GroupA"); ok {
		v[1] = int(g.RetryMaxTimes)
	}
	if off, ok := m.Offset("GroupA", "TopicA", 0); ok {
		v[2] = int(off)
	}
	if off, ok := m.DelayOffset(1); ok {
		v[3] = int(off)
	}
	return v
}

// syncBuffer is a log sink that a test reads after the code under test wrote.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// savedTwice returns a directory whose files hold version 2 and whose
// backups hold version 1.
func savedTwice(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "config")
	m := open(t, testConfig(t, dir, nil))
	for v := 1; v <= 2; v++ {
		fill(t, m, v)
		require.NoError(t, m.Save(), "version %d", v)
	}
	require.NoError(t, m.Close())
	return dir
}

func sourcesOf(r metadata.LoadReport) map[string]metadata.Source {
	out := map[string]metadata.Source{}
	for _, f := range r.Files {
		out[filepath.Base(f.Path)] = f.Source
	}
	return out
}

func allSources(src metadata.Source) map[string]metadata.Source {
	out := map[string]metadata.Source{}
	for _, f := range files {
		out[f] = src
	}
	return out
}

func fileIndex(name string) int {
	for i, f := range files {
		if f == name {
			return i
		}
	}
	panic(fmt.Sprintf("unknown file %s", name))
}
