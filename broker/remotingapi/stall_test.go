package remotingapi_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/remotingapi"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/remoting"
)

// A send refused because the dispatcher is stalled (a full disk refusing
// the index's file) is SERVICE_NOT_AVAILABLE (14), as a disk-full refusal
// is: the official client retries it on another broker, and nothing was
// stored.
func TestSendRefusedWhileDispatchStalled(t *testing.T) {
	faults := &fsx.Faults{}
	faults.Add(fsx.Fault{Op: fsx.OpAllocate, Path: "index", Err: syscall.ENOSPC})
	e := newEnv(t, func(bc *broker.Config, _ *remotingapi.Config) {
		bc.DuplicationWindow = broker.DuplicationOff // the golden frame's UNIQ_KEY would make every send after the first a duplicate
		small := bc.StoreOverride
		bc.StoreOverride = func(sc *store.Config) {
			small(sc)
			sc.FS = fsx.WithFaults(fsx.OS, faults)
			sc.MaxDispatchStall = 200 * time.Millisecond
		}
	})
	e.createTopic(t, "T", 2)
	cl := e.dial(t, nil)
	req := func() *remoting.Command { return golden(t, "frame_send_request", map[string]string{"queueId": "0"}) }
	var resp *remoting.Command
	require.Eventually(t, func() bool {
		resp = invoke(t, cl, req())
		return resp.Code != int16(remoting.ResSuccess)
	}, 30*time.Second, time.Millisecond)
	requireCode(t, remoting.ResServiceNotAvailable, resp)
	assert.Contains(t, resp.Remark, "dispatch stalled")
	_, end := e.b.LogOffsets()
	requireCode(t, remoting.ResServiceNotAvailable, invoke(t, cl, req()))
	_, after := e.b.LogOffsets()
	assert.Equal(t, end, after, "a refused send stores nothing")

	faults.Clear()
	require.Eventually(t, func() bool { return invoke(t, cl, req()).Code == int16(remoting.ResSuccess) }, 30*time.Second,
		10*time.Millisecond, "sends are accepted once the dispatcher caught up")
}
