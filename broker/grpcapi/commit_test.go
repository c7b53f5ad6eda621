package grpcapi_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
)

func entry(topic string, qid int32, off int64) *gantryv1.OffsetEntry {
	return &gantryv1.OffsetEntry{Topic: topic, QueueId: qid, Offset: off}
}

// CommitOffsets commits each entry as CommitOffset would and answers each
// in request order: the good entries of a request are committed whatever
// the bad ones beside them.
func TestCommitOffsetsPerEntry(t *testing.T) {
	s, m := startServer(t)
	require.NoError(t, s.Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}))
	require.NoError(t, s.Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "U", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}))
	offset := func(topic string, qid int32, clientID string) (int64, bool) {
		t.Helper()
		r, err := m.QueryOffset(t.Context(), &gantryv1.QueryOffsetRequest{Group: "G", Topic: topic, QueueId: qid, ClientId: clientID})
		require.NoError(t, err)
		return r.GetOffset(), r.GetFound()
	}

	resp, err := m.CommitOffsets(t.Context(), &gantryv1.CommitOffsetsRequest{Group: "G", Entries: []*gantryv1.OffsetEntry{
		entry("T", 0, 10), entry("T", 3, 13), entry("U", 1, 21),
	}})
	require.NoError(t, err)
	require.Len(t, resp.GetResults(), 3)
	for i, r := range resp.GetResults() {
		assert.Nil(t, r.GetError(), "entry %d", i)
	}
	for _, tt := range []struct {
		topic string
		qid   int32
		want  int64
	}{{"T", 0, 10}, {"T", 3, 13}, {"U", 1, 21}} {
		off, found := offset(tt.topic, tt.qid, "")
		assert.True(t, found, "%s/%d", tt.topic, tt.qid)
		assert.Equal(t, tt.want, off, "%s/%d", tt.topic, tt.qid)
	}

	resp, err = m.CommitOffsets(t.Context(), &gantryv1.CommitOffsetsRequest{Group: "G", Entries: []*gantryv1.OffsetEntry{
		entry("T", 0, 11),   // good
		entry("Nope", 0, 1), // unknown topic
		entry("T", 4, 1),    // queue out of range
		entry("T", 1, -1),   // negative offset
		entry("T", -1, 1),   // negative queue
		entry("U", 0, 5),    // good
		entry("T", 3, 2),    // good: a commit may move back (a reset)
		entry("a b", 0, 1),  // invalid topic name
	}})
	require.NoError(t, err)
	want := []struct {
		code codes.Code
		msg  string
	}{
		{codes.OK, ""}, {codes.NotFound, `"Nope"`}, {codes.InvalidArgument, "queue id 4"},
		{codes.InvalidArgument, "offset -1"}, {codes.InvalidArgument, "queue id -1"},
		{codes.OK, ""}, {codes.OK, ""}, {codes.InvalidArgument, "a b"},
	}
	require.Len(t, resp.GetResults(), len(want))
	for i, w := range want {
		e := resp.GetResults()[i].GetError()
		if w.code == codes.OK {
			assert.Nil(t, e, "entry %d", i)
			continue
		}
		require.NotNil(t, e, "entry %d", i)
		assert.Equal(t, w.code, codes.Code(e.GetCode()), "entry %d: %s", i, e.GetMessage())
		assert.Contains(t, e.GetMessage(), w.msg, "entry %d", i)
	}
	for _, tt := range []struct {
		topic string
		qid   int32
		want  int64
		found bool
	}{{"T", 0, 11, true}, {"U", 0, 5, true}, {"T", 3, 2, true}, {"T", 1, 0, false}} {
		off, found := offset(tt.topic, tt.qid, "")
		assert.Equal(t, tt.found, found, "%s/%d", tt.topic, tt.qid)
		assert.Equal(t, tt.want, off, "%s/%d", tt.topic, tt.qid)
	}

	// client_id: broadcast offsets, the client's own.
	_, err = m.CommitOffsets(t.Context(), &gantryv1.CommitOffsetsRequest{Group: "G", ClientId: "c1", Entries: []*gantryv1.OffsetEntry{entry("T", 2, 7)}})
	require.NoError(t, err)
	off, found := offset("T", 2, "c1")
	assert.True(t, found)
	assert.Equal(t, int64(7), off)
	_, found = offset("T", 2, "")
	assert.False(t, found, "the group's own offset is untouched")

	// lock_holder: refused, entry by entry, on the queues another holds.
	locked, err := m.LockQueues(t.Context(), &gantryv1.LockQueuesRequest{Group: "G", ClientId: "owner", Queues: []*gantryv1.QueueRef{{Topic: "U", QueueId: 1}}})
	require.NoError(t, err)
	require.Len(t, locked.GetLocked(), 1)
	resp, err = m.CommitOffsets(t.Context(), &gantryv1.CommitOffsetsRequest{Group: "G", LockHolder: "lost", Entries: []*gantryv1.OffsetEntry{
		entry("U", 0, 6), entry("U", 1, 99),
	}})
	require.NoError(t, err)
	assert.Nil(t, resp.GetResults()[0].GetError())
	require.NotNil(t, resp.GetResults()[1].GetError())
	assert.Equal(t, codes.FailedPrecondition, codes.Code(resp.GetResults()[1].GetError().GetCode()))
	assert.Contains(t, resp.GetResults()[1].GetError().GetMessage(), `held by "owner", not "lost"`)
	off, _ = offset("U", 1, "")
	assert.Equal(t, int64(21), off, "the held queue's offset did not move")
	off, _ = offset("U", 0, "")
	assert.Equal(t, int64(6), off)
}

