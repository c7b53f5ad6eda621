package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/message"
)

// fakeReplication is a master's slaves as the broker sees them.
type fakeReplication struct {
	mu      sync.Mutex
	inSync  int
	acked   int64 // what the slaves acknowledged
	waited  []int64
	notifys int
}

func (f *fakeReplication) InSync(int64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inSync
}

func (f *fakeReplication) WaitAcked(ctx context.Context, off int64, n int) error {
	f.mu.Lock()
	f.waited = append(f.waited, off)
	ok := f.acked >= off
	f.mu.Unlock()
	if ok {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (f *fakeReplication) Notify() {
	f.mu.Lock()
	f.notifys++
	f.mu.Unlock()
}

func (f *fakeReplication) NotifyMeta() {}

func (f *fakeReplication) set(inSync int, acked int64) {
	f.mu.Lock()
	f.inSync, f.acked = inSync, acked
	f.mu.Unlock()
}

func TestSyncMasterWaitsForItsSlaves(t *testing.T) {
	cfg := testConfig(t)
	cfg.BrokerRole, cfg.SlaveTimeout = broker.SyncMaster, 50*time.Millisecond
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)

	_, err := b.Send(t.Context(), "T", []*message.Message{newMsg("T", 0, "no replication yet", "")})
	require.ErrorIs(t, err, broker.ErrNotEnoughReplicas, "no Replication set")
	assert.False(t, broker.IsIndeterminate(err))

	rep := &fakeReplication{}
	b.SetReplication(rep)
	_, err = b.Send(t.Context(), "T", []*message.Message{newMsg("T", 0, "no slave in sync", "")})
	require.ErrorIs(t, err, broker.ErrNotEnoughReplicas)
	assert.ErrorContains(t, err, "in-sync replicas not enough")
	assert.False(t, broker.IsIndeterminate(err), "refused before the append")
	_, maxOff := b.QueueOffsets("T", 0)
	assert.Zero(t, maxOff, "nothing stored")

	rep.set(1, 1<<40)
	res, err := b.Send(t.Context(), "T", []*message.Message{newMsg("T", 0, "acked", "")})
	require.NoError(t, err)
	_, logEnd := b.LogOffsets()
	rep.mu.Lock()
	assert.Equal(t, []int64{logEnd}, rep.waited, "waits for the end of the batch")
	assert.Positive(t, rep.notifys, "the log's growth is notified")
	rep.mu.Unlock()
	assert.Equal(t, int64(0), res[0].QueueOffset)

	rep.set(1, 0) // in sync, but the ack never comes
	res, err = b.Send(t.Context(), "T", []*message.Message{newMsg("T", 0, "not acked", "")})
	require.ErrorIs(t, err, broker.ErrReplicaTimeout)
	assert.True(t, broker.IsIndeterminate(err))
	require.Len(t, res, 1, "stored: its result comes with the error")
	_, maxOff = b.QueueOffsets("T", 0)
	assert.Equal(t, int64(2), maxOff)
}

func TestAsyncMasterDoesNotWait(t *testing.T) {
	cfg := testConfig(t)
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)
	rep := &fakeReplication{}
	b.SetReplication(rep)
	send(t, b, newMsg("T", 0, "x", ""))
	rep.mu.Lock()
	defer rep.mu.Unlock()
	assert.Empty(t, rep.waited)
	assert.Positive(t, rep.notifys)
}

