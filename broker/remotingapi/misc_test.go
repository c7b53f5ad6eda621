package remotingapi_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

func lockReq(code remoting.RequestCode, client string, queues ...int) *remoting.Command {
	var mqs []map[string]any
	for _, q := range queues {
		mqs = append(mqs, map[string]any{"topic": "T", "brokerName": "b1", "queueId": q})
	}
	body, _ := json.Marshal(map[string]any{"consumerGroup": "CG", "clientId": client, "mqSet": mqs})
	return request(code, nil, body)
}

func locked(t *testing.T, resp *remoting.Command) []int {
	t.Helper()
	requireCode(t, remoting.ResSuccess, resp)
	var body struct {
		LockOKMQSet []struct {
			Topic      string `json:"topic"`
			BrokerName string `json:"brokerName"`
			QueueID    int    `json:"queueId"`
		} `json:"lockOKMQSet"`
	}
	require.NoError(t, json.Unmarshal(resp.Body, &body))
	out := []int{}
	for _, q := range body.LockOKMQSet {
		assert.Equal(t, "T", q.Topic)
		assert.Equal(t, "b1", q.BrokerName, "the broker name is echoed")
		out = append(out, q.QueueID)
	}
	return out
}

// LOCK_BATCH_MQ answers the queues the client holds now; another client's
// locks are refused until released by UNLOCK_BATCH_MQ.
func TestLockUnlock(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 4)
	cl := e.dial(t, nil)
	start := time.Now()
	assert.Equal(t, []int{0, 1}, locked(t, invoke(t, cl, lockReq(remoting.ReqLockBatchMQ, "a", 0, 1))))
	assert.Less(t, time.Since(start), time.Second, "the Go client waits 1 s")
	assert.Equal(t, []int{2}, locked(t, invoke(t, cl, lockReq(remoting.ReqLockBatchMQ, "b", 0, 2))))
	requireCode(t, remoting.ResSuccess, invoke(t, cl, lockReq(remoting.ReqUnlockBatchMQ, "a", 0)))
	assert.Equal(t, []int{0, 2}, locked(t, invoke(t, cl, lockReq(remoting.ReqLockBatchMQ, "b", 0, 2))))
	requireCode(t, remoting.ResInvalidParameter, invoke(t, cl, request(remoting.ReqLockBatchMQ, nil, []byte("[]"))))
	requireCode(t, remoting.ResInvalidParameter, invoke(t, cl, lockReq(remoting.ReqLockBatchMQ, "a", 9)))
}

// QUERY_MESSAGE finds a message by key within a time range and answers its
// stored record; VIEW_MESSAGE_BY_ID answers the record at a commit-log
// offset.
func TestQueryAndViewMessage(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 4)
	cl := e.dial(t, nil)
	resp := invoke(t, cl, golden(t, "frame_send_request", nil)) // KEYS "k1 k2"
	requireCode(t, remoting.ResSuccess, resp)
	_, phys, err := message.DecodeOffsetMsgID(resp.Ext("msgId"))
	require.NoError(t, err)
	e.waitVisible(t, "T", 1, 1)
	stored := e.record(t, phys)

	query := func(key string) *remoting.Command {
		return invoke(t, cl, request(remoting.ReqQueryMessage, map[string]string{"topic": "T", "key": key, "maxNum": "32",
			"beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)}, nil))
	}
	keys := []string{"k2", "7F0000010D4B0000000005f5e1000001"} // KEYS, then the UNIQ_KEY, indexed in that order
	var r *remoting.Command
	require.Eventually(t, func() bool { // the index follows the consume queue, a key at a time
		r = query(keys[len(keys)-1])
		return r.ResponseCode() == remoting.ResSuccess
	}, 5*time.Second, time.Millisecond)
	for _, key := range keys {
		r = query(key)
		requireCode(t, remoting.ResSuccess, r)
		assert.Equal(t, stored, r.Body)
		assert.Equal(t, phys, extInt(t, r, "indexLastUpdatePhyoffset"))
		assert.Positive(t, extInt(t, r, "indexLastUpdateTimestamp"))
	}
	requireCode(t, remoting.ResQueryNotFound, query("nope"))

	view := invoke(t, cl, request(remoting.ReqViewMessageByID, map[string]string{"offset": strconv.FormatInt(phys, 10)}, nil))
	requireCode(t, remoting.ResSuccess, view)
	assert.Equal(t, stored, view.Body)
	requireCode(t, remoting.ResSystemError, invoke(t, cl, request(remoting.ReqViewMessageByID, map[string]string{"offset": strconv.FormatInt(phys+1, 10)}, nil)))
	requireCode(t, remoting.ResSystemError, invoke(t, cl, request(remoting.ReqViewMessageByID, map[string]string{"offset": "99999999"}, nil)))
}

// Every other code is REQUEST_CODE_NOT_SUPPORTED naming it, END_TRANSACTION
// included (Gantry has no transactions), and the connection stays usable.
func TestUnsupportedCodes(t *testing.T) {
	e := newEnv(t)
	e.createTopic(t, "T", 4)
	cl := e.dial(t, nil)
	for _, code := range []remoting.RequestCode{remoting.ReqEndTransaction, remoting.ReqSendReplyMessage, remoting.ReqUpdateNameServerConfig, 9999} {
		resp := invoke(t, cl, request(code, map[string]string{"topic": "T"}, nil))
		requireCode(t, remoting.ResRequestCodeNotSupported, resp)
		assert.Contains(t, resp.Remark, strconv.Itoa(int(code)))
	}
	requireCode(t, remoting.ResSuccess, invoke(t, cl, golden(t, "frame_send_request", nil)))
}