// What cannot be answered entry by entry fails the whole request, naming
// the problem: no entries, more than MaxCommitOffsetsEntries, a bad group.
func TestCommitOffsetsRefused(t *testing.T) {
	s, m := startServer(t)
	require.NoError(t, s.Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}))
	over := make([]*gantryv1.OffsetEntry, gantryv1.MaxCommitOffsetsEntries+1)
	for i := range over {
		over[i] = entry("T", 0, int64(i))
	}
	atLimit := over[:gantryv1.MaxCommitOffsetsEntries]
	for _, tt := range []struct {
		name string
		req  *gantryv1.CommitOffsetsRequest
		code codes.Code
		msg  string
	}{
		{"no entries", &gantryv1.CommitOffsetsRequest{Group: "G"}, codes.InvalidArgument, "no entries"},
		{"over the limit", &gantryv1.CommitOffsetsRequest{Group: "G", Entries: over}, codes.InvalidArgument, "1025 entries, at most 1024 (MaxCommitOffsetsEntries)"},
		{"bad group", &gantryv1.CommitOffsetsRequest{Group: "a b", Entries: atLimit[:1]}, codes.InvalidArgument, `group name "a b"`},
		{"no group", &gantryv1.CommitOffsetsRequest{Entries: atLimit[:1]}, codes.InvalidArgument, "group name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.CommitOffsets(t.Context(), tt.req)
			assert.Equal(t, tt.code, status.Code(err), "%v", err)
			assert.Contains(t, status.Convert(err).Message(), tt.msg)
		})
	}
	_, found := s.Broker().QueryOffset("G", "T", 0)
	assert.False(t, found, "a refused request commits nothing")

	resp, err := m.CommitOffsets(t.Context(), &gantryv1.CommitOffsetsRequest{Group: "G", Entries: atLimit})
	require.NoError(t, err, "the limit itself is taken")
	assert.Len(t, resp.GetResults(), gantryv1.MaxCommitOffsetsEntries)
	off, found := s.Broker().QueryOffset("G", "T", 0)
	assert.True(t, found)
	assert.Equal(t, int64(gantryv1.MaxCommitOffsetsEntries-1), off, "entries applied in order")
}
