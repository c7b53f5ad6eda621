package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/message"
)

// serve starts a gRPC server on 127.0.0.1:0 with register's services and
// stops it at the end of the test.
func serve(t testing.TB, register func(*grpc.Server)) (*grpc.Server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20)) // as lenient as brokers were: the client's own limits show
	register(srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return srv, lis.Addr().String()
}

// fakeTopic is a topic on a fake broker: records per queue.
type fakeTopic struct {
	read, write, perm int32
	queues            [][][]byte
}

// sendFault is what a fake broker answers instead of storing a send; nil
// stores it. breakStream ends a SendStream with status code instead of
// answering.
type sendFault struct {
	code          codes.Code
	msg           string
	indeterminate bool
	breakStream   bool
}

// fakeBroker is an in-memory broker serving Messaging and Admin.
type fakeBroker struct {
	name, cluster string
	addr          string
	storeHost     netip.AddrPort // written into records; not a served address
	srv           *grpc.Server

	sendRequests atomic.Int64 // SendRequests received (stream or unary)
	sentBack     atomic.Int64 // messages taken by SendBackBatch
	members      []string     // GetConsumerList's answer, for every group
	streams      atomic.Int64 // SendStreams opened

	mu         sync.Mutex
	topics     map[string]*fakeTopic
	phys       int64
	now        func() int64 // store time, ms
	offsets    map[string]int64
	groups     map[string]*gantryv1.GroupConfig
	fault      func(n int64, req *gantryv1.SendRequest) *sendFault // n: 1 for the first request
	delay      time.Duration
	hold       chan struct{} // if set, SendRequests wait until it is closed
	noStream   bool
	pullDL     time.Time // deadline of the last Pull, zero if none
	pullHasDL  bool
	sendGroups []string

	// Offset commits: CommitOffset and CommitOffsets calls counted (those
	// answered UNIMPLEMENTED too), and CommitOffsets answered UNIMPLEMENTED
	// (an older broker) when noBatchCommit is set.
	commitCalls, batchCommitCalls atomic.Int64
	noBatchCommit                 atomic.Bool
}

var fakeHostSeq atomic.Int32

// startBroker starts a fake broker named name with topics (each with
// queues read and write queues, perm 6).
func startBroker(t testing.TB, name string, queues int32, topics ...string) *fakeBroker {
	t.Helper()
	b := &fakeBroker{
		name: name, cluster: "c1",
		storeHost: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(fakeHostSeq.Add(1))}), 10911),
		topics:    map[string]*fakeTopic{}, offsets: map[string]int64{}, groups: map[string]*gantryv1.GroupConfig{},
		now: func() int64 { return time.Now().UnixMilli() },
	}
	for _, tp := range topics {
		b.addTopic(tp, queues, queues, 6)
	}
	b.srv, b.addr = serve(t, func(s *grpc.Server) {
		gantryv1.RegisterMessagingServer(s, &fakeMessaging{b: b})
		gantryv1.RegisterAdminServer(s, &fakeAdmin{b: b})
	})
	return b
}

func (b *fakeBroker) addTopic(name string, read, write, perm int32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	tp := b.topics[name]
	if tp == nil {
		tp = &fakeTopic{}
		b.topics[name] = tp
	}
	tp.read, tp.write, tp.perm = read, write, perm
	for int32(len(tp.queues)) < max(read, write) {
		tp.queues = append(tp.queues, nil)
	}
}

// configure changes the broker's settings under its lock.
func (b *fakeBroker) configure(f func(b *fakeBroker)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b)
}

// groupsSent returns the producer group of every SendRequest.
func (b *fakeBroker) groupsSent() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.sendGroups)
}

func (b *fakeBroker) setFault(f func(n int64, req *gantryv1.SendRequest) *sendFault) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fault = f
}

// records returns the stored records of a queue.
func (b *fakeBroker) records(topic string, qid int32) [][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.topics[topic].queues[qid])
}

// handle answers one SendRequest: the results, or a fault.
func (b *fakeBroker) handle(req *gantryv1.SendRequest) ([]*gantryv1.SendResult, *sendFault) {
	n := b.sendRequests.Add(1)
	b.mu.Lock()
	fault, delay, hold := b.fault, b.delay, b.hold
	b.sendGroups = append(b.sendGroups, req.GetProducerGroup())
	b.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	if hold != nil {
		<-hold
	}
	if fault != nil {
		if f := fault(n, req); f != nil {
			return nil, f
		}
	}
	return b.store(req)
}

