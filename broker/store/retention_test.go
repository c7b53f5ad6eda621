package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// When retention deletes log segments, the consume-queue and index files
// wholly below the log's new min offset go too, and each queue's min
// offset moves to its first message still in the log.
func TestRetentionTrimsQueuesAndIndex(t *testing.T) {
	mem := fsx.NewMemFS()
	cfg := testConfig(t, "/store", mem)
	cfg.QueueEntriesPerFile = 16
	cfg.IndexEntries = 100
	cfg.Log.FileReservedTime = time.Nanosecond
	cfg.Log.DeleteWhen = "0;1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18;19;20;21;22;23"
	s := openStore(t, cfg)
	defer func() { _ = s.Close() }()
	res := putAll(t, s, 0, 3000)
	waitDispatched(t, s)
	cqBefore, err := mem.ReadDir("/store/consumequeue/Orders/0")
	require.NoError(t, err)
	idxBefore, err := mem.ReadDir("/store/index")
	require.NoError(t, err)

	cr, err := s.CommitLog().Clean()
	require.NoError(t, err)
	require.NotZero(t, cr.Deleted, "segments expired")
	logMin := s.CommitLog().MinOffset()
	require.NoError(t, s.Trim())

	cqAfter, err := mem.ReadDir("/store/consumequeue/Orders/0")
	require.NoError(t, err)
	idxAfter, err := mem.ReadDir("/store/index")
	require.NoError(t, err)
	assert.Less(t, len(cqAfter), len(cqBefore), "consume-queue files below the log's min offset are deleted")
	assert.Less(t, len(idxAfter), len(idxBefore), "index files below the log's min offset are deleted")

	// The first message of Orders/0 still in the log.
	var first store.PutResult
	for i, r := range res {
		if m := msg(i); m.Topic == "Orders" && m.QueueID == 0 && r.PhysicalOffset >= logMin {
			first = r
			break
		}
	}
	minOff, maxOff := s.QueueOffsets("Orders", 0)
	assert.Equal(t, first.QueueOffset, minOff)
	assert.Equal(t, int64(250), maxOff)
	g, err := s.Get("Orders", 0, 0, 8, 1<<20, nil)
	require.NoError(t, err)
	assert.Equal(t, store.OffsetTooSmall, g.Status)
	assert.Equal(t, minOff, g.NextOffset)
	g, err = s.Get("Orders", 0, minOff, 1, 1<<20, nil)
	require.NoError(t, err)
	require.Equal(t, store.Found, g.Status)
	assert.Equal(t, first.PhysicalOffset, message.PhysicalOffsetOf(g.Records[0].B))
	g.Release()
	got, err := s.MessagesByKey("Orders", res[0].UniqKey, 0, time.Now().Add(time.Hour).UnixMilli(), 1)
	require.NoError(t, err)
	assert.Empty(t, got, "a deleted message is not found by key")

	// The trimmed state survives a restart.
	require.NoError(t, s.Close())
	s = openStore(t, cfg)
	minOff2, maxOff2 := s.QueueOffsets("Orders", 0)
	assert.Equal(t, [2]int64{minOff, maxOff}, [2]int64{minOff2, maxOff2})
}
