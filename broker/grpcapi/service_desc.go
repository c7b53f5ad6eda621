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
	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/internal/grpcbuf"
)

// messagingDesc is the Messaging service with two handlers of its own:
//
//   - Send decodes every request with the one SendRequest decoder
//     (pooledSendRequest.UnmarshalPooled, as SendStream does) and releases
//     it once answered;
//   - Pull answers with the response already encoded (encodedPull): the
//     records are copied once, from the log's mapping into the buffer gRPC
//     writes, instead of into a slice of a pull's size that proto.Marshal
//     then copies again. With a unary interceptor configured
//     (GRPCOptions), Pull answers a *PullResponse as generated, since an
//     interceptor may look at it.
func messagingDesc(s *Messaging) *grpc.ServiceDesc {
	desc := gantryv1.Messaging_ServiceDesc
	desc.Methods = append([]grpc.MethodDesc(nil), desc.Methods...)
	for i, m := range desc.Methods {
		switch m.MethodName {
		case "Send":
			desc.Methods[i].Handler = s.sendHandler
		case "Pull":
			desc.Methods[i].Handler = s.pullHandler
		}
	}
	return &desc
}

// sendHandler is the Send method's handler.
func (s *Messaging) sendHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	p := new(pooledSendRequest)
	if err := dec(p); err != nil {
		return nil, err
	}
	defer p.release() // the answer holds nothing of the request
	if interceptor == nil {
		return s.Send(ctx, &p.req)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: gantryv1.Messaging_Send_FullMethodName}
	return interceptor(ctx, &p.req, info, func(ctx context.Context, req any) (any, error) {
		return s.Send(ctx, req.(*gantryv1.SendRequest))
	})
}

// pullHandler is the Pull method's handler.
func (s *Messaging) pullHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	req := new(gantryv1.PullRequest)
	if err := dec(req); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return s.pull(ctx, req, false)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: gantryv1.Messaging_Pull_FullMethodName}
	return interceptor(ctx, req, info, func(ctx context.Context, req any) (any, error) {
		return s.Pull(ctx, req.(*gantryv1.PullRequest))
	})
}

// Pull implements the service: pull's generated answer.
func (s *Messaging) Pull(ctx context.Context, req *gantryv1.PullRequest) (*gantryv1.PullResponse, error) {
	resp, err := s.pull(ctx, req, true)
	if err != nil {
		return nil, err
	}
	return resp.(*gantryv1.PullResponse), nil
}

// pull is the one pull handler: the broker's Pull of req, answered while
// its records are held, encoded (*encodedPull) or, when generated, as a
// *gantryv1.PullResponse with the records copied into it.
func (s *Messaging) pull(ctx context.Context, req *gantryv1.PullRequest, generated bool) (any, error) {
	if err := s.guard.allow(ctx, gantryv1.Messaging_Pull_FullMethodName, auth.Topic(req.GetTopic()), auth.Group(req.GetGroup())); err != nil {
		return nil, err
	}
	res, err := s.b.Pull(ctx, pullRequest(req))
	if err != nil {
		return nil, toStatus(err)
	}
	defer res.Release()
	n := 0
	for _, r := range res.Records {
		n += len(r.B)
	}
	resp := &gantryv1.PullResponse{
		Status: pullStatus(res.Status), RecordCount: int32(len(res.Records)),
		NextOffset: res.NextOffset, MinOffset: res.MinOffset, MaxOffset: res.MaxOffset,
	}
	if generated {
		resp.Records = appendRecords(make([]byte, 0, n), &res)
		return resp, nil
	}
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
