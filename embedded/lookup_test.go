package embedded_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

// A lookup by key or UNIQ_KEY sees the messages acknowledged before it,
// even when the dispatcher has not indexed them yet: it waits for the
// dispatcher to pass them instead of answering NOT_FOUND, over gRPC and
// over remoting (as gantry admin queryMsgById right after a send would,
// when it came first).
func TestKeyLookupSeesAcknowledgedMessages(t *testing.T) {
	gate := make(chan struct{})
	var open sync.Once
	release := func() { open.Do(func() { close(gate) }) }
	c, cl := start(t, embedded.Options{Broker: func(bc *broker.Config) {
		bc.StoreOverride = func(sc *store.Config) {
			sc.OnDispatch = func(topic string, _ int32, _ int64) {
				if topic == "Lag" {
					<-gate // the dispatcher is behind until the test lets it on
				}
			}
		}
	}})
	t.Cleanup(release) // before the cluster closes, which waits for the dispatcher
	_, err := cl.admin.CreateTopic(t.Context(), &gantryv1.CreateTopicRequest{Topic: &gantryv1.TopicConfig{Name: "Lag", ReadQueueNums: 1, WriteQueueNums: 1}})
	require.NoError(t, err)
	resp, err := cl.msg.Send(t.Context(), &gantryv1.SendRequest{Topic: "Lag", Messages: []*gantryv1.Message{
		{QueueId: 0, Body: []byte("late"), Properties: map[string]string{"KEYS": "k1"}}}})
	require.NoError(t, err)
	uniq := resp.GetResults()[0].GetUniqKey()

	type answer struct {
		what    string
		records []byte
		err     error
	}
	done := make(chan answer, 3)
	go func() {
		r, err := cl.admin.QueryMessageById(t.Context(), &gantryv1.QueryMessageByIdRequest{MsgId: uniq})
		done <- answer{"by UNIQ_KEY", r.GetRecords(), err}
	}()
	go func() {
		r, err := cl.admin.QueryMessageByKey(t.Context(), &gantryv1.QueryMessageByKeyRequest{Topic: "Lag", Key: "k1"})
		done <- answer{"by key", r.GetRecords(), err}
	}()
	go func() { // the remoting QUERY_MESSAGE of mqadmin queryMsgByKey and the official client
		const what = "by key over remoting"
		rc, err := remoting.Dial(t.Context(), c.BrokerRemotingAddr(), remoting.DialOptions{})
		if err != nil {
			done <- answer{what, nil, err}
			return
		}
		defer rc.Close()
		resp, err := rc.Invoke(t.Context(), remoting.NewRequest(remoting.ReqQueryMessage,
			map[string]string{"topic": "Lag", "key": "k1", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "9223372036854775807"}))
		if err == nil && resp.ResponseCode() != remoting.ResSuccess {
			err = fmt.Errorf("%v: %s", resp.ResponseCode(), resp.Remark)
		}
		if err != nil {
			done <- answer{what, nil, err}
			return
		}
		done <- answer{what, resp.Body, nil}
	}()
	select {
	case a := <-done:
		require.Failf(t, "answered before the message was indexed", "%s: %v", a.what, a.err)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	for range 3 {
		a := <-done
		if assert.NoError(t, a.err, a.what) {
			ms, err := message.DecodeAll(a.records)
			require.NoError(t, err)
			require.Len(t, ms, 1, a.what)
			assert.Equal(t, "late", string(ms[0].Body), a.what)
		}
	}
}
