package embedded_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// lifeCluster starts a cluster with topic Orders (2 queues) holding 10
// messages that group "e2e" consumed and committed.
func lifeCluster(t *testing.T) (*embedded.Cluster, *client.Producer, *client.PullConsumer, *client.Admin) {
	t.Helper()
	c, err := embedded.Start(t.Context(), embedded.Options{NoAutoCreateTopics: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	p, pc, a := newClients(t, c)
	createOrders(t, a)
	for i := range 10 {
		_, err := p.Send(t.Context(), &client.Message{Topic: "Orders", Body: fmt.Appendf(nil, "old-%d", i), Keys: []string{fmt.Sprint("k-", i)}})
		require.NoError(t, err)
	}
	require.Len(t, drain(t, pc, "Orders", ""), 10)
	return c, p, pc, a
}

func createOrders(t *testing.T, a *client.Admin) {
	t.Helper()
	require.NoError(t, a.CreateTopic(t.Context(), client.TopicConfig{Name: "Orders", ReadQueueNums: 2, WriteQueueNums: 2}))
	require.Eventually(t, func() bool { _, err := a.Route(t.Context(), "Orders"); return err == nil }, 5*time.Second, 10*time.Millisecond)
}

// checkFresh checks that Orders, created again, is empty at offset 0 for
// the old group and a new one, and that both get the new messages only.
func checkFresh(t *testing.T, c *embedded.Cluster, p *client.Producer, old *client.PullConsumer, a *client.Admin) {
	t.Helper()
	qs, err := a.TopicStatus(t.Context(), "Orders")
	require.NoError(t, err)
	require.Len(t, qs, 2)
	for _, q := range qs {
		assert.Zero(t, q.MinOffset, "queue %v", q.Queue)
		assert.Zero(t, q.MaxOffset, "queue %v", q.Queue)
	}
	fresh, err := client.NewPullConsumer(t.Context(), client.Config{NameServers: []string{c.NameServerAddr()}}, "fresh")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, fresh.Close(context.Background())) })
	assert.Empty(t, drain(t, old, "Orders", ""), "the old group")
	assert.Empty(t, drain(t, fresh, "Orders", ""), "a new group")
	for i := range 3 {
		_, err := p.Send(t.Context(), &client.Message{Topic: "Orders", Body: fmt.Appendf(nil, "new-%d", i), Keys: []string{fmt.Sprint("k-", i)}})
		require.NoError(t, err)
	}
	for _, pc := range []*client.PullConsumer{old, fresh} {
		var got []string
		for _, m := range drain(t, pc, "Orders", "") {
			got = append(got, string(m.Body))
		}
		assert.ElementsMatch(t, []string{"new-0", "new-1", "new-2"}, got, pc.Group())
	}
}

// deleteTopic then updateTopic through the Go client's admin: the queue
// files go, the nameserver stops routing the topic, and the topic created
// again serves no old message to any group.
func TestDeleteTopicRecreate(t *testing.T) {
	c, p, pc, a := lifeCluster(t)
	dir := filepath.Join(c.Broker().Config().StorePathRootDir, "consumequeue", "Orders")
	_, err := os.Stat(dir)
	require.NoError(t, err)

	require.NoError(t, a.DeleteTopic(t.Context(), "Orders"))
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "the queue files are gone: %v", err)
	require.Eventually(t, func() bool { _, err := a.Route(t.Context(), "Orders"); return err != nil }, 5*time.Second, 10*time.Millisecond,
		"the nameserver stops routing it")
	require.NoError(t, a.DeleteTopic(t.Context(), "Orders"), "deleting it again is fine")

	createOrders(t, a)
	checkFresh(t, c, p, pc, a)
}

// A broker stopped in the middle of a deletion (the store's tombstone
// written and its queues deleted, the topic config and the group offsets
// still saved) finishes it when it starts again.
func TestDeleteTopicInterruptedFinishesAtStart(t *testing.T) {
	for _, storeDone := range []bool{false, true} {
		t.Run(fmt.Sprint("queues deleted: ", storeDone), func(t *testing.T) {
			c, p, pc, a := lifeCluster(t)
			sc := c.Broker().Config().StoreConfig()
			require.NoError(t, c.KillBroker())
			st, err := store.Open(t.Context(), sc) // the broker's store, as the stop left it
			require.NoError(t, err)
			require.NoError(t, st.BeginDeleteTopic("Orders"))
			if storeDone {
				require.NoError(t, st.DeleteTopic("Orders"))
			}
			require.NoError(t, st.Close())
			require.NoError(t, c.StartBroker(t.Context()))
			b := c.Broker()
			_, ok := b.Topic("Orders")
			assert.False(t, ok, "the config goes")
			for q := range int32(2) {
				_, ok := b.QueryOffset("e2e", "Orders", q)
				assert.False(t, ok, "the offsets go")
			}
			assert.Empty(t, b.PendingTopicDeletions())
			_, err = os.Stat(filepath.Join(b.Config().StorePathRootDir, "consumequeue", "Orders"))
			assert.True(t, os.IsNotExist(err), "%v", err)
			require.Eventually(t, func() bool { _, err := a.Route(t.Context(), "Orders"); return err != nil }, 5*time.Second, 10*time.Millisecond)

			createOrders(t, a)
			checkFresh(t, c, p, pc, a)
		})
	}
}
