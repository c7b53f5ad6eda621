package grpcapi_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/message"
)

// A pull is answered with the records encoded straight from the log, and
// with a unary interceptor configured as the generated *PullResponse: a
// client with gRPC's own codec decodes the same answer either way.
func TestPullAnswerEncodedFromTheLog(t *testing.T) {
	var seen []string // the reply types the interceptor saw
	for _, tt := range []struct {
		name  string
		opts  []grpc.ServerOption
		reply string // the type of the reply gRPC sends for a pull
	}{
		{name: "encoded", reply: "*grpcapi.encodedPull"},
		{name: "interceptor", reply: "*gantryv1.PullResponse", opts: []grpc.ServerOption{grpc.UnaryInterceptor(
			func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				resp, err := h(ctx, req)
				if info.FullMethod == gantryv1.Messaging_Pull_FullMethodName {
					seen = append(seen, fmt.Sprintf("%T", resp))
				}
				return resp, err
			})}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			replies := &replyTypes{}
			s, m := startServer(t, append(tt.opts, grpc.StatsHandler(replies))...)
			require.NoError(t, s.Broker().CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}))
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
			types := replies.pulls()
			require.NotEmpty(t, types)
			for _, r := range types {
				assert.Equal(t, tt.reply, r, "the reply gRPC sent for a pull")
			}
		})
	}
	require.NotEmpty(t, seen)
	for _, s := range seen {
		assert.Equal(t, "*gantryv1.PullResponse", s, "an interceptor sees the generated response")
	}
}

// replyTypes is a server stats handler that records the type of every
// reply sent for a Pull.
type replyTypes struct {
	mu    sync.Mutex
	types []string
}

type methodKey struct{}

func (r *replyTypes) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, info.FullMethodName)
}

func (r *replyTypes) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if p, ok := s.(*stats.OutPayload); ok && ctx.Value(methodKey{}) == gantryv1.Messaging_Pull_FullMethodName {
		r.mu.Lock()
		r.types = append(r.types, fmt.Sprintf("%T", p.Payload))
		r.mu.Unlock()
	}
}

func (r *replyTypes) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (r *replyTypes) HandleConn(context.Context, stats.ConnStats) {}

func (r *replyTypes) pulls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.types)
}
