package grpcapi

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/internal/grpcbuf"
)

// messagingDesc is the Messaging service with a Pull handler that answers
// with the response already encoded (encodedPull): the records are copied
// once, from the log's mapping into the buffer gRPC writes, instead of
// into a slice of their own (a fresh allocation of a pull's size, about
// 256 KiB, the broker's largest garbage when it serves consumers) that
// proto.Marshal then copies again. With a unary interceptor configured
// (GRPCOptions), Pull answers a *PullResponse as generated, since an
// interceptor may look at it.
func messagingDesc(s *Messaging) *grpc.ServiceDesc {
	desc := gantryv1.Messaging_ServiceDesc
	desc.Methods = append([]grpc.MethodDesc(nil), desc.Methods...)
	for i, m := range desc.Methods {
		if m.MethodName != "Pull" {
			continue
		}
		generated := m.Handler
		desc.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			if interceptor != nil {
				return generated(srv, ctx, dec, interceptor)
			}
			req := new(gantryv1.PullRequest)
			if err := dec(req); err != nil {
				return nil, err
			}
			return s.pullEncoded(ctx, req)
		}
	}
	return &desc
}

// pullEncoded is Pull, encoded while the records are held.
func (s *Messaging) pullEncoded(ctx context.Context, req *gantryv1.PullRequest) (*encodedPull, error) {
	res, resp, n, err := s.pulled(ctx, req)
	if err != nil {
		return nil, err
	}
	defer res.Release()
	size := resp.SizeWithRecords(n)
	buf := grpcbuf.Shared.Get(size)
	b := resp.AppendMarshalFunc((*buf)[:0], n, func(b []byte) []byte { return appendRecords(b, &res) })
	if len(b) != size { // then it also went past the buffer (whose capacity is at least size)
		grpcbuf.Shared.Put(buf)
		return nil, status.Errorf(codes.Internal, "pull: response encoded to %d bytes, not its size %d", len(b), size)
	}
	*buf = b
	return &encodedPull{data: mem.BufferSlice{mem.NewBuffer(buf, grpcbuf.Shared)}}, nil
}

// pulled runs req and returns its result (for the caller to Release), the
// response without its records, and the records' size.
func (s *Messaging) pulled(ctx context.Context, req *gantryv1.PullRequest) (broker.PullResult, *gantryv1.PullResponse, int, error) {
	res, err := s.b.Pull(ctx, pullRequest(req))
	if err != nil {
		return res, nil, 0, toStatus(err)
	}
	n := 0
	for _, r := range res.Records {
		n += len(r.B)
	}
	return res, &gantryv1.PullResponse{
		Status: pullStatus(res.Status), RecordCount: int32(len(res.Records)),
		NextOffset: res.NextOffset, MinOffset: res.MinOffset, MaxOffset: res.MaxOffset,
	}, n, nil
}

// appendRecords appends res's records to b.
func appendRecords(b []byte, res *broker.PullResult) []byte {
	for _, r := range res.Records {
		b = append(b, r.B...)
	}
	return b
}

// encodedPull is a pull's answer, encoded (grpcbuf.Encoded). gRPC
// marshals a reply once, on the handler's goroutine.
type encodedPull struct {
	data mem.BufferSlice
}

// TakeEncoding implements grpcbuf.Encoded.
func (e *encodedPull) TakeEncoding() (mem.BufferSlice, error) {
	d := e.data
	if d == nil {
		return nil, errors.New("grpcapi: the encoded pull response was taken already")
	}
	e.data = nil
	return d, nil
}

// pullRequest is the broker's request for req.
func pullRequest(req *gantryv1.PullRequest) broker.PullRequest {
	return broker.PullRequest{
		Group: req.GetGroup(), Topic: req.GetTopic(), QueueID: req.GetQueueId(), Offset: req.GetOffset(),
		MaxMsgs: int(req.GetMaxMessages()), MaxBytes: int(req.GetMaxBytes()), Filter: req.GetFilterExpression(),
		Hold: time.Duration(req.GetHoldMs()) * time.Millisecond,
	}
}
