package remotingapi_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/remotingapi"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

func tagged(tag string) message.Properties {
	return message.Properties{{Key: message.PropTags, Value: tag}}
}

// A pull at the end of a queue with the suspend bit is held, and a send
// to the queue wakes it with the message; without the bit it answers
// PULL_NOT_FOUND at once. Both carry the offsets.
func TestPullLongPolling(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 1)
	cl := e.dial(t, nil)

	resp := invoke(t, cl, pullReq(t, "T", 0, 0, map[string]string{"sysFlag": "0"}))
	requireCode(t, remoting.ResPullNotFound, resp)
	assert.Equal(t, int64(0), extInt(t, resp, "nextBeginOffset"))
	assert.Equal(t, int64(0), extInt(t, resp, "maxOffset"))
	assert.Equal(t, int64(0), extInt(t, resp, "suggestWhichBrokerId"))

	got := make(chan *remoting.Command, 1)
	start := time.Now()
	go func() { // the client's request goroutine; the test waits for it below
		resp, err := cl.Invoke(t.Context(), pullReq(t, "T", 0, 0, nil)) // sysFlag 2, suspendTimeoutMillis 20000
		if err != nil {
			resp = remoting.NewResponse(&remoting.Command{}, remoting.ResSystemError, err.Error())
		}
		got <- resp
	}()
	e.waitHeld(t, 1)
	requireCode(t, remoting.ResSuccess, sendOne(t, cl, "T", 0, "wake up", nil))
	select {
	case resp := <-got:
		requireCode(t, remoting.ResSuccess, resp)
		assert.Equal(t, "wake up", string(decodeAll(t, resp.Body)[0].Body))
		assert.Equal(t, int64(1), extInt(t, resp, "nextBeginOffset"))
		assert.Less(t, time.Since(start), 5*time.Second)
	case <-time.After(10 * time.Second):
		t.Fatal("the held pull was not woken by the send")
	}
}

// A held pull answers PULL_NOT_FOUND when its hold ends: at most MaxHold,
// well before the Go client's 30 s.
func TestPullHoldEnds(t *testing.T) {
	e := newEnv(t, func(_ *broker.Config, rc *remotingapi.Config) { rc.MaxHold = 100 * time.Millisecond })
	e.createTopic(t, "T", 1)
	cl := e.dial(t, nil)
	start := time.Now()
	resp := invoke(t, cl, pullReq(t, "T", 0, 0, nil))
	requireCode(t, remoting.ResPullNotFound, resp)
	assert.GreaterOrEqual(t, time.Since(start), 90*time.Millisecond)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// Statuses map to codes and next offsets as in Java (§2.4.2); every answer
// carries the four offsets.
func TestPullStatusMapping(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 2)
	cl := e.dial(t, nil)
	for range 3 {
		requireCode(t, remoting.ResSuccess, sendOne(t, cl, "T", 0, "m", tagged("A")))
	}
	e.waitVisible(t, "T", 0, 3)
	noHold := map[string]string{"sysFlag": "0"}
	tests := []struct {
		name     string
		qid      int32
		offset   int64
		set      map[string]string
		want     remoting.ResponseCode
		wantNext int64
	}{
		{"found", 0, 1, noHold, remoting.ResSuccess, 3},
		{"at the end", 0, 3, noHold, remoting.ResPullNotFound, 3},
		{"past the end", 0, 9, noHold, remoting.ResPullOffsetMoved, 3},
		{"empty queue at 0", 1, 0, noHold, remoting.ResPullNotFound, 0},
		{"empty queue past 0", 1, 5, noHold, remoting.ResPullOffsetMoved, 0},
		{"no match", 0, 0, map[string]string{"sysFlag": "4", "subscription": "B"}, remoting.ResPullRetryImmediately, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := invoke(t, cl, pullReq(t, "T", tt.qid, tt.offset, tt.set))
			requireCode(t, tt.want, resp)
			assert.Equal(t, tt.wantNext, extInt(t, resp, "nextBeginOffset"))
			for _, k := range []string{"minOffset", "maxOffset", "suggestWhichBrokerId"} {
				extInt(t, resp, k)
			}
		})
	}
	for _, tt := range []struct {
		name string
		req  *remoting.Command
		want remoting.ResponseCode
	}{
		{"unknown topic", pullReq(t, "Nope", 0, 0, noHold), remoting.ResTopicNotExist},
		{"queue out of range", pullReq(t, "T", 5, 0, noHold), remoting.ResInvalidParameter},
		{"no queue offset", pullReq(t, "T", 0, 0, map[string]string{"queueOffset": ""}), remoting.ResInvalidParameter},
		{"SQL92", pullReq(t, "T", 0, 0, map[string]string{"sysFlag": "4", "subscription": "a > 1", "expressionType": "SQL92"}), remoting.ResSystemError},
	} {
		t.Run(tt.name, func(t *testing.T) { requireCode(t, tt.want, invoke(t, cl, tt.req)) })
	}
}

