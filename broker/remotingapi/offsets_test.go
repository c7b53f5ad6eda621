package remotingapi_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/remotingapi"
	"github.com/gantrymq/gantry/remoting"
)

// UPDATE_CONSUMER_OFFSET (sent "oneway" without the flag: answered all the
// same) stores what QUERY_CONSUMER_OFFSET returns.
func TestConsumerOffsetsGolden(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 4)
	cl := e.dial(t, nil)
	requireCode(t, remoting.ResSuccess, invoke(t, cl, golden(t, "frame_update_offset_request", nil))) // CG T#0 = 3
	resp := invoke(t, cl, golden(t, "frame_query_offset_request", map[string]string{"queueId": "0"}))
	requireCode(t, remoting.ResSuccess, resp)
	assert.Equal(t, int64(3), extInt(t, resp, "offset"))

	// No offset for the retry queue, which is young (empty): 0, as Java.
	resp = invoke(t, cl, golden(t, "frame_query_offset_notfound_request", nil))
	requireCode(t, remoting.ResSuccess, resp)
	assert.Equal(t, int64(0), extInt(t, resp, "offset"))

	requireCode(t, remoting.ResTopicNotExist, invoke(t, cl, golden(t, "frame_update_offset_request", map[string]string{"topic": "Nope"})))
	requireCode(t, remoting.ResInvalidParameter, invoke(t, cl, golden(t, "frame_update_offset_request", map[string]string{"commitOffset": "x"})))
}

// Without a stored offset, a queue whose first message is still near the
// end of the log is young (offset 0: read from the start); one whose
// first message is further back, or with young queues turned off, is
// QUERY_NOT_FOUND (22): the Go client then starts where its
// consume-from-where says.
func TestQueryConsumerOffsetYoungQueue(t *testing.T) {
	for _, tt := range []struct {
		name  string
		young int64
		want  remoting.ResponseCode
	}{
		{"young", 0, remoting.ResSuccess},
		{"first message too far back", 100, remoting.ResQueryNotFound},
		{"off", -1, remoting.ResQueryNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(_ *broker.Config, rc *remotingapi.Config) { rc.YoungQueueBytes = tt.young })
			e.createTopic(t, "T", 1)
			cl := e.dial(t, nil)
			for range 3 {
				requireCode(t, remoting.ResSuccess, sendOne(t, cl, "T", 0, "some body of a message", nil))
			}
			e.waitVisible(t, "T", 0, 3)
			resp := invoke(t, cl, golden(t, "frame_query_offset_request", map[string]string{"queueId": "0"}))
			requireCode(t, tt.want, resp)
			if tt.want == remoting.ResSuccess {
				assert.Equal(t, int64(0), extInt(t, resp, "offset"))
			}
		})
	}
}

// GET_MAX_OFFSET, GET_MIN_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP answer in
// ext offset; an unknown topic or queue is an error without it.
func TestQueueOffsets(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 2)
	cl := e.dial(t, nil)
	before := time.Now().UnixMilli()
	for range 3 {
		requireCode(t, remoting.ResSuccess, sendOne(t, cl, "T", 1, "m", nil))
	}
	e.waitVisible(t, "T", 1, 3)
	q := func(code remoting.RequestCode, ext map[string]string) *remoting.Command {
		return invoke(t, cl, request(code, ext, nil))
	}
	resp := q(remoting.ReqGetMaxOffset, map[string]string{"topic": "T", "queueId": "1", "bname": "broker-a"})
	requireCode(t, remoting.ResSuccess, resp)
	assert.Equal(t, int64(3), extInt(t, resp, "offset"))
	resp = q(remoting.ReqGetMinOffset, map[string]string{"topic": "T", "queueId": "1"})
	requireCode(t, remoting.ResSuccess, resp)
	assert.Equal(t, int64(0), extInt(t, resp, "offset"))
	resp = q(remoting.ReqSearchOffsetByTimestamp, map[string]string{"topic": "T", "queueId": "1", "timestamp": strconv.FormatInt(before, 10)})
	requireCode(t, remoting.ResSuccess, resp)
	assert.Equal(t, int64(0), extInt(t, resp, "offset"))
	resp = q(remoting.ReqSearchOffsetByTimestamp, map[string]string{"topic": "T", "queueId": "1", "timestamp": strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)})
	requireCode(t, remoting.ResSuccess, resp)
	assert.Equal(t, int64(3), extInt(t, resp, "offset"))

	resp = q(remoting.ReqGetMaxOffset, map[string]string{"topic": "Nope", "queueId": "0"})
	requireCode(t, remoting.ResTopicNotExist, resp)
	assert.NotContains(t, resp.ExtFields, "offset")
	requireCode(t, remoting.ResInvalidParameter, q(remoting.ReqGetMaxOffset, map[string]string{"topic": "T", "queueId": "2"}))
	requireCode(t, remoting.ResInvalidParameter, q(remoting.ReqSearchOffsetByTimestamp, map[string]string{"topic": "T", "queueId": "0"}))
}
