package grpcapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/message"
)

// Messaging implements the Messaging service over a broker.
type Messaging struct {
	gantryv1.UnimplementedMessagingServer
	b        *broker.Broker
	guard    guard
	shutdown chan struct{}
	once     sync.Once
}

// NewMessaging returns the Messaging service of b.
func NewMessaging(b *broker.Broker) *Messaging {
	return &Messaging{b: b, guard: guard{b.Guard()}, shutdown: make(chan struct{})}
}

// Shutdown ends every SendStream after the request it is handling, and
// every WatchGroup stream, so that a graceful server stop does not wait for
// producers and consumers to hang up.
func (s *Messaging) Shutdown() { s.once.Do(func() { close(s.shutdown) }) }

// Send implements the service.
func (s *Messaging) Send(ctx context.Context, req *gantryv1.SendRequest) (*gantryv1.SendResponse, error) {
	resp, err := s.send(ctx, gantryv1.Messaging_Send_FullMethodName, req)
	return resp, toStatus(err)
}

// send stores the messages of req, a request of method (Send or
// SendStream).
func (s *Messaging) send(ctx context.Context, method string, req *gantryv1.SendRequest) (*gantryv1.SendResponse, error) {
	if err := s.guard.allow(ctx, method, auth.Topic(req.GetTopic())); err != nil {
		return nil, err
	}
	if len(req.GetRecords()) > 0 {
		if len(req.GetMessages()) > 0 {
			return nil, status.Error(codes.InvalidArgument, "send: give messages or records, not both")
		}
		res, err := s.b.SendAttempt(ctx, req.GetTopic(), req.GetAttempt(), req.GetRecords())
		if err != nil {
			return nil, err
		}
		results := toResults(res)
		for _, r := range results {
			if !r.Duplicate {
				r.UniqKey = "" // the producer wrote it into the record: it knows it
			}
		}
		return &gantryv1.SendResponse{Results: results, RequestId: req.GetRequestId()}, nil
	}
	if len(req.GetMessages()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "send: no messages")
	}
	born := bornHost(ctx)
	msgs := make([]*message.Message, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = toMessage(req.GetTopic(), m, born)
	}
	res, err := s.b.Send(ctx, req.GetTopic(), msgs)
	if err != nil {
		return nil, err
	}
	return &gantryv1.SendResponse{Results: toResults(res), RequestId: req.GetRequestId()}, nil
}

// maxIdleSendWorkers is how many idle workers a SendStream keeps for its
// next requests; the others exit when their request is done.
const maxIdleSendWorkers = 4

// SendStream implements the service. Requests are stored in the order they
// arrive, but under SYNC_FLUSH (or on a SYNC_MASTER) the next one is
// started as soon as the previous one holds its place in the log, without
// waiting for it to be flushed (replicated): the requests in flight share
// group commits (and frames to the slaves). Responses carry the
// request_id and may overtake each other.
//
// The stream is read by workers, one at a time: the reading worker stores
// the request it read and answers it, then reads the next one, so that a
// request crosses no goroutine between gRPC's reader and writer. Under
// SYNC_FLUSH a worker passes the reading on to another once its request is
// placed, and waits for the flush.
func (s *Messaging) SendStream(stream grpc.BidiStreamingServer[gantryv1.SendRequest, gantryv1.SendResponse]) error {
	w := &sendStreamer{
		m: s, stream: stream, ctx: stream.Context(),
		pass:  s.b.WaitsAfterAppend(),
		turn:  make(chan struct{}),
		ended: make(chan error, 1),
		done:  make(chan struct{}),
		fail:  make(chan struct{}),
	}
	defer w.close()
	go w.work()
	select {
	case err := <-w.ended:
		if errors.Is(err, io.EOF) {
			w.close() // the answers first
			return w.sendError()
		}
		return err
	case <-w.fail:
		return w.sendError()
	case <-w.ctx.Done():
		return w.ctx.Err()
	case <-s.shutdown:
		return status.Error(codes.Unavailable, "broker shutting down")
	}
}