func (b *fakeBroker) store(req *gantryv1.SendRequest) ([]*gantryv1.SendResult, *sendFault) {
	b.mu.Lock()
	defer b.mu.Unlock()
	tp := b.topics[req.GetTopic()]
	if tp == nil {
		return nil, &sendFault{code: codes.NotFound, msg: "topic " + req.GetTopic() + " not found"}
	}
	if tp.perm&PermWrite == 0 {
		return nil, &sendFault{code: codes.PermissionDenied, msg: "topic not writable"}
	}
	msgs := req.GetMessages()
	if len(req.GetRecords()) > 0 {
		var err error
		if msgs, err = recordsToProtos(req.GetRecords()); err != nil {
			return nil, &sendFault{code: codes.InvalidArgument, msg: err.Error()}
		}
	}
	for _, pm := range msgs { // validate the whole batch first: nothing or all is stored
		if string(pm.GetBody()) == "invalid" {
			return nil, &sendFault{code: codes.InvalidArgument, msg: "body is invalid"}
		}
		if pm.GetQueueId() >= tp.write {
			return nil, &sendFault{code: codes.InvalidArgument, msg: fmt.Sprintf("queue %d out of range", pm.GetQueueId())}
		}
	}
	var out []*gantryv1.SendResult
	for _, pm := range msgs {
		qid := max(pm.GetQueueId(), 0)
		m := &message.Message{
			Topic: req.GetTopic(), QueueID: qid, QueueOffset: int64(len(tp.queues[qid])), PhysicalOffset: b.phys,
			BornTimestamp: pm.GetBornTimestampMs(), BornHost: netip.MustParseAddrPort("127.0.0.1:5000"),
			StoreTimestamp: b.now(), StoreHost: b.storeHost, Body: pm.GetBody(), Flag: pm.GetFlag(),
		}
		if pm.GetTags() != "" {
			m.Properties.Set(message.PropTags, pm.GetTags())
		}
		if len(pm.GetKeys()) > 0 {
			m.Properties.Set(message.PropKeys, strings.Join(pm.GetKeys(), " "))
		}
		m.Properties.Set(message.PropUniqKey, pm.GetUniqKey())
		keys := make([]string, 0, len(pm.GetProperties()))
		for k := range pm.GetProperties() {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m.Properties.Set(k, pm.GetProperties()[k])
		}
		rec, err := message.Append(nil, m, true)
		if err != nil {
			return nil, &sendFault{code: codes.InvalidArgument, msg: err.Error()}
		}
		tp.queues[qid] = append(tp.queues[qid], rec)
		out = append(out, &gantryv1.SendResult{
			MsgId: message.EncodeOffsetMsgID(b.storeHost, b.phys), UniqKey: pm.GetUniqKey(), QueueId: qid,
			QueueOffset: m.QueueOffset, PhysicalOffset: b.phys, StoreTimestampMs: m.StoreTimestamp,
		})
		b.phys += int64(len(rec))
	}
	return out, nil
}

// fakeMessaging serves a fakeBroker's Messaging service.
type fakeMessaging struct {
	gantryv1.UnimplementedMessagingServer
	b *fakeBroker
}

func (f *fakeMessaging) Send(_ context.Context, req *gantryv1.SendRequest) (*gantryv1.SendResponse, error) {
	res, fault := f.b.handle(req)
	if fault != nil {
		return nil, faultStatus(fault)
	}
	return &gantryv1.SendResponse{Results: res}, nil
}

func (f *fakeMessaging) SendStream(st grpc.BidiStreamingServer[gantryv1.SendRequest, gantryv1.SendResponse]) error {
	f.b.mu.Lock()
	noStream := f.b.noStream
	f.b.mu.Unlock()
	if noStream {
		return status.Error(codes.Unimplemented, "method SendStream not implemented")
	}
	f.b.streams.Add(1)
	for {
		req, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		res, fault := f.b.handle(req)
		resp := &gantryv1.SendResponse{RequestId: req.GetRequestId(), Results: res}
		if fault != nil {
			if fault.breakStream {
				return status.Error(fault.code, fault.msg)
			}
			resp = &gantryv1.SendResponse{RequestId: req.GetRequestId(), Error: &gantryv1.Error{
				Code: int32(fault.code), Message: fault.msg, Indeterminate: fault.indeterminate,
			}}
		}
		if err := st.Send(resp); err != nil {
			return err
		}
	}
}

