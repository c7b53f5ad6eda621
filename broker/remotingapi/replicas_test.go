package remotingapi_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/remotingapi"
	"github.com/gantrymq/gantry/remoting"
)

// slavesInSync is a master's replication whose slaves are in sync but
// never acknowledge: every SYNC_MASTER send waits its slaveTimeout.
type slavesInSync struct{ n int }

func (s slavesInSync) InSync(int64) int { return s.n }
func (s slavesInSync) WaitAcked(ctx context.Context, _ int64, _ int) error {
	<-ctx.Done()
	return ctx.Err()
}
func (slavesInSync) Notify()     {}
func (slavesInSync) NotifyMeta() {}

func withRole(role broker.BrokerRole, id int64) envOption {
	return func(c *broker.Config, _ *remotingapi.Config) {
		c.BrokerRole, c.BrokerID, c.SlaveTimeout = role, id, 50*time.Millisecond
	}
}

// The replication errors' wire codes, as a RocketMQ broker answers them.
func TestReplicationCodes(t *testing.T) {
	t.Run("SYNC_MASTER without in-sync replicas: SYSTEM_ERROR, nothing stored", func(t *testing.T) {
		e := newEnv(t, withRole(broker.SyncMaster, 0))
		e.createTopic(t, "T", 4)
		resp := invoke(t, e.dial(t, nil), golden(t, "frame_send_request", nil))
		requireCode(t, remoting.ResSystemError, resp)
		assert.Contains(t, resp.Remark, "in-sync replicas not enough")
		_, end := e.b.LogOffsets()
		assert.Zero(t, end)
	})
	t.Run("SYNC_MASTER whose slaves do not ack: FLUSH_SLAVE_TIMEOUT with the send's result", func(t *testing.T) {
		e := newEnv(t, withRole(broker.SyncMaster, 0))
		e.b.SetReplication(slavesInSync{n: 1})
		e.createTopic(t, "T", 4)
		resp := invoke(t, e.dial(t, nil), golden(t, "frame_send_request", nil))
		requireCode(t, remoting.ResFlushSlaveTimeout, resp) // the Go client's SendFlushSlaveTimeout
		assert.NotEmpty(t, resp.Ext("msgId"), "stored: the client gets its result")
		assert.Equal(t, "1", resp.Ext("queueId"))
		assert.Equal(t, "0", resp.Ext("queueOffset"))
	})
	t.Run("SLAVE: writes SERVICE_NOT_AVAILABLE, pulls SYSTEM_BUSY", func(t *testing.T) {
		e := newEnv(t, withRole(broker.Slave, 1))
		cl := e.dial(t, nil)
		resp := invoke(t, cl, golden(t, "frame_send_request", nil))
		requireCode(t, remoting.ResServiceNotAvailable, resp)
		assert.Contains(t, resp.Remark, "SLAVE")
		assert.Contains(t, resp.Remark, "not master")
		resp = invoke(t, cl, pullReq(t, "T", 1, 0, nil))
		requireCode(t, remoting.ResSystemBusy, resp)
		assert.Contains(t, resp.Remark, "slaveReadEnable")
	})
	t.Run("SLAVE with slaveReadEnable serves pulls", func(t *testing.T) {
		e := newEnv(t, withRole(broker.Slave, 1), func(c *broker.Config, _ *remotingapi.Config) { c.SlaveReadEnable = true })
		resp := invoke(t, e.dial(t, nil), pullReq(t, "T", 1, 0, nil))
		requireCode(t, remoting.ResTopicNotExist, resp) // served: an empty slave has no such topic
	})
}

func TestReplicationErrorCodes(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want remoting.ResponseCode
	}{
		{fmt.Errorf("x: %w: y", broker.ErrReplicaTimeout), remoting.ResFlushSlaveTimeout},
		{fmt.Errorf("x: %w", broker.ErrNotEnoughReplicas), remoting.ResSystemError},
		{&broker.NotMasterError{Broker: "b", ID: 1}, remoting.ResServiceNotAvailable},
		{fmt.Errorf("%w: x", broker.ErrSlaveReadDisabled), remoting.ResSystemBusy},
	} {
		assert.Equal(t, tt.want, remotingapi.Code(tt.err), "%v", tt.err)
	}
	assert.True(t, errors.Is(&broker.NotMasterError{}, broker.ErrNotMaster))
}