// sendStreamer is the state of one SendStream.
type sendStreamer struct {
	m      *Messaging
	stream grpc.BidiStreamingServer[gantryv1.SendRequest, gantryv1.SendResponse]
	ctx    context.Context
	pass   bool          // SYNC_FLUSH or SYNC_MASTER: pass the reading on once a request is placed
	turn   chan struct{} // unbuffered: gives the reading to an idle worker
	ended  chan error    // the reading ended: io.EOF or why
	done   chan struct{} // closed when the handler ends: idle workers exit
	idle   atomic.Int32  // idle workers

	mu       sync.Mutex
	closing  bool           // the handler is ending: no more requests are started
	inflight sync.WaitGroup // requests started and not answered

	sendMu  sync.Mutex    // stream.Send is not safe for concurrent use
	sendErr error         // why an answer could not be sent
	fail    chan struct{} // closed with sendErr
}

// work reads and handles requests until it passes the reading on (and
// then waits for it to come back) or the stream ends.
func (w *sendStreamer) work() {
	for {
		p := new(pooledSendRequest)
		if err := w.stream.RecvMsg(p); err != nil {
			w.ended <- err // one reader at a time, and none after this
			return
		}
		req := &p.req
		if !w.start() {
			return
		}
		passed := false
		ctx := w.ctx
		if w.pass {
			ctx = broker.WithAppended(ctx, func() {
				if !passed { // Append calls this on this goroutine
					passed = true
					w.passOn()
				}
			})
		}
		resp, err := w.m.send(ctx, gantryv1.Messaging_SendStream_FullMethodName, req)
		w.respond(req, resp, err)
		p.release() // answered: nothing of the request is kept
		w.inflight.Done()
		if !passed {
			continue // failed before it was placed, or ASYNC_FLUSH: still the reader
		}
		if w.idle.Add(1) > maxIdleSendWorkers {
			w.idle.Add(-1)
			return
		}
		select {
		case <-w.turn:
			w.idle.Add(-1)
		case <-w.done:
			return
		}
	}
}

// passOn gives the reading to an idle worker or a new one.
func (w *sendStreamer) passOn() {
	select {
	case w.turn <- struct{}{}:
	default:
		go w.work()
	}
}

// start counts a request in flight, unless the handler is ending.
func (w *sendStreamer) start() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return false
	}
	w.inflight.Add(1)
	return true
}

// close starts no more requests, waits for the answers of those in flight
// and lets idle workers go. A worker still reading returns when the
// stream's context ends, after the handler.
func (w *sendStreamer) close() {
	w.mu.Lock()
	was := w.closing
	w.closing = true
	w.mu.Unlock()
	if was {
		return
	}
	w.inflight.Wait()
	close(w.done)
}

func (w *sendStreamer) respond(req *gantryv1.SendRequest, resp *gantryv1.SendResponse, err error) {
	if err != nil {
		st := status.Convert(toStatus(err))
		resp = &gantryv1.SendResponse{RequestId: req.GetRequestId(), Error: &gantryv1.Error{
			Code: int32(st.Code()), Message: st.Message(), Indeterminate: broker.IsIndeterminate(err)}}
	}
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	if w.sendErr != nil {
		return
	}
	if w.sendErr = w.stream.Send(resp); w.sendErr != nil {
		close(w.fail)
	}
}

func (w *sendStreamer) sendError() error {
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	return w.sendErr
}

// toMessage converts an API message; validation is the broker's.
func toMessage(topic string, m *gantryv1.Message, born netip.AddrPort) *message.Message {
	out := &message.Message{
		Topic: topic, QueueID: m.GetQueueId(), Body: m.GetBody(), Flag: m.GetFlag(),
		BornTimestamp: m.GetBornTimestampMs(), BornHost: born,
	}
	if out.BornTimestamp == 0 {
		out.BornTimestamp = time.Now().UnixMilli()
	}
	props := make(message.Properties, 0, len(m.GetProperties())+3)
	for k, v := range m.GetProperties() {
		props = append(props, message.Property{Key: k, Value: v})
	}
	if t := m.GetTags(); t != "" {
		props = append(props, message.Property{Key: message.PropTags, Value: t})
	}
	if len(m.GetKeys()) > 0 {
		props = append(props, message.Property{Key: message.PropKeys, Value: strings.Join(m.GetKeys(), " ")})
	}
	if u := m.GetUniqKey(); u != "" {
		props = append(props, message.Property{Key: message.PropUniqKey, Value: u})
	}
	out.Properties = props
	return out
}

