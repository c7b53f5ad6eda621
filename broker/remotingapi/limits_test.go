package remotingapi_test

import (
	"testing"

	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

// Through RocketMQ's protocol: mqadmin's "+key=value" sets a topic's
// limits, a bad one is INVALID_PARAMETER naming it, a bad TTL_MS is
// MESSAGE_ILLEGAL naming it, and a send to a full refusing queue is
// SYSTEM_BUSY (which RocketMQ producers do not retry) naming the limit.
func TestLimitsOverRemoting(t *testing.T) {
	e := newEnv(t)
	cl := e.dial(t, nil)
	badRequest(t, remoting.ResInvalidParameter, `ttl.default.ms="soon"`, invoke(t, cl, request(remoting.ReqUpdateAndCreateTopic,
		createTopicExt("Commands", map[string]string{"attributes": "+ttl.default.ms=soon"}), nil)))
	requireCode(t, remoting.ResSuccess, invoke(t, cl, request(remoting.ReqUpdateAndCreateTopic,
		createTopicExt("Commands", map[string]string{"readQueueNums": "1", "writeQueueNums": "1",
			"attributes": "+queue.max.backlog=1,+queue.max.policy=refuse"}), nil)))

	badRequest(t, remoting.ResMessageIllegal, `TTL_MS="1h"`,
		sendOne(t, cl, "Commands", 0, "ttl", message.Properties{{Key: message.PropTTLMs, Value: "1h"}}))
	requireCode(t, remoting.ResSuccess, sendOne(t, cl, "Commands", 0, "first", nil))
	badRequest(t, remoting.ResSystemBusy, "queue.max.backlog=1", sendOne(t, cl, "Commands", 0, "second", nil))
}