// faultStatus is the unary status of a fault, with an ErrorInfo saying
// whether it is indeterminate, as the broker sends it.
func faultStatus(f *sendFault) error {
	reason := "DEFINITE"
	if f.indeterminate {
		reason = "INDETERMINATE"
	}
	return withErrorInfo(status.New(f.code, f.msg), reason, map[string]string{"indeterminate": fmt.Sprint(f.indeterminate)})
}

// withErrorInfo adds a google.rpc.ErrorInfo detail, encoded by hand.
func withErrorInfo(st *status.Status, reason string, md map[string]string) error {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, reason)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, "gantry")
	for k, v := range md {
		var e []byte
		e = protowire.AppendTag(e, 1, protowire.BytesType)
		e = protowire.AppendString(e, k)
		e = protowire.AppendTag(e, 2, protowire.BytesType)
		e = protowire.AppendString(e, v)
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	p := st.Proto()
	p.Details = append(p.Details, &anypb.Any{TypeUrl: errorInfoTypeURL, Value: b})
	return status.FromProto(p).Err()
}

// GetConsumerList answers the broker's members.
func (f *fakeMessaging) GetConsumerList(context.Context, *gantryv1.GetConsumerListRequest) (*gantryv1.GetConsumerListResponse, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	return &gantryv1.GetConsumerListResponse{ClientIds: slices.Clone(f.b.members)}, nil
}

// SendBackBatch takes every message and answers that each will be
// retried.
func (f *fakeMessaging) SendBackBatch(_ context.Context, req *gantryv1.SendBackBatchRequest) (*gantryv1.SendBackBatchResponse, error) {
	resp := &gantryv1.SendBackBatchResponse{Results: make([]*gantryv1.SendBackResult, len(req.GetRequests()))}
	for i := range resp.Results {
		resp.Results[i] = &gantryv1.SendBackResult{ReconsumeTimes: 1}
	}
	f.b.sentBack.Add(int64(len(req.GetRequests())))
	return resp, nil
}

func (f *fakeMessaging) queue(topic string, qid int32) ([][]byte, error) {
	tp := f.b.topics[topic]
	if tp == nil {
		return nil, status.Errorf(codes.NotFound, "topic %s not found", topic)
	}
	if qid < 0 || int(qid) >= len(tp.queues) {
		return nil, status.Errorf(codes.InvalidArgument, "queue %d out of range", qid)
	}
	return tp.queues[qid], nil
}

func (f *fakeMessaging) Pull(ctx context.Context, req *gantryv1.PullRequest) (*gantryv1.PullResponse, error) {
	b := f.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pullDL, b.pullHasDL = ctx.Deadline()
	recs, err := f.queue(req.GetTopic(), req.GetQueueId())
	if err != nil {
		return nil, err
	}
	end := int64(len(recs))
	resp := &gantryv1.PullResponse{MinOffset: 0, MaxOffset: end}
	off := req.GetOffset()
	switch {
	case off < 0 || off > end:
		resp.Status, resp.NextOffset = gantryv1.PullStatus_PULL_STATUS_OFFSET_ILLEGAL, min(max(off, 0), end)
		return resp, nil
	case off == end:
		resp.Status, resp.NextOffset = gantryv1.PullStatus_PULL_STATUS_NO_NEW_MESSAGE, end
		return resp, nil
	}
	var tags []string
	if fe := req.GetFilterExpression(); fe != "" && fe != "*" {
		for t := range strings.SplitSeq(fe, "||") {
			tags = append(tags, strings.TrimSpace(t))
		}
	}
	for ; off < end && resp.RecordCount < req.GetMaxMessages(); off++ {
		if tags != nil { // decode only to filter: BenchmarkPushDeliver counts the fake's allocations too
			m, _, err := message.Decode(recs[off])
			if err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
			if !slices.Contains(tags, m.Tags()) {
				continue
			}
		}
		resp.Records = append(resp.Records, recs[off]...)
		resp.RecordCount++
	}
	resp.NextOffset = off
	resp.Status = gantryv1.PullStatus_PULL_STATUS_FOUND
	if resp.RecordCount == 0 {
		resp.Status = gantryv1.PullStatus_PULL_STATUS_NO_MATCHED_MESSAGE
	}
	return resp, nil
}

func offsetKey(group, topic string, qid int32) string {
	return fmt.Sprintf("%s|%s|%d", group, topic, qid)
}