// toResults converts a send's results; a duplicate's keeps its UNIQ_KEY,
// the original's.
func toResults(res []broker.SendResult) []*gantryv1.SendResult {
	out := make([]*gantryv1.SendResult, len(res))
	slab := make([]gantryv1.SendResult, len(res)) // one allocation for the results
	for i, r := range res {
		o := &slab[i]
		o.MsgId, o.UniqKey, o.QueueId, o.QueueOffset = r.MsgID, r.UniqKey, r.QueueID, r.QueueOffset
		o.PhysicalOffset, o.StoreTimestampMs, o.Duplicate = r.PhysicalOffset, r.StoreTimestamp, r.Duplicate
		out[i] = o
	}
	return out
}

// bornHost is the caller's address, stored as the message's BORNHOST.
func bornHost(ctx context.Context) netip.AddrPort {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return netip.AddrPort{}
	}
	if a, ok := p.Addr.(*net.TCPAddr); ok {
		return a.AddrPort()
	}
	return netip.AddrPort{}
}

func pullStatus(st broker.PullStatus) gantryv1.PullStatus {
	switch st {
	case broker.PullFound:
		return gantryv1.PullStatus_PULL_STATUS_FOUND
	case broker.PullNoMessageInQueue, broker.PullOffsetOverflowOne:
		return gantryv1.PullStatus_PULL_STATUS_NO_NEW_MESSAGE
	case broker.PullOffsetTooSmall, broker.PullOffsetOverflowBadly:
		return gantryv1.PullStatus_PULL_STATUS_OFFSET_ILLEGAL
	default: // NoMatchedMessage, OffsetFoundNull: go on from next_offset
		return gantryv1.PullStatus_PULL_STATUS_NO_MATCHED_MESSAGE
	}
}

// QueryOffset implements the service; with a client_id, the offset is
// that client's own (broadcast consumption).
func (s *Messaging) QueryOffset(ctx context.Context, req *gantryv1.QueryOffsetRequest) (*gantryv1.QueryOffsetResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Messaging_QueryOffset_FullMethodName, auth.Group(req.GetGroup()), auth.Topic(req.GetTopic())); err != nil {
		return nil, err
	}
	var off int64
	var ok bool
	if id := req.GetClientId(); id != "" {
		off, ok = s.b.QueryClientOffset(req.GetGroup(), id, req.GetTopic(), req.GetQueueId())
	} else {
		off, ok = s.b.QueryOffset(req.GetGroup(), req.GetTopic(), req.GetQueueId())
	}
	return &gantryv1.QueryOffsetResponse{Found: ok, Offset: off}, nil
}

// CommitOffset implements the service; with a client_id, the offset is
// that client's own (broadcast consumption); with a lock_holder, it is
// refused while another client holds the queue's lock.
func (s *Messaging) CommitOffset(ctx context.Context, req *gantryv1.CommitOffsetRequest) (*gantryv1.CommitOffsetResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Messaging_CommitOffset_FullMethodName, auth.Group(req.GetGroup()), auth.Topic(req.GetTopic())); err != nil {
		return nil, err
	}
	var err error
	switch {
	case req.GetClientId() != "":
		err = s.b.CommitClientOffset(req.GetGroup(), req.GetClientId(), req.GetTopic(), req.GetQueueId(), req.GetOffset())
	case req.GetLockHolder() != "":
		err = s.b.CommitHeldOffset(req.GetGroup(), req.GetLockHolder(), req.GetTopic(), req.GetQueueId(), req.GetOffset())
	default:
		err = s.b.CommitOffset(req.GetGroup(), req.GetTopic(), req.GetQueueId(), req.GetOffset())
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &gantryv1.CommitOffsetResponse{}, nil
}

