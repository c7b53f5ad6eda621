package compat

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"

	"github.com/gantrymq/gantry/client"
)

// TestQueryMessages looks messages the official producer sent up with
// Gantry's admin (the official client has no query calls): by the offset
// message id it was told (offsetMsgId), by its own id (msgId, the
// UNIQ_KEY, which the broker indexes as a key) and by user keys, one of
// them shared by several messages.
func TestQueryMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const topic = "T_query"
	e.createTopic(topic, 4)
	p := e.producer()
	begin := time.Now().Add(-time.Minute)
	var msgs []*primitive.Message
	for i := range 12 {
		msgs = append(msgs, testMessage(topic, "query", i))
	}
	res := sendAll(t, p, msgs)
	end := time.Now().Add(time.Minute)
	target := res[5] // keys "query-key-5" and "order-1" (shared with messages 4, 6 and 7)

	tests := []struct {
		name  string
		query func() ([]*client.MessageExt, error)
		want  []sent
	}{
		{"ByOffsetMsgID", func() ([]*client.MessageExt, error) {
			m, err := e.admin.QueryMessageByID(t.Context(), target.offsetMsgID)
			return []*client.MessageExt{m}, err
		}, []sent{target}},
		{"ByMsgID", func() ([]*client.MessageExt, error) {
			return e.admin.QueryMessageByKey(t.Context(), topic, target.msgID, begin, end, 32)
		}, []sent{target}},
		{"ByKey", func() ([]*client.MessageExt, error) {
			return e.admin.QueryMessageByKey(t.Context(), topic, "query-key-5", begin, end, 32)
		}, []sent{target}},
		{"BySharedKey", func() ([]*client.MessageExt, error) {
			return e.admin.QueryMessageByKey(t.Context(), topic, "order-1", begin, end, 32)
		}, res[4:8]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The broker indexes keys as it dispatches stored messages,
			// after it answered the send: poll.
			var got []*client.MessageExt
			start := time.Now()
			eventually(t, waitShort, tt.name, func() (bool, string) {
				var err error
				got, err = tt.query()
				return err == nil && len(got) == len(tt.want), fmt.Sprintf("%d of %d found, error %v", len(got), len(tt.want), err)
			})
			byID := map[string]*client.MessageExt{}
			for _, m := range got {
				byID[m.UniqKey] = m
			}
			for _, w := range tt.want {
				m := byID[w.msgID]
				if !assert.NotNil(t, m, "%s not found", w.msgID) {
					continue
				}
				assert.Equal(t, string(w.msg.Body), string(m.Body), "body")
				assert.Equal(t, w.offsetMsgID, m.MsgID(), "offset message id")
				assert.Equal(t, int32(w.queue), m.Queue.ID, "queue")
				assert.Equal(t, w.queueOffset, m.QueueOffset, "queue offset")
				assert.Equal(t, w.msg.GetTags(), m.Tags, "tags")
			}
			t.Logf("%s: %d found within %s: %s", tt.name, len(got), time.Since(start).Round(time.Millisecond), fmt.Sprint(bodies(got)))
		})
	}
}

func bodies(ms []*client.MessageExt) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Body)
	}
	return out
}
