package embedded_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// One send at a time, 1 KiB, against an in-process broker: the Go client's
// Send and a bare unary gRPC call, to see what the client adds.
//
//	go test -run=^$ -bench=SendOne -benchtime=20000x ./embedded
func BenchmarkSendOne(b *testing.B) {
	c, err := embedded.Start(b.Context(), embedded.Options{})
	require.NoError(b, err)
	defer c.Close(context.Background())
	body := make([]byte, 1024)
	b.Run("client", func(b *testing.B) {
		p, err := client.NewProducer(b.Context(), client.Config{NameServers: []string{c.NameServerAddr()}})
		require.NoError(b, err)
		defer p.Close(context.Background())
		_, err = p.Send(b.Context(), &client.Message{Topic: "One", Body: body})
		require.NoError(b, err)
		for b.Loop() {
			if _, err := p.Send(b.Context(), &client.Message{Topic: "One", Body: body}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unary", func(b *testing.B) {
		cc, err := grpc.NewClient(c.BrokerAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(b, err)
		defer cc.Close()
		m := gantryv1.NewMessagingClient(cc)
		req := &gantryv1.SendRequest{Topic: "One", Messages: []*gantryv1.Message{{QueueId: 0, Body: body}}}
		for b.Loop() {
			if _, err := m.Send(b.Context(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stream", func(b *testing.B) {
		cc, err := grpc.NewClient(c.BrokerAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(b, err)
		defer cc.Close()
		m := gantryv1.NewMessagingClient(cc)
		st, err := m.SendStream(b.Context())
		require.NoError(b, err)
		req := &gantryv1.SendRequest{Topic: "One", Messages: []*gantryv1.Message{{QueueId: 0, Body: body}}}
		for b.Loop() {
			if err := st.Send(req); err != nil {
				b.Fatal(err)
			}
			if _, err := st.Recv(); err != nil {
				b.Fatal(err)
			}
		}
		_ = st.CloseSend()
	})
}
