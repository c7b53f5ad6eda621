package compat

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/remoting"
)

// TestOfficialAdminDeleteRecreate deletes a consumed topic with the
// official client's admin (DELETE_TOPIC_IN_BROKER, DELETE_TOPIC_IN_NAMESRV)
// and creates it again (UPDATE_AND_CREATE_TOPIC): the queues start at
// offset 0, and official consumers of the old group and of a new one get
// the new messages only. DELETE_SUBSCRIPTIONGROUP with cleanOffset, as
// mqadmin deleteSubGroup -r sends it (the official Go client has no call
// for it), then removes the group's offsets and its retry topic, and
// succeeds again for a group already deleted, as RocketMQ's broker does.
func TestOfficialAdminDeleteRecreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const topic, group = "T_life", "G_life"
	a := e.officialAdmin()
	ctx := t.Context()
	b := e.c.Broker()
	e.createTopic(topic, 2)
	old := make([]*primitive.Message, 10)
	for i := range old {
		old[i] = primitive.NewMessage(topic, fmt.Appendf(nil, "old-%d", i))
	}
	sendAll(t, e.producer(), old)
	e.waitDispatched(topic, int64(len(old)))
	rec := newRecorder()
	c := e.pushConsumer(group, topic, all, rec.handler("first"))
	rec.waitBodies(t, bodiesOf(old), waitShort)
	eventually(t, waitShort, "the group's offsets committed", func() (bool, string) {
		a, okA := b.QueryOffset(group, topic, 0)
		z, okZ := b.QueryOffset(group, topic, 1)
		return okA && okZ && a+z == int64(len(old)), fmt.Sprint(a, z)
	})
	require.NoError(t, c.Shutdown())

	require.NoError(t, a.DeleteTopic(ctx, admin.WithTopicDelete(topic)))
	_, ok := b.Topic(topic)
	assert.False(t, ok)
	for q := range int32(2) {
		_, ok := b.QueryOffset(group, topic, q)
		assert.False(t, ok, "the group's offsets in the topic go")
	}
	eventually(t, waitShort, "the topic gone from the nameserver", func() (bool, string) {
		list, err := a.FetchAllTopicList(ctx)
		if err != nil {
			return false, err.Error()
		}
		return !slices.Contains(list.TopicList, topic), fmt.Sprint(list.TopicList)
	})

	require.NoError(t, a.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(e.c.BrokerRemotingAddr()),
		admin.WithReadQueueNums(2), admin.WithWriteQueueNums(2)))
	qs, err := e.admin.TopicStatus(ctx, topic)
	require.NoError(t, err)
	for _, q := range qs {
		assert.Zero(t, q.MinOffset, "queue %v", q.Queue)
		assert.Zero(t, q.MaxOffset, "queue %v", q.Queue)
	}
	eventually(t, waitShort, "the topic routed again", func() (bool, string) {
		mqs, err := a.FetchPublishMessageQueues(ctx, topic)
		return err == nil && len(mqs) == 2, fmt.Sprint(mqs, err)
	})
	fresh := make([]*primitive.Message, 4)
	for i := range fresh {
		fresh[i] = primitive.NewMessage(topic, fmt.Appendf(nil, "new-%d", i))
	}
	sendAll(t, e.producer(), fresh)
	e.waitDispatched(topic, int64(len(fresh)))
	rec2 := newRecorder()
	same := e.pushConsumer(group, topic, all, rec2.handler("same group"))
	other := e.pushConsumer(group+"_new", topic, all, rec2.handler("new group"))
	rec2.waitBodies(t, bodiesOf(fresh), waitShort)
	eventually(t, waitShort, "both groups got the new messages", func() (bool, string) {
		n := 0
		for _, body := range bodiesOf(fresh) {
			members := map[string]bool{}
			for _, d := range rec2.deliveries(body) {
				members[d.member] = true
			}
			if len(members) == 2 {
				n++
			}
		}
		return n == len(fresh), fmt.Sprintf("%d of %d", n, len(fresh))
	})
	rec2.mu.Lock()
	for body := range rec2.byBody {
		assert.False(t, strings.HasPrefix(body, "old-"), "an old message was served again: %s", body)
	}
	rec2.mu.Unlock()
	require.NoError(t, same.Shutdown())
	require.NoError(t, other.Shutdown())

	retry := "%RETRY%" + group
	eventually(t, waitShort, "the group's clients gone", func() (bool, string) {
		return len(b.ConsumerList(group)) == 0, fmt.Sprint(b.ConsumerList(group))
	})
	_, ok = b.Topic(retry)
	require.True(t, ok, "the consumer's subscription made the retry topic")
	del := func() *remoting.Command {
		return e.brokerRequest(remoting.ReqDeleteSubscriptionGroup, map[string]string{"groupName": group, "cleanOffset": "true"}, nil)
	}
	requireSuccess(t, del())
	_, ok = b.Topic(retry)
	assert.False(t, ok, "cleanOffset deletes the retry topic")
	for q := range int32(2) {
		_, ok := b.QueryOffset(group, topic, q)
		assert.False(t, ok, "cleanOffset deletes the offsets")
	}
	requireSuccess(t, del())
}