// CommitOffsets implements the service: CommitOffset of each entry, with
// the request's client_id or lock_holder, each entry answered in order.
func (s *Messaging) CommitOffsets(ctx context.Context, req *gantryv1.CommitOffsetsRequest) (*gantryv1.CommitOffsetsResponse, error) {
	entries := req.GetEntries()
	switch n := len(entries); {
	case n == 0:
		return nil, status.Error(codes.InvalidArgument, "commit offsets: no entries")
	case n > gantryv1.MaxCommitOffsetsEntries:
		return nil, status.Errorf(codes.InvalidArgument, "commit offsets: %d entries, at most %d (MaxCommitOffsetsEntries)", n, gantryv1.MaxCommitOffsetsEntries)
	}
	if s.guard.on() {
		rs := make([]auth.Resource, 0, len(entries)+1)
		rs = append(rs, auth.Group(req.GetGroup()))
		for _, e := range entries {
			rs = append(rs, auth.Topic(e.GetTopic()))
		}
		if err := s.guard.allow(ctx, gantryv1.Messaging_CommitOffsets_FullMethodName, rs...); err != nil {
			return nil, err
		}
	}
	commits := make([]broker.OffsetCommit, len(entries))
	for i, e := range entries {
		commits[i] = broker.OffsetCommit{Topic: e.GetTopic(), QueueID: e.GetQueueId(), Offset: e.GetOffset()}
	}
	errs, err := s.b.CommitOffsets(req.GetGroup(), req.GetClientId(), req.GetLockHolder(), commits)
	if err != nil {
		return nil, toStatus(err)
	}
	results := make([]gantryv1.CommitOffsetResult, len(errs)) // one allocation for the request
	out := &gantryv1.CommitOffsetsResponse{Results: make([]*gantryv1.CommitOffsetResult, len(errs))}
	for i, err := range errs {
		out.Results[i] = &results[i]
		if err != nil {
			st := status.Convert(toStatus(err))
			results[i].Error = &gantryv1.Error{Code: int32(st.Code()), Message: st.Message()}
		}
	}
	return out, nil
}

// GetQueueOffsets implements the service.
func (s *Messaging) GetQueueOffsets(ctx context.Context, req *gantryv1.GetQueueOffsetsRequest) (*gantryv1.GetQueueOffsetsResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Messaging_GetQueueOffsets_FullMethodName, auth.Topic(req.GetTopic())); err != nil {
		return nil, err
	}
	if err := s.checkQueue(req.GetTopic(), req.GetQueueId()); err != nil {
		return nil, err
	}
	lo, hi := s.b.QueueOffsets(req.GetTopic(), req.GetQueueId())
	return &gantryv1.GetQueueOffsetsResponse{MinOffset: lo, MaxOffset: hi}, nil
}

// SearchOffset implements the service.
func (s *Messaging) SearchOffset(ctx context.Context, req *gantryv1.SearchOffsetRequest) (*gantryv1.SearchOffsetResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Messaging_SearchOffset_FullMethodName, auth.Topic(req.GetTopic())); err != nil {
		return nil, err
	}
	if err := s.checkQueue(req.GetTopic(), req.GetQueueId()); err != nil {
		return nil, err
	}
	off, err := s.b.OffsetAtTime(req.GetTopic(), req.GetQueueId(), req.GetTimestampMs())
	if err != nil {
		return nil, toStatus(err)
	}
	return &gantryv1.SearchOffsetResponse{Offset: off}, nil
}

// checkQueue answers NOT_FOUND for an unknown topic and INVALID_ARGUMENT
// for a queue id outside its read queues.
func (s *Messaging) checkQueue(topic string, qid int32) error {
	tc, ok := s.b.Topic(topic)
	switch {
	case !ok:
		return status.Errorf(codes.NotFound, "topic %q not found", topic)
	case qid < 0 || qid >= tc.ReadQueueNums:
		return status.Errorf(codes.InvalidArgument, "queue id %d out of range: topic %q has %d read queues", qid, topic, tc.ReadQueueNums)
	}
	return nil
}

// Heartbeat implements the service. The client's address is the call's
// peer. broker.ConsumeModel numbers the models as the API does; the broker
// rejects any other value.
func (s *Messaging) Heartbeat(ctx context.Context, req *gantryv1.HeartbeatRequest) (*gantryv1.HeartbeatResponse, error) {
	if s.guard.on() { // registering a consumer takes queues from the group's others
		rs := make([]auth.Resource, 0, len(req.GetSubscriptions())+1)
		rs = append(rs, auth.Group(req.GetGroup()))
		for _, sub := range req.GetSubscriptions() {
			rs = append(rs, auth.Topic(sub.GetTopic()))
		}
		if err := s.guard.allow(ctx, gantryv1.Messaging_Heartbeat_FullMethodName, rs...); err != nil {
			return nil, err
		}
	}
	hb := broker.Heartbeat{
		ClientID: req.GetClientId(), Group: req.GetGroup(), Model: broker.ConsumeModel(req.GetModel()),
		Ordered: req.GetOrdered(), Assigned: fromQueueRefs(req.GetAssigned()), Addr: peerAddr(ctx),
	}
	for _, sub := range req.GetSubscriptions() {
		hb.Subscriptions = append(hb.Subscriptions, broker.Subscription{Topic: sub.GetTopic(), Expression: sub.GetExpression()})
	}
	if err := s.b.Heartbeat(hb); err != nil {
		return nil, toStatus(err)
	}
	return &gantryv1.HeartbeatResponse{}, nil
}