// maxMsgNums <= 0 (the Go pull consumer's default) returns one message; a
// pull consumer's own subscription (sysFlag 4) filters.
func TestPullLimitsAndSubscription(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 1)
	cl := e.dial(t, nil)
	for _, tag := range []string{"A", "B", "A"} {
		requireCode(t, remoting.ResSuccess, sendOne(t, cl, "T", 0, tag, tagged(tag)))
	}
	e.waitVisible(t, "T", 0, 3)
	resp := invoke(t, cl, pullReq(t, "T", 0, 0, map[string]string{"maxMsgNums": "0", "sysFlag": "6", "subscription": "*"}))
	requireCode(t, remoting.ResSuccess, resp)
	assert.Len(t, decodeAll(t, resp.Body), 1)
	assert.Equal(t, int64(1), extInt(t, resp, "nextBeginOffset"))

	resp = invoke(t, cl, pullReq(t, "T", 0, 0, map[string]string{"sysFlag": "6", "subscription": "B"}))
	requireCode(t, remoting.ResSuccess, resp)
	ms := decodeAll(t, resp.Body)
	require.Len(t, ms, 1)
	assert.Equal(t, "B", ms[0].Tags())
	assert.Equal(t, int64(1), ms[0].QueueOffset, "records keep their queue offsets")
}

// A push consumer's pull carries no subscription: the group's, from its
// heartbeat, filters it.
func TestPullFiltersWithHeartbeatSubscription(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 4)
	cl := e.dial(t, nil)
	for _, tag := range []string{"TagA", "TagC", "TagB", "TagC"} {
		requireCode(t, remoting.ResSuccess, sendOne(t, cl, "T", 0, tag, tagged(tag)))
	}
	e.waitVisible(t, "T", 0, 4)
	requireCode(t, remoting.ResSuccess, invoke(t, cl, golden(t, "frame_heartbeat_request", nil))) // CG: T "TagA || TagB"
	resp := invoke(t, cl, pullReq(t, "T", 0, 0, nil))
	requireCode(t, remoting.ResSuccess, resp)
	var tags []string
	for _, m := range decodeAll(t, resp.Body) {
		tags = append(tags, m.Tags())
	}
	assert.Equal(t, []string{"TagA", "TagB"}, tags)
	assert.Equal(t, int64(4), extInt(t, resp, "nextBeginOffset"))
}

// The commit-offset bit of a pull (frame_pull_commit_request: sysFlag 3,
// commitOffset 3) stores the group's offset.
func TestPullCommitsOffset(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 4)
	cl := e.dial(t, nil)
	for range 3 {
		requireCode(t, remoting.ResSuccess, sendOne(t, cl, "T", 0, "m", nil))
	}
	e.waitVisible(t, "T", 0, 3)
	resp := invoke(t, cl, golden(t, "frame_pull_commit_request", map[string]string{"suspendTimeoutMillis": "50"}))
	requireCode(t, remoting.ResPullNotFound, resp)
	off, ok := e.b.QueryOffset("CG", "T", 0)
	require.True(t, ok)
	assert.Equal(t, int64(3), off)
}
