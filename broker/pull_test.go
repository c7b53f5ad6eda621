package broker_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

func TestParseFilter(t *testing.T) {
	tests := []struct {
		expr    string
		all     bool
		tags    []string
		wantErr string
	}{
		{expr: "", all: true},
		{expr: "*", all: true},
		{expr: "  *  ", all: true},
		{expr: "TagA", tags: []string{"TagA"}},
		{expr: "TagA || TagB", tags: []string{"TagA", "TagB"}},
		{expr: " TagA||TagB ||  TagA ", tags: []string{"TagA", "TagB"}},
		{expr: "TagA ||", wantErr: "empty tag"},
		{expr: "|| TagA", wantErr: "empty tag"},
		{expr: "TagA |||| TagB", wantErr: "empty tag"},
		{expr: "TagA || *", wantErr: `"*" must be the whole expression`},
		{expr: "TagA | TagB", wantErr: `tag "TagA | TagB" contains '|' or whitespace`},
		{expr: "Tag A", wantErr: "contains '|' or whitespace"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			f, err := broker.ParseFilter(tt.expr)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, broker.ErrInvalidArgument)
				assert.ErrorContains(t, err, tt.wantErr)
				assert.ErrorContains(t, err, fmt.Sprintf("%q", strings.TrimSpace(tt.expr)))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.all, f.MatchesAll())
			assert.Equal(t, tt.tags, f.Tags())
			for _, tag := range tt.tags {
				assert.True(t, f.Match(tag))
			}
			assert.Equal(t, tt.all, f.Match("Other"))
		})
	}
}

func TestPullFilter(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 1)
	tags := []string{"A", "B", "C", "", "A", "B"}
	for i, tag := range tags {
		send(t, b, newMsg("T", 0, fmt.Sprintf("%d%s", i, tag), tag))
	}
	waitVisible(t, b, "T", 0, int64(len(tags)))
	tests := []struct {
		expr string
		want []string
	}{
		{"", []string{"0A", "1B", "2C", "3", "4A", "5B"}},
		{"*", []string{"0A", "1B", "2C", "3", "4A", "5B"}},
		{"A", []string{"0A", "4A"}},
		{"A || B", []string{"0A", "1B", "4A", "5B"}},
		{"C||Z", []string{"2C"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			res, got := pull(t, b, broker.PullRequest{Topic: "T", Filter: tt.expr, MaxMsgs: 32})
			assert.Equal(t, store.Found, res.Status)
			assert.Equal(t, tt.want, bodies(got))
			assert.Equal(t, int64(len(tags)), res.NextOffset)
		})
	}
	res, got := pull(t, b, broker.PullRequest{Topic: "T", Filter: "Z"})
	assert.Equal(t, store.NoMatchedMessage, res.Status)
	assert.Empty(t, got)
	assert.Equal(t, int64(len(tags)), res.NextOffset, "the consumer moves past what does not match")

	_, err := b.Pull(t.Context(), broker.PullRequest{Topic: "T", Filter: "A ||"})
	require.ErrorIs(t, err, broker.ErrInvalidArgument)
}

func TestPullFilterTagCollision(t *testing.T) {
	require.Equal(t, message.TagsCode("Aa"), message.TagsCode("BB"), "the test needs colliding tags")
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 1)
	for i, tag := range []string{"Aa", "BB", "Aa", "BB", "BB"} {
		send(t, b, newMsg("T", 0, fmt.Sprintf("%d%s", i, tag), tag))
	}
	waitVisible(t, b, "T", 0, 5)
	_, got := pull(t, b, broker.PullRequest{Topic: "T", Filter: "Aa"})
	assert.Equal(t, []string{"0Aa", "2Aa"}, bodies(got))
	_, got = pull(t, b, broker.PullRequest{Topic: "T", Filter: "BB"})
	assert.Equal(t, []string{"1BB", "3BB", "4BB"}, bodies(got))
	res, got := pull(t, b, broker.PullRequest{Topic: "T", Filter: "Aa", Offset: 3})
	assert.Empty(t, got)
	assert.Equal(t, store.NoMatchedMessage, res.Status, "only colliding tags were found")
	assert.Equal(t, int64(5), res.NextOffset)
}