// peerAddr is the caller's address, "" if unknown.
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

func fromQueueRefs(qs []*gantryv1.QueueRef) []broker.QueueRef {
	if len(qs) == 0 {
		return nil
	}
	out := make([]broker.QueueRef, len(qs))
	for i, q := range qs {
		out[i] = broker.QueueRef{Topic: q.GetTopic(), QueueID: q.GetQueueId()}
	}
	return out
}

func toQueueRefs(qs []broker.QueueRef) []*gantryv1.QueueRef {
	out := make([]*gantryv1.QueueRef, len(qs))
	for i, q := range qs {
		out[i] = &gantryv1.QueueRef{Topic: q.Topic, QueueId: q.QueueID}
	}
	return out
}

// GetConsumerList implements the service.
func (s *Messaging) GetConsumerList(ctx context.Context, req *gantryv1.GetConsumerListRequest) (*gantryv1.GetConsumerListResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Messaging_GetConsumerList_FullMethodName, auth.Group(req.GetGroup())); err != nil {
		return nil, err
	}
	return &gantryv1.GetConsumerListResponse{ClientIds: s.b.ConsumerList(req.GetGroup())}, nil
}

// SendBack implements the service.
func (s *Messaging) SendBack(ctx context.Context, req *gantryv1.SendBackRequest) (*gantryv1.SendBackResponse, error) {
	if s.guard.on() {
		rs := s.sentBack(nil, req)
		if err := s.guard.allow(ctx, gantryv1.Messaging_SendBack_FullMethodName, rs...); err != nil {
			return nil, err
		}
	}
	res, err := s.b.SendBack(ctx, toSendBack(req))
	if err != nil {
		return nil, toStatus(err)
	}
	return &gantryv1.SendBackResponse{DeadLettered: res.DeadLettered, ReconsumeTimes: res.ReconsumeTimes}, nil
}

// SendBackBatch implements the service.
func (s *Messaging) SendBackBatch(ctx context.Context, req *gantryv1.SendBackBatchRequest) (*gantryv1.SendBackBatchResponse, error) {
	if len(req.GetRequests()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "send back: no messages")
	}
	if s.guard.on() {
		rs := make([]auth.Resource, 0, 2*len(req.GetRequests()))
		for _, r := range req.GetRequests() {
			rs = s.sentBack(rs, r)
		}
		if err := s.guard.allow(ctx, gantryv1.Messaging_SendBackBatch_FullMethodName, rs...); err != nil {
			return nil, err
		}
	}
	reqs := make([]broker.SendBackRequest, len(req.GetRequests()))
	for i, r := range req.GetRequests() {
		reqs[i] = toSendBack(r)
	}
	res, errs := s.b.SendBackBatch(ctx, reqs)
	results := make([]gantryv1.SendBackResult, len(res)) // one allocation for the batch
	out := &gantryv1.SendBackBatchResponse{Results: make([]*gantryv1.SendBackResult, len(res))}
	for i, r := range res {
		results[i].DeadLettered, results[i].ReconsumeTimes = r.DeadLettered, r.ReconsumeTimes
		out.Results[i] = &results[i]
		if errs[i] != nil {
			st := status.Convert(toStatus(errs[i]))
			out.Results[i].Error = &gantryv1.Error{Code: int32(st.Code()), Message: st.Message(), Indeterminate: broker.IsIndeterminate(errs[i])}
		}
	}
	return out, nil
}

// sentBack appends what a send-back touches: the group, and the topic of
// the message it copies into the group's retry topic, lest a consumer of
// one group read any topic's messages through its retry topic. A message
// that cannot be read names no topic: the send-back fails on it anyway.
func (s *Messaging) sentBack(rs []auth.Resource, r *gantryv1.SendBackRequest) []auth.Resource {
	rs = append(rs, auth.Group(r.GetGroup()))
	if rec, err := s.b.AppendRecordAt(nil, r.GetPhysicalOffset()); err == nil {
		if v, err := message.NewView(rec); err == nil {
			rs = append(rs, auth.Topic(string(v.Topic())))
		}
	}
	return rs
}

