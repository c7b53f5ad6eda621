package grpcapi

import (
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/internal/grpcbuf"
	"github.com/gantrymq/gantry/message"
)

// MaxRequestBytes is the largest request the broker's gRPC server reads:
// the largest valid one, a send of message.MaxBatchBytes of records with
// its other fields (message.MaxEnvelopeBytes). gRPC refuses a larger one
// from its length prefix, before reading it, with RESOURCE_EXHAUSTED
// "received message larger than max".
const MaxRequestBytes = message.MaxEnvelopeBytes

// MaxStreamsPerConn bounds the calls a gRPC connection has in progress:
// each (a held pull, a group watch) costs a goroutine, and gRPC's own
// default is unbounded. A client past it waits for a call to end before it
// starts another. A consumer holds a pull open per queue it consumes from
// this broker, all on one connection.
const MaxStreamsPerConn = 8192

// NewServer returns a gRPC server of the broker's services, Messaging and
// Admin (whose HAStatus reads ha, which may be nil), and its Messaging,
// whose Shutdown ends the producers' send streams. opts are added after the defaults (a receive limit of
// MaxRequestBytes, a buffer pool, a fixed flow-control window), which they
// may replace. Without a unary interceptor, Pull answers with its response
// already encoded (not a *gantryv1.PullResponse); with one, the
// interceptor sees the generated response, at the cost of one more copy of
// the records. With authentication on (b.Guard), every call is
// authenticated by an InTapHandle (opts must not set another) and
// authorized by its handler (docs/SECURITY.md, "Operations and rights").
func NewServer(b *broker.Broker, ha HAReporter, opts ...grpc.ServerOption) (*grpc.Server, *Messaging) {
	// Requests up to the largest valid one, a little over gRPC's 4 MiB
	// default (docs/BROKER.md, "Size limits"). Buffers are not zeroed for
	// every message, and the flow-control window is fixed (internal/grpcbuf).
	all := append([]grpc.ServerOption{grpc.UnknownServiceHandler(notHere(b)), grpc.MaxRecvMsgSize(MaxRequestBytes),
		experimental.BufferPool(grpcbuf.Shared), grpc.ForceServerCodecV2(grpcbuf.Codec{}),
		grpc.InitialWindowSize(grpcbuf.FlowWindow), grpc.InitialConnWindowSize(grpcbuf.FlowWindow),
		grpc.MaxConcurrentStreams(MaxStreamsPerConn)}, opts...)
	if g := b.Guard(); g != nil {
		all = append(all, grpc.InTapHandle(authTap(g)))
	}
	gs := grpc.NewServer(all...)
	msg := NewMessaging(b)
	gs.RegisterService(messagingDesc(msg), msg) // Pull answers already encoded
	gantryv1.RegisterAdminServer(gs, NewAdmin(b, ha))
	return gs, msg
}

// notHere answers a call of a service the broker does not serve: a
// nameserver's, from a client given the broker's address as a
// nameserver's.
func notHere(b *broker.Broker) grpc.StreamHandler {
	return func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		ns := "not configured"
		if addrs := b.Config().NamesrvAddr; len(addrs) > 0 {
			ns = strings.Join(addrs, ";")
		}
		return status.Errorf(codes.Unimplemented, "this is Gantry broker %s, which does not serve %s: its nameservers are %s",
			b.Config().BrokerName, method, ns)
	}
}
