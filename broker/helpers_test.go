package broker_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/internal/testutil"
	"github.com/gantrymq/gantry/message"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// smallStore is store_test.go's testConfig: small files.
func smallStore(sc *store.Config) {
	sc.QueueEntriesPerFile, sc.IndexSlots, sc.IndexEntries = 64, 101, 400
	sc.Log.SegmentBytes, sc.Log.CleanInterval = 64<<10, -1
}

func testConfig(t *testing.T) broker.Config {
	return broker.Config{
		StorePathRootDir: filepath.Join(t.TempDir(), "store"),
		Logger:           slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		StoreOverride:    smallStore,
	}
}

// openBroker opens a broker that the test's cleanup closes.
func openBroker(t *testing.T, cfg broker.Config) *broker.Broker {
	t.Helper()
	b, err := broker.Open(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { closeBroker(t, b) })
	return b
}

// closeBroker closes b; closing it again is fine.
func closeBroker(t *testing.T, b *broker.Broker) {
	t.Helper()
	if err := b.Close(context.Background()); err != nil && !errors.Is(err, broker.ErrShuttingDown) {
		t.Errorf("close: %v", err)
	}
}

func createTopic(t *testing.T, b *broker.Broker, name string, queues int32) {
	t.Helper()
	require.NoError(t, b.CreateOrUpdateTopic(metadata.TopicConfig{
		TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: metadata.PermRead | metadata.PermWrite,
	}))
}

func newMsg(topic string, queueID int32, body, tag string) *message.Message {
	m := &message.Message{Topic: topic, QueueID: queueID, Body: []byte(body), BornTimestamp: 1}
	if tag != "" {
		m.Properties = message.Properties{{Key: message.PropTags, Value: tag}}
	}
	return m
}

func send(t *testing.T, b *broker.Broker, msgs ...*message.Message) []broker.SendResult {
	t.Helper()
	res, err := b.Send(t.Context(), msgs[0].Topic, msgs)
	require.NoError(t, err)
	return res
}

// pull pulls without holding and decodes what it got.
func pull(t *testing.T, b *broker.Broker, req broker.PullRequest) (broker.PullResult, []*message.Message) {
	t.Helper()
	res, err := b.Pull(t.Context(), req)
	require.NoError(t, err)
	return res, decode(t, &res)
}

// decode decodes and releases res's records.
func decode(t *testing.T, res *broker.PullResult) []*message.Message {
	t.Helper()
	defer res.Release()
	var out []*message.Message
	for _, r := range res.Records {
		m, _, err := message.Decode(r.B)
		require.NoError(t, err)
		out = append(out, m)
	}
	return out
}

func bodies(ms []*message.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Body))
	}
	return out
}

// waitVisible waits until a queue holds n messages.
func waitVisible(t *testing.T, b *broker.Broker, topic string, queueID int32, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, maxOff := b.Store().QueueOffsets(topic, queueID)
		return maxOff >= n
	}, 5*time.Second, time.Millisecond)
}

// fakeClock is a settable clock.
type fakeClock = testutil.Clock

func newFakeClock() *fakeClock { return testutil.NewClock(time.UnixMilli(1_700_000_000_000)) }

// fileContains reports whether the consumer offsets file holds s.
func fileContains(t *testing.T, cfg broker.Config, s string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cfg.StorePathRootDir, "config", metadata.OffsetsFile))
	return err == nil && strings.Contains(string(b), s)
}
