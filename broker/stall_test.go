package broker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// faultyConfig is delayConfig with the store on a filesystem that faults
// can make refuse operations (a full disk).
func faultyConfig(t *testing.T, clock *fakeClock, faults *fsx.Faults) broker.Config {
	cfg := delayConfig(t, clock)
	cfg.StoreOverride = func(sc *store.Config) {
		smallStore(sc)
		sc.FS = fsx.WithFaults(fsx.OS, faults)
	}
	return cfg
}

// stallDispatch makes the disk refuse a new topic's consume-queue file
// and sends it a message: the dispatcher stalls there, and once the stall
// lasted its bound (the clock moves past it) the store refuses writes.
func stallDispatch(t *testing.T, b *broker.Broker, clock *fakeClock, faults *fsx.Faults) {
	t.Helper()
	faults.Add(fsx.Fault{Op: fsx.OpAllocate, Path: "consumequeue/Other", Err: syscall.ENOSPC})
	createTopic(t, b, "Other", 1)
	send(t, b, newMsg("Other", 0, "stalls the dispatcher", ""))
	require.Eventually(t, func() bool { return b.Status().Dispatch.Stalled }, 10*time.Second, time.Millisecond)
	clock.Advance(store.DefaultMaxDispatchStall + time.Second)
	require.True(t, b.Status().Dispatch.Refusing)
}

// bodiesOf returns the sorted bodies of every message of a topic.
func bodiesOf(t *testing.T, b *broker.Broker, topic string) []string {
	t.Helper()
	out := bodies(delivered(t, b, topic))
	slices.Sort(out)
	return out
}

// While the disk refuses writes (here the stalled dispatcher's refusals),
// delayed deliveries and send-backs fail for space: a delivery is retried
// and its level does not move, a send-back stores nothing and says so.
// Once there is room, each delayed message is delivered once and the
// send-back taken then is retried once: nothing lost, nothing duplicated.
func TestDelayAndSendBackFailForSpace(t *testing.T) {
	clock := newFakeClock()
	faults := &fsx.Faults{}
	b := openBroker(t, faultyConfig(t, clock, faults))
	createTopic(t, b, "T", 2)
	normal := send(t, b, newMsg("T", 0, "n0", ""), newMsg("T", 0, "n1", ""))
	for i := range 5 {
		send(t, b, delayedMsg("T", 1, fmt.Sprintf("d%d", i), message.PropDelay, "1"))
	}
	require.Eventually(t, func() bool { return b.Status().DelayPending[0] == 5 }, 10*time.Second, time.Millisecond)
	stallDispatch(t, b, clock, faults) // the 1 s delay passed too

	stillCount(t, b, "T", 2)
	assert.Equal(t, int64(5), b.Status().DelayPending[0], "no delivery taken")
	end := b.Store().CommitLog().MaxOffset()
	_, err := b.SendBack(t.Context(), broker.SendBackRequest{Group: "G", PhysicalOffset: normal[0].PhysicalOffset})
	require.ErrorIs(t, err, store.ErrDispatchStalled, "the consumer is told: it keeps the message")
	assert.Equal(t, end, b.Store().CommitLog().MaxOffset(), "a refused send-back stores nothing")

	faults.Clear()
	require.Eventually(t, func() bool { return !b.Status().Dispatch.Stalled }, 10*time.Second, time.Millisecond)
	waitCount(t, b, "T", 7)
	stillCount(t, b, "T", 7)
	assert.Equal(t, []string{"d0", "d1", "d2", "d3", "d4", "n0", "n1"}, bodiesOf(t, b, "T"), "each delayed message once")

	_, err = b.SendBack(t.Context(), broker.SendBackRequest{Group: "G", PhysicalOffset: normal[0].PhysicalOffset})
	require.NoError(t, err)
	clock.Advance(11 * time.Second) // the first retry's level: 10 s
	waitCount(t, b, broker.RetryTopic("G"), 1)
	stillCount(t, b, broker.RetryTopic("G"), 1)
	assert.Equal(t, []string{"n0"}, bodiesOf(t, b, broker.RetryTopic("G")), "retried once")
}

// A restart on a disk that refuses the consume-queue files the start must
// rebuild opens the broker stalled; the delay levels and the timer keep
// the progress they saved although their queues are not back yet, so the
// messages delivered before are not delivered again once they are.
func TestDelayProgressKeptThroughStalledRestart(t *testing.T) {
	for _, tt := range []struct {
		name, prop, parkTopic string
	}{
		{"delay level", message.PropDelay, broker.ScheduleTopic},
		{"timer", message.PropTimerDelaySec, broker.TimerTopic},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			faults := &fsx.Faults{}
			cfg := faultyConfig(t, clock, faults)
			b, err := broker.Open(t.Context(), cfg)
			require.NoError(t, err)
			createTopic(t, b, "T", 1)
			for i := range 10 {
				send(t, b, delayedMsg("T", 0, fmt.Sprintf("d%d", i), tt.prop, "1"))
			}
			clock.Advance(2 * time.Second)
			waitCount(t, b, "T", 10)
			require.Eventually(t, func() bool { st := b.Status(); return st.DelayPending[0] == 0 && st.TimerPending == 0 },
				10*time.Second, time.Millisecond)
			require.NoError(t, b.Close(context.Background())) // saves the progress: 10 delivered

			root := cfg.StorePathRootDir
			require.NoError(t, os.RemoveAll(filepath.Join(root, "consumequeue")))
			require.NoError(t, os.Remove(filepath.Join(root, "dispatch.json")))
			faults.Add(fsx.Fault{Op: fsx.OpAllocate, Path: "consumequeue/" + tt.parkTopic, Err: syscall.ENOSPC})
			b = openBroker(t, cfg)
			assert.True(t, b.Status().Dispatch.Stalled, "the rebuild stopped at the first parked message")
			assert.NotEmpty(t, b.Store().Recovery().DispatchError)

			faults.Clear()
			require.Eventually(t, func() bool { return !b.Status().Dispatch.Stalled }, 10*time.Second, time.Millisecond)
			waitCount(t, b, "T", 10)
			clock.Advance(2 * time.Second)
			stillCount(t, b, "T", 10)
			assert.Len(t, bodiesOf(t, b, "T"), 10, "no message delivered twice")
		})
	}
}
