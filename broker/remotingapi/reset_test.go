package remotingapi_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/remoting"
)

// resets records the RESET_CONSUMER_CLIENT_OFFSET requests a client gets.
type resets struct {
	mu  sync.Mutex
	got []*remoting.Command
	ch  chan struct{}
}

func newResets() *resets { return &resets{ch: make(chan struct{}, 16)} }

func (r *resets) handler() remoting.Handler {
	m := remoting.NewMux()
	m.HandleFunc(remoting.ReqResetConsumerClientOffset, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		r.mu.Lock()
		r.got = append(r.got, req)
		r.mu.Unlock()
		r.ch <- struct{}{}
		return nil // the Go client answers nothing
	})
	m.HandleFunc(remoting.ReqNotifyConsumerIDsChanged, func(context.Context, *remoting.Conn, *remoting.Command) *remoting.Command {
		return nil
	})
	return m
}

// A reset of a group's offsets is told to the connections of the group's
// live consumers, oneway, as RocketMQ's broker tells them: ext topic,
// group, timestamp and isForce, and the new offsets in the body as a Java
// broker writes them, which the official Go client parses. Other groups' connections hear
// nothing.
func TestResetConsumerClientOffset(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 2)
	for i := range 3 {
		requireCode(t, remoting.ResSuccess, sendOne(t, e.dial(t, nil), "T", 0, strconv.Itoa(i), nil))
	}
	e.waitVisible(t, "T", 0, 3)
	ra, rb := newResets(), newResets()
	a, b := e.dial(t, ra.handler()), e.dial(t, rb.handler())
	requireCode(t, remoting.ResSuccess, invoke(t, a, heartbeatOf(t, "10.0.0.1@a", "G")))
	requireCode(t, remoting.ResSuccess, invoke(t, b, heartbeatOf(t, "10.0.0.2@b", "H")))

	ts := time.Now().Add(time.Hour).UnixMilli() // after everything: each queue's end
	offs, err := e.b.ResetOffsetByTime("G", "T", ts)
	require.NoError(t, err)
	require.Equal(t, map[int32]int64{0: 3, 1: 0}, offs)
	select {
	case <-ra.ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no RESET_CONSUMER_CLIENT_OFFSET")
	}
	ra.mu.Lock()
	req := ra.got[0]
	ra.mu.Unlock()
	assert.True(t, req.IsOneway())
	assert.Equal(t, map[string]string{"topic": "T", "group": "G", "timestamp": strconv.FormatInt(ts, 10), "isForce": "true"}, req.ExtFields)
	assert.Equal(t, `{"offsetTable":{{"topic":"T","brokerName":"broker-a","queueId":0}:3,{"topic":"T","brokerName":"broker-a","queueId":1}:0}}`,
		string(req.Body), "a ResetOffsetBody as a Java broker writes it (fastjson)")

	// A reset of another group reaches b only.
	_, err = e.b.ResetOffsetByTime("H", "T", ts)
	require.NoError(t, err)
	select {
	case <-rb.ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no RESET_CONSUMER_CLIENT_OFFSET for H")
	}
	ra.mu.Lock()
	assert.Len(t, ra.got, 1, "G's connection hears nothing of H")
	ra.mu.Unlock()
}
