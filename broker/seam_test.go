package broker_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
)

// The front ends read the store through the broker: a record by its log
// offset, a queue's offsets and messages, the offsets' keys, the tables'
// versions.
func TestStoreSeam(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 2)
	res := send(t, b, newMsg("T", 1, "first", ""), newMsg("T", 1, "second", ""))
	waitVisible(t, b, "T", 1, 2)

	rec, err := b.AppendRecordAt([]byte("prefix"), res[1].PhysicalOffset)
	require.NoError(t, err)
	m, n, err := message.Decode(rec[len("prefix"):])
	require.NoError(t, err)
	assert.Equal(t, len(rec)-len("prefix"), n)
	assert.Equal(t, "second", string(m.Body))

	for _, phys := range []int64{res[1].PhysicalOffset + 1, 1 << 40, -1} {
		_, err := b.AppendRecordAt(nil, phys)
		assert.ErrorIs(t, err, broker.ErrMessageNotFound, "offset %d", phys)
	}

	minOff, maxOff := b.QueueOffsets("T", 1)
	assert.Equal(t, [2]int64{0, 2}, [2]int64{minOff, maxOff})
	m, err = b.MessageByQueueOffset("T", 1, 0)
	require.NoError(t, err)
	assert.Equal(t, "first", string(m.Body))
	byID, err := b.MessageByOffsetID(res[0].MsgID)
	require.NoError(t, err)
	assert.Equal(t, "first", string(byID.Body))
	logMin, logMax := b.LogOffsets()
	assert.LessOrEqual(t, logMin, res[0].PhysicalOffset)
	assert.Greater(t, logMax, res[1].PhysicalOffset)
	assert.GreaterOrEqual(t, b.DispatchedOffset(), logMax)

	v0 := b.GroupsVersion()
	require.NoError(t, b.CommitOffset("G", "T", 1, 1))
	assert.Equal(t, []broker.GroupTopic{{Group: "G", Topic: "T"}}, b.OffsetKeys("G"))
	assert.Contains(t, b.OffsetKeys(""), broker.GroupTopic{Group: "G", Topic: "T"})
	assert.Empty(t, b.OffsetKeys("Nobody"))
	g, ok := b.Group("G")
	require.True(t, ok, "committing created the group")
	assert.Equal(t, "G", g.GroupName)
	assert.NotEqual(t, v0, b.GroupsVersion())
	assert.NotZero(t, b.TopicsVersion().Counter)
	require.NoError(t, b.SaveMetadata())
}

// The storage errors a front end maps to a wire code are the broker's.
func TestStorageErrorsAreTheBrokers(t *testing.T) {
	for _, tt := range []struct {
		err         error
		unavailable bool
		is          error
	}{
		{err: broker.ErrShuttingDown, unavailable: true},
		{err: commitlog.ErrClosed, unavailable: true},
		{err: commitlog.ErrFlushFailed, unavailable: true},
		{err: store.ErrDispatchStalled, unavailable: true},
		{err: commitlog.ErrDiskFull, is: broker.ErrDiskFull},
		{err: commitlog.ErrRecordTooLarge, is: broker.ErrRecordTooLarge},
		{err: commitlog.ErrFlushTimeout, is: broker.ErrFlushTimeout},
		{err: broker.ErrInvalidArgument},
	} {
		wrapped := fmt.Errorf("broker: send: %w", tt.err)
		assert.Equal(t, tt.unavailable, broker.IsUnavailable(wrapped), "%v", tt.err)
		if tt.is != nil {
			assert.ErrorIs(t, wrapped, tt.is)
		}
	}
	assert.False(t, broker.IsUnavailable(nil))
	assert.False(t, errors.Is(fmt.Errorf("x: %w", commitlog.ErrDiskFull), broker.ErrFlushTimeout))
}