func (f *fakeMessaging) QueryOffset(_ context.Context, req *gantryv1.QueryOffsetRequest) (*gantryv1.QueryOffsetResponse, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	off, ok := f.b.offsets[offsetKey(req.GetGroup(), req.GetTopic(), req.GetQueueId())]
	return &gantryv1.QueryOffsetResponse{Found: ok, Offset: off}, nil
}

func (f *fakeMessaging) CommitOffset(_ context.Context, req *gantryv1.CommitOffsetRequest) (*gantryv1.CommitOffsetResponse, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	if _, err := f.queue(req.GetTopic(), req.GetQueueId()); err != nil {
		return nil, err
	}
	f.b.offsets[offsetKey(req.GetGroup(), req.GetTopic(), req.GetQueueId())] = req.GetOffset()
	f.b.commitCalls.Add(1)
	return &gantryv1.CommitOffsetResponse{}, nil
}

func (f *fakeMessaging) CommitOffsets(_ context.Context, req *gantryv1.CommitOffsetsRequest) (*gantryv1.CommitOffsetsResponse, error) {
	f.b.batchCommitCalls.Add(1)
	if f.b.noBatchCommit.Load() {
		return nil, status.Error(codes.Unimplemented, "method CommitOffsets not implemented")
	}
	if n := len(req.GetEntries()); n == 0 || n > gantryv1.MaxCommitOffsetsEntries {
		return nil, status.Errorf(codes.InvalidArgument, "commit offsets: %d entries", n)
	}
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	out := &gantryv1.CommitOffsetsResponse{}
	for _, e := range req.GetEntries() {
		r := &gantryv1.CommitOffsetResult{}
		if _, err := f.queue(e.GetTopic(), e.GetQueueId()); err != nil {
			st := status.Convert(err)
			r.Error = &gantryv1.Error{Code: int32(st.Code()), Message: st.Message()}
		} else {
			f.b.offsets[offsetKey(req.GetGroup(), e.GetTopic(), e.GetQueueId())] = e.GetOffset()
		}
		out.Results = append(out.Results, r)
	}
	return out, nil
}

func (f *fakeMessaging) GetQueueOffsets(_ context.Context, req *gantryv1.GetQueueOffsetsRequest) (*gantryv1.GetQueueOffsetsResponse, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	recs, err := f.queue(req.GetTopic(), req.GetQueueId())
	if err != nil {
		return nil, err
	}
	return &gantryv1.GetQueueOffsetsResponse{MinOffset: 0, MaxOffset: int64(len(recs))}, nil
}

func (f *fakeMessaging) SearchOffset(_ context.Context, req *gantryv1.SearchOffsetRequest) (*gantryv1.SearchOffsetResponse, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	recs, err := f.queue(req.GetTopic(), req.GetQueueId())
	if err != nil {
		return nil, err
	}
	return &gantryv1.SearchOffsetResponse{Offset: searchTime(recs, req.GetTimestampMs())}, nil
}

// searchTime returns the first offset stored at or after ms.
func searchTime(recs [][]byte, ms int64) int64 {
	for i, r := range recs {
		if message.StoreTimestampOf(r) >= ms {
			return int64(i)
		}
	}
	return int64(len(recs))
}

// fakeAdmin serves a fakeBroker's Admin service.
type fakeAdmin struct {
	gantryv1.UnimplementedAdminServer
	b *fakeBroker
}

func (f *fakeAdmin) CreateTopic(_ context.Context, req *gantryv1.CreateTopicRequest) (*gantryv1.CreateTopicResponse, error) {
	tc := req.GetTopic()
	f.b.addTopic(tc.GetName(), tc.GetReadQueueNums(), tc.GetWriteQueueNums(), tc.GetPerm())
	return &gantryv1.CreateTopicResponse{}, nil
}

func (f *fakeAdmin) DeleteTopic(_ context.Context, req *gantryv1.DeleteTopicRequest) (*gantryv1.DeleteTopicResponse, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	if f.b.topics[req.GetName()] == nil {
		return nil, status.Error(codes.NotFound, "no such topic")
	}
	delete(f.b.topics, req.GetName())
	return &gantryv1.DeleteTopicResponse{}, nil
}

func (f *fakeAdmin) TopicStatus(_ context.Context, req *gantryv1.TopicStatusRequest) (*gantryv1.TopicStatusResponse, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	tp := f.b.topics[req.GetTopic()]
	if tp == nil {
		return nil, status.Error(codes.NotFound, "no such topic")
	}
	resp := &gantryv1.TopicStatusResponse{}
	for i, q := range tp.queues {
		qs := &gantryv1.QueueStatus{QueueId: int32(i), MaxOffset: int64(len(q))}
		if len(q) > 0 {
			qs.LastStoreTimestampMs = message.StoreTimestampOf(q[len(q)-1])
		}
		resp.Queues = append(resp.Queues, qs)
	}
	return resp, nil
}