func TestSlaveRefusesWrites(t *testing.T) {
	master := testConfig(t)
	mb := openBroker(t, master)
	createTopic(t, mb, "T", 2)
	closeBroker(t, mb)

	cfg := master // the master's store, opened as a slave: its queues are there
	cfg.BrokerRole, cfg.BrokerID = broker.Slave, 1
	b := openBroker(t, cfg)
	b.SetMasterAddr("10.0.0.1:8081")
	ctx := t.Context()
	checks := map[string]error{}
	_, checks["Send"] = b.Send(ctx, "T", []*message.Message{newMsg("T", 0, "x", "")})
	_, checks["SendRecords"] = b.SendRecords(ctx, "T", nil)
	checks["CreateOrUpdateTopic"] = b.CreateOrUpdateTopic(metadata.TopicConfig{TopicName: "U", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6})
	checks["DeleteTopic"] = b.DeleteTopic("T")
	checks["PutGroup"] = b.PutGroup(metadata.SubscriptionGroup{GroupName: "g"})
	checks["DeleteGroup"] = b.DeleteGroup("g", false)
	checks["CommitOffset"] = b.CommitOffset("g", "T", 0, 1)
	_, checks["CommitOffsets"] = b.CommitOffsets("g", "", "", []broker.OffsetCommit{{Topic: "T", Offset: 1}})
	_, checks["ResetOffsetByTime"] = b.ResetOffsetByTime("g", "T", 0)
	_, checks["SendBack"] = b.SendBack(ctx, broker.SendBackRequest{Group: "g"})
	_, checks["SendRetry"] = b.SendRetry(ctx, "g", newMsg("%RETRY%g", 0, "x", ""), 0)
	for name, err := range checks {
		require.ErrorIs(t, err, broker.ErrNotMaster, name)
		assert.ErrorContains(t, err, "is a SLAVE", name)
		assert.ErrorContains(t, err, "the master is at 10.0.0.1:8081", name)
	}

	_, err := b.Pull(ctx, broker.PullRequest{Topic: "T"})
	require.ErrorIs(t, err, broker.ErrSlaveReadDisabled)
}

// A retry answered as a duplicate is acknowledged only once the slaves
// hold the original: the original's send may have timed out waiting.
func TestSyncMasterDuplicateWaitsForItsSlaves(t *testing.T) {
	cfg := testConfig(t)
	cfg.BrokerRole, cfg.SlaveTimeout = broker.SyncMaster, 50*time.Millisecond
	b := openBroker(t, cfg)
	createTopic(t, b, "T", 1)
	rep := &fakeReplication{}
	rep.set(1, 0)
	b.SetReplication(rep)
	msg := func() []*message.Message {
		m := newMsg("T", 0, "once", "")
		m.Properties = message.Properties{{Key: message.PropUniqKey, Value: "0A0000010000000000000000000000AA"}}
		return []*message.Message{m}
	}
	_, err := b.Send(t.Context(), "T", msg())
	require.ErrorIs(t, err, broker.ErrReplicaTimeout)

	res, err := b.Send(t.Context(), "T", msg())
	require.ErrorIs(t, err, broker.ErrReplicaTimeout, "a duplicate of an unreplicated message")
	require.Len(t, res, 1)
	assert.True(t, res[0].Duplicate)

	rep.set(1, 1<<40)
	res, err = b.Send(t.Context(), "T", msg())
	require.NoError(t, err)
	assert.True(t, res[0].Duplicate)
	_, maxOff := b.QueueOffsets("T", 0)
	assert.Equal(t, int64(1), maxOff, "stored once")
}

// A master with slaveReadEnable suggests a slave to a consumer whose read
// lies further behind the log's end than the set distance; otherwise, and
// without slaveReadEnable, it never does.
func TestSuggestSlave(t *testing.T) {
	for _, slaveRead := range []bool{true, false} {
		cfg := testConfig(t)
		cfg.SlaveReadEnable = slaveRead
		b := openBroker(t, cfg)
		createTopic(t, b, "T", 1)
		var phys []int64
		for i := range 10 {
			res, err := b.Send(t.Context(), "T", []*message.Message{newMsg("T", 0, fmt.Sprint("m", i), "")})
			require.NoError(t, err)
			phys = append(phys, res[0].PhysicalOffset)
		}
		end := b.ReplicaLog().MaxOffset()
		b.SetSlaveReadBehind(end - phys[5])
		for i, p := range phys {
			assert.Equal(t, slaveRead && i < 5, b.SuggestSlave(p), "record %d, slaveReadEnable %t", i, slaveRead)
		}
	}
}