func TestPullValidation(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 2)
	require.NoError(t, b.CreateOrUpdateTopic(metadata.TopicConfig{TopicName: "WriteOnly", ReadQueueNums: 1, WriteQueueNums: 1, Perm: metadata.PermWrite}))
	g := metadata.DefaultSubscriptionGroup("Disabled")
	g.ConsumeEnable = false
	require.NoError(t, b.Store().Metadata().PutGroup(g))
	tests := []struct {
		name    string
		req     broker.PullRequest
		wantErr error
		wantMsg string
	}{
		{"bad topic", broker.PullRequest{Topic: "a/b"}, broker.ErrInvalidTopic, `"a/b"`},
		{"unknown topic", broker.PullRequest{Topic: "Nope"}, broker.ErrTopicNotFound, `"Nope"`},
		{"not readable", broker.PullRequest{Topic: "WriteOnly"}, broker.ErrNoPermission, "not readable"},
		{"queue too big", broker.PullRequest{Topic: "T", QueueID: 2}, broker.ErrInvalidArgument, "queue id 2: topic \"T\" has read queues 0..1"},
		{"queue negative", broker.PullRequest{Topic: "T", QueueID: -1}, broker.ErrInvalidArgument, "queue id -1"},
		{"offset negative", broker.PullRequest{Topic: "T", Offset: -1}, broker.ErrInvalidArgument, "offset -1"},
		{"max msgs negative", broker.PullRequest{Topic: "T", MaxMsgs: -1}, broker.ErrInvalidArgument, "maxMsgs -1"},
		{"bad group", broker.PullRequest{Topic: "T", Group: "g g"}, broker.ErrInvalidArgument, `group name "g g"`},
		{"group disabled", broker.PullRequest{Topic: "T", Group: "Disabled"}, broker.ErrNoPermission, "consumption disabled"},
		{"bad filter", broker.PullRequest{Topic: "T", Filter: "||"}, broker.ErrInvalidArgument, "empty tag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.Pull(t.Context(), tt.req)
			require.ErrorIs(t, err, tt.wantErr)
			assert.ErrorContains(t, err, tt.wantMsg)
		})
	}
}

func TestPullOffsets(t *testing.T) {
	b := openBroker(t, testConfig(t))
	createTopic(t, b, "T", 1)
	res, _ := pull(t, b, broker.PullRequest{Topic: "T"})
	assert.Equal(t, store.NoMessageInQueue, res.Status)
	for i := range 3 {
		send(t, b, newMsg("T", 0, fmt.Sprint(i), ""))
	}
	waitVisible(t, b, "T", 0, 3)
	res, _ = pull(t, b, broker.PullRequest{Topic: "T", Offset: 9})
	assert.Equal(t, store.OffsetOverflowBadly, res.Status)
	assert.Equal(t, int64(3), res.NextOffset)
	assert.Equal(t, int64(3), res.MaxOffset)
	res, got := pull(t, b, broker.PullRequest{Topic: "T", MaxBytes: 1})
	assert.Len(t, got, 1, "at least one message, whatever MaxBytes")
	assert.Equal(t, int64(1), res.NextOffset)
}

// A pull's byte budget is bounded so that its answer (at most the budget,
// or one record when the first is larger) never exceeds the largest
// record, which clients' receive limits are sized for.
func TestPullLimits(t *testing.T) {
	for _, tt := range []struct {
		name                string
		msgs, bytes         int
		wantMsgs, wantBytes int
	}{
		{"defaults", 0, 0, broker.DefaultPullMsgs, broker.DefaultPullBytes},
		{"asked", 10, 1000, 10, 1000},
		{"too many", 5000, 0, broker.MaxPullMsgs, broker.DefaultPullBytes},
		{"too many bytes", 1, 1 << 30, 1, message.MaxRecordBytes},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msgs, bytes := broker.PullLimits(tt.msgs, tt.bytes)
			assert.Equal(t, tt.wantMsgs, msgs)
			assert.Equal(t, tt.wantBytes, bytes)
		})
	}
	assert.LessOrEqual(t, broker.DefaultPullBytes, broker.MaxPullBytes)
	assert.Less(t, broker.MaxPullBytes+1024, message.MaxEnvelopeBytes, "a pull answer fits a client's receive limit")
}