func (f *fakeAdmin) CreateGroup(_ context.Context, req *gantryv1.CreateGroupRequest) (*gantryv1.CreateGroupResponse, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	f.b.groups[req.GetGroup().GetName()] = req.GetGroup()
	return &gantryv1.CreateGroupResponse{}, nil
}

func (f *fakeAdmin) DeleteGroup(_ context.Context, req *gantryv1.DeleteGroupRequest) (*gantryv1.DeleteGroupResponse, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	if f.b.groups[req.GetName()] == nil {
		return nil, status.Error(codes.NotFound, "no such group")
	}
	delete(f.b.groups, req.GetName())
	return &gantryv1.DeleteGroupResponse{}, nil
}

func (f *fakeAdmin) ListGroups(context.Context, *gantryv1.ListGroupsRequest) (*gantryv1.ListGroupsResponse, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	resp := &gantryv1.ListGroupsResponse{}
	for _, g := range f.b.groups {
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func (f *fakeAdmin) ConsumerProgress(_ context.Context, req *gantryv1.ConsumerProgressRequest) (*gantryv1.ConsumerProgressResponse, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	resp := &gantryv1.ConsumerProgressResponse{}
	for name, tp := range f.b.topics {
		if req.GetTopic() != "" && name != req.GetTopic() {
			continue
		}
		for i, q := range tp.queues {
			off, ok := f.b.offsets[offsetKey(req.GetGroup(), name, int32(i))]
			if !ok {
				continue
			}
			resp.Queues = append(resp.Queues, &gantryv1.QueueProgress{
				Topic: name, QueueId: int32(i), BrokerOffset: int64(len(q)), ConsumerOffset: off, Lag: int64(len(q)) - off,
			})
		}
	}
	return resp, nil
}

func (f *fakeAdmin) ResetOffsetByTime(_ context.Context, req *gantryv1.ResetOffsetByTimeRequest) (*gantryv1.ResetOffsetByTimeResponse, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	tp := f.b.topics[req.GetTopic()]
	if tp == nil {
		return nil, status.Error(codes.NotFound, "no such topic")
	}
	resp := &gantryv1.ResetOffsetByTimeResponse{Offsets: map[int32]int64{}}
	for i, q := range tp.queues {
		off := searchTime(q, req.GetTimestampMs())
		f.b.offsets[offsetKey(req.GetGroup(), req.GetTopic(), int32(i))] = off
		resp.Offsets[int32(i)] = off
	}
	return resp, nil
}

func (f *fakeAdmin) QueryMessageById(_ context.Context, req *gantryv1.QueryMessageByIdRequest) (*gantryv1.QueryMessageResponse, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	_, phys, err := message.DecodeOffsetMsgID(req.GetMsgId())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	// Like a real broker, look the offset up in the local log, whatever
	// store host the id names: the client must check the answer.
	for _, tp := range f.b.topics {
		for _, q := range tp.queues {
			for _, r := range q {
				if message.PhysicalOffsetOf(r) == phys {
					return &gantryv1.QueryMessageResponse{Records: r}, nil
				}
			}
		}
	}
	return nil, status.Error(codes.NotFound, "no message at that offset")
}

func (f *fakeAdmin) QueryMessageByKey(_ context.Context, req *gantryv1.QueryMessageByKeyRequest) (*gantryv1.QueryMessageResponse, error) {
	f.b.mu.Lock()
	defer f.b.mu.Unlock()
	tp := f.b.topics[req.GetTopic()]
	if tp == nil {
		return nil, status.Error(codes.NotFound, "no such topic")
	}
	resp := &gantryv1.QueryMessageResponse{}
	n := int32(0)
	for _, q := range tp.queues {
		for _, r := range q {
			m, _, err := message.Decode(r)
			if err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
			ts := m.StoreTimestamp
			if slices.Contains(m.Keys(), req.GetKey()) && ts >= req.GetBeginMs() && ts <= req.GetEndMs() && n < req.GetMax() {
				resp.Records = append(resp.Records, r...)
				n++
			}
		}
	}
	return resp, nil
}

func (f *fakeAdmin) BrokerStatus(context.Context, *gantryv1.BrokerStatusRequest) (*gantryv1.BrokerStatusResponse, error) {
	return &gantryv1.BrokerStatusResponse{Status: map[string]string{"brokerName": f.b.name}}, nil
}

// fakeNameServer answers routes from the fake brokers' topics.
type fakeNameServer struct {
	gantryv1.UnimplementedNameServerServer
	addr       string
	srv        *grpc.Server
	routeCalls atomic.Int64
	// onRoute, if set, runs at the start of each GetRoute (set it before
	// the first call).
	onRoute func()

	mu      sync.Mutex
	brokers []*fakeBroker
}

// setBrokers replaces the brokers the routes name (a failover).
func (ns *fakeNameServer) setBrokers(bs ...*fakeBroker) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	ns.brokers = bs
}

// current returns the brokers the routes name.
func (ns *fakeNameServer) current() []*fakeBroker {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.brokers
}

func startNameServer(t testing.TB, brokers ...*fakeBroker) *fakeNameServer {
	t.Helper()
	ns := &fakeNameServer{brokers: brokers}
	ns.srv, ns.addr = serve(t, func(s *grpc.Server) { gantryv1.RegisterNameServerServer(s, ns) })
	return ns
}

func brokerData(b *fakeBroker) *gantryv1.BrokerData {
	return &gantryv1.BrokerData{Cluster: b.cluster, BrokerName: b.name, BrokerAddrs: map[int64]string{0: b.addr}}
}

func (ns *fakeNameServer) GetRoute(_ context.Context, req *gantryv1.GetRouteRequest) (*gantryv1.GetRouteResponse, error) {
	ns.routeCalls.Add(1)
	if ns.onRoute != nil {
		ns.onRoute()
	}
	resp := &gantryv1.GetRouteResponse{}
	for _, b := range ns.current() {
		b.mu.Lock()
		tp := b.topics[req.GetTopic()]
		if tp != nil {
			resp.QueueDatas = append(resp.QueueDatas, &gantryv1.QueueData{
				BrokerName: b.name, ReadQueueNums: tp.read, WriteQueueNums: tp.write, Perm: tp.perm,
			})
			resp.BrokerDatas = append(resp.BrokerDatas, brokerData(b))
		}
		b.mu.Unlock()
	}
	if len(resp.QueueDatas) == 0 {
		return nil, status.Errorf(codes.NotFound, "no route for topic %s", req.GetTopic())
	}
	return resp, nil
}

func (ns *fakeNameServer) GetClusterInfo(context.Context, *gantryv1.GetClusterInfoRequest) (*gantryv1.GetClusterInfoResponse, error) {
	resp := &gantryv1.GetClusterInfoResponse{Clusters: map[string]*gantryv1.BrokerNames{}, Brokers: map[string]*gantryv1.BrokerData{}}
	for _, b := range ns.current() {
		if resp.Clusters[b.cluster] == nil {
			resp.Clusters[b.cluster] = &gantryv1.BrokerNames{}
		}
		resp.Clusters[b.cluster].Names = append(resp.Clusters[b.cluster].Names, b.name)
		resp.Brokers[b.name] = brokerData(b)
	}
	return resp, nil
}

func (ns *fakeNameServer) ListTopics(context.Context, *gantryv1.ListTopicsRequest) (*gantryv1.ListTopicsResponse, error) {
	set := map[string]bool{}
	for _, b := range ns.current() {
		b.mu.Lock()
		for t := range b.topics {
			set[t] = true
		}
		b.mu.Unlock()
	}
	resp := &gantryv1.ListTopicsResponse{}
	for t := range set {
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// recordsToProtos decodes the records a producer sent into the messages
// they encode, so the fake stores them like messages.
func recordsToProtos(chunks [][]byte) ([]*gantryv1.Message, error) {
	var out []*gantryv1.Message
	for _, c := range chunks {
		ms, err := message.DecodeAll(c)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			pm := &gantryv1.Message{QueueId: m.QueueID, Body: m.Body, Tags: m.Tags(), Keys: m.Keys(), UniqKey: m.UniqKey(),
				BornTimestampMs: m.BornTimestamp, Flag: m.Flag}
			for _, kv := range m.Properties {
				switch kv.Key {
				case message.PropTags, message.PropKeys, message.PropUniqKey, message.PropCRC:
				default:
					if pm.Properties == nil {
						pm.Properties = map[string]string{}
					}
					pm.Properties[kv.Key] = kv.Value
				}
			}
			out = append(out, pm)
		}
	}
	return out, nil
}