func toSendBack(r *gantryv1.SendBackRequest) broker.SendBackRequest {
	return broker.SendBackRequest{
		Group: r.GetGroup(), PhysicalOffset: r.GetPhysicalOffset(), MsgID: r.GetMsgId(),
		DelayLevel: r.GetDelayLevel(), MaxReconsumeTimes: r.GetMaxReconsumeTimes(), Reason: r.GetReason(),
	}
}

// LockQueues implements the service.
func (s *Messaging) LockQueues(ctx context.Context, req *gantryv1.LockQueuesRequest) (*gantryv1.LockQueuesResponse, error) {
	if err := s.allowQueues(ctx, gantryv1.Messaging_LockQueues_FullMethodName, req.GetGroup(), req.GetQueues()); err != nil {
		return nil, err
	}
	held, err := s.b.LockQueues(req.GetGroup(), req.GetClientId(), fromQueueRefs(req.GetQueues()))
	if err != nil {
		return nil, toStatus(err)
	}
	return &gantryv1.LockQueuesResponse{Locked: toQueueRefs(held)}, nil
}

// UnlockQueues implements the service.
func (s *Messaging) UnlockQueues(ctx context.Context, req *gantryv1.UnlockQueuesRequest) (*gantryv1.UnlockQueuesResponse, error) {
	if err := s.allowQueues(ctx, gantryv1.Messaging_UnlockQueues_FullMethodName, req.GetGroup(), req.GetQueues()); err != nil {
		return nil, err
	}
	if err := s.b.UnlockQueues(req.GetGroup(), req.GetClientId(), fromQueueRefs(req.GetQueues())); err != nil {
		return nil, toStatus(err)
	}
	return &gantryv1.UnlockQueuesResponse{}, nil
}

// allowQueues authorizes a call of method on the queues of a group: SUB on
// the group and on the queues' topics.
func (s *Messaging) allowQueues(ctx context.Context, method, group string, qs []*gantryv1.QueueRef) error {
	if !s.guard.on() {
		return nil
	}
	rs := make([]auth.Resource, 0, len(qs)+1)
	rs = append(rs, auth.Group(group))
	for _, q := range qs {
		rs = append(rs, auth.Topic(q.GetTopic()))
	}
	return s.guard.allow(ctx, method, rs...)
}

// WatchGroup implements the service: the current membership at once, then
// the membership after each change, coalesced (a slow stream gets the
// latest membership, never a backlog), and an event for each reset of the
// group's offsets (the latest of each topic). When the stream ends, the
// broker's watch is closed, which unregisters the client if it was its
// last. The handler returns when the client cancels, the connection
// breaks, or the broker shuts down (UNAVAILABLE); it starts no goroutine.
func (s *Messaging) WatchGroup(req *gantryv1.WatchGroupRequest, stream grpc.ServerStreamingServer[gantryv1.GroupEvent]) error {
	if err := s.guard.allow(stream.Context(), gantryv1.Messaging_WatchGroup_FullMethodName, auth.Group(req.GetGroup())); err != nil {
		return err
	}
	w, err := s.b.WatchGroup(req.GetGroup(), req.GetClientId())
	if err != nil {
		return toStatus(err)
	}
	defer w.Close()
	var last []string
	sent := false
	for {
		if ids := w.Members(); !sent || !slices.Equal(ids, last) {
			if err := stream.Send(&gantryv1.GroupEvent{Group: req.GetGroup(), ClientIds: ids}); err != nil {
				return err
			}
			last, sent = ids, true
		}
		for _, r := range w.Resets() {
			ev := &gantryv1.GroupEvent{Group: req.GetGroup(), ClientIds: last,
				OffsetReset: &gantryv1.OffsetReset{Topic: r.Topic, Offsets: r.Offsets, TimestampMs: r.Timestamp}}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
		select {
		case _, ok := <-w.Changed():
			if !ok {
				return status.Error(codes.Unavailable, "broker shutting down")
			}
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		case <-s.shutdown:
			return status.Error(codes.Unavailable, "broker shutting down")
		}
	}
}
