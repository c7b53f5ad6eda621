package grpcapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/message"
)

// A pull is answered with the records encoded straight from the log, and
// with a unary interceptor configured as the generated *PullResponse: a
// client with gRPC's own codec decodes the same answer either way.
func TestPullAnswerEncodedFromTheLog(t *testing.T) {
	var seen []string // the reply types the interceptor saw
	for _, tt := range []struct {
		name string
		opts []grpc.ServerOption
	}{
		{name: "encoded"},
		{name: "interceptor", opts: []grpc.ServerOption{grpc.UnaryInterceptor(
			func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				resp, err := h(ctx, req)
				if info.FullMethod == gantryv1.Messaging_Pull_FullMethodName {
					seen = append(seen, fmt.Sprintf("%T", resp))
				}
				return resp, err
			})}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, m := startServer(t, tt.opts...)
			require.NoError(t, s.Broker().CreateOrUpdateTopic(metadata.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}))
			var msgs []*message.Message
			for i := range 300 {
				msgs = append(msgs, &message.Message{Topic: "T", QueueID: 0, Body: fmt.Appendf(nil, "body-%d", i)})
			}
			_, err := s.Broker().Send(t.Context(), "T", msgs)
			require.NoError(t, err)

			require.Eventually(t, func() bool { // dispatched
				r, err := m.Pull(t.Context(), &gantryv1.PullRequest{Group: "g", Topic: "T", Offset: 299, MaxMessages: 1})
				return err == nil && r.GetRecordCount() == 1
			}, 5*time.Second, 10*time.Millisecond)

			resp, err := m.Pull(t.Context(), &gantryv1.PullRequest{Group: "g", Topic: "T", Offset: 10, MaxMessages: 256})
			require.NoError(t, err)
			assert.Equal(t, gantryv1.PullStatus_PULL_STATUS_FOUND, resp.GetStatus())
			assert.Equal(t, int32(256), resp.GetRecordCount())
			assert.Equal(t, int64(266), resp.GetNextOffset())
			assert.Equal(t, int64(300), resp.GetMaxOffset())
			b := resp.GetRecords()
			for i := range 256 {
				got, n, err := message.Decode(b)
				require.NoError(t, err)
				assert.Equal(t, fmt.Sprintf("body-%d", 10+i), string(got.Body))
				assert.Equal(t, int64(10+i), got.QueueOffset)
				b = b[n:]
			}
			assert.Empty(t, b)

			resp, err = m.Pull(t.Context(), &gantryv1.PullRequest{Group: "g", Topic: "T", Offset: 300, MaxMessages: 16})
			require.NoError(t, err)
			assert.Equal(t, gantryv1.PullStatus_PULL_STATUS_NO_NEW_MESSAGE, resp.GetStatus())
			assert.Empty(t, resp.GetRecords())
		})
	}
	require.NotEmpty(t, seen)
	for _, s := range seen {
		assert.Equal(t, "*gantryv1.PullResponse", s, "an interceptor sees the generated response")
	}
}
