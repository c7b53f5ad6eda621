package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/message"
)

// Admin implements the Admin service over a broker.
type Admin struct {
	gantryv1.UnimplementedAdminServer
	b     *broker.Broker
	ha    HAReporter // nil: no replication wired
	guard guard
}

// NewAdmin returns the Admin service of b; ha, which may be nil, reports
// its replication (HAStatus).
func NewAdmin(b *broker.Broker, ha HAReporter) *Admin {
	return &Admin{b: b, ha: ha, guard: guard{b.Guard()}}
}

// CreateTopic implements the service; zero queue counts and perm mean 8,
// 8 and read+write.
func (s *Admin) CreateTopic(ctx context.Context, req *gantryv1.CreateTopicRequest) (*gantryv1.CreateTopicResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_CreateTopic_FullMethodName); err != nil {
		return nil, err
	}
	t := req.GetTopic()
	if t == nil {
		return nil, status.Error(codes.InvalidArgument, "create topic: no topic given")
	}
	tc := broker.TopicConfig{TopicName: t.GetName(), ReadQueueNums: t.GetReadQueueNums(), WriteQueueNums: t.GetWriteQueueNums(),
		Perm: t.GetPerm(), Order: t.GetOrder(), Attributes: t.GetAttributes(), TopicFilterType: broker.FilterSingleTag}
	if tc.ReadQueueNums == 0 {
		tc.ReadQueueNums = s.b.Config().DefaultTopicQueueNums
	}
	if tc.WriteQueueNums == 0 {
		tc.WriteQueueNums = s.b.Config().DefaultTopicQueueNums
	}
	if tc.Perm == 0 {
		tc.Perm = broker.PermRead | broker.PermWrite
	}
	if err := s.b.CreateOrUpdateTopic(tc); err != nil {
		return nil, toStatus(err)
	}
	return &gantryv1.CreateTopicResponse{}, nil
}

// DeleteTopic implements the service.
func (s *Admin) DeleteTopic(ctx context.Context, req *gantryv1.DeleteTopicRequest) (*gantryv1.DeleteTopicResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_DeleteTopic_FullMethodName); err != nil {
		return nil, err
	}
	if err := s.b.DeleteTopic(req.GetName()); err != nil {
		return nil, toStatus(err)
	}
	return &gantryv1.DeleteTopicResponse{}, nil
}

// ListTopics implements the service.
func (s *Admin) ListTopics(ctx context.Context, _ *gantryv1.AdminListTopicsRequest) (*gantryv1.AdminListTopicsResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_ListTopics_FullMethodName); err != nil {
		return nil, err
	}
	resp := &gantryv1.AdminListTopicsResponse{}
	for _, tc := range s.b.Topics() {
		resp.Topics = append(resp.Topics, &gantryv1.TopicConfig{Name: tc.TopicName, ReadQueueNums: tc.ReadQueueNums,
			WriteQueueNums: tc.WriteQueueNums, Perm: tc.Perm, Order: tc.Order, Attributes: tc.Attributes})
	}
	return resp, nil
}

// TopicStatus implements the service.
func (s *Admin) TopicStatus(ctx context.Context, req *gantryv1.TopicStatusRequest) (*gantryv1.TopicStatusResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_TopicStatus_FullMethodName, auth.Topic(req.GetTopic())); err != nil {
		return nil, err
	}
	qs, err := s.b.TopicStatus(req.GetTopic())
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &gantryv1.TopicStatusResponse{}
	for _, q := range qs {
		resp.Queues = append(resp.Queues, &gantryv1.QueueStatus{QueueId: q.QueueID, MinOffset: q.MinOffset,
			MaxOffset: q.MaxOffset, LastStoreTimestampMs: q.LastStoreTimestamp,
			Backlog: q.Backlog, Expired: q.Expired, Dropped: q.Dropped})
	}
	lim, err := s.b.TopicLimits(req.GetTopic())
	if err != nil {
		return nil, toStatus(err)
	}
	resp.Limits = &gantryv1.TopicLimits{RetentionMs: lim.Retention.Milliseconds(), MaxBacklog: lim.MaxBacklog,
		BacklogPolicy: lim.BacklogPolicy, DefaultTtlMs: lim.DefaultTTL.Milliseconds()}
	return resp, nil
}

// CreateGroup implements the service.
func (s *Admin) CreateGroup(ctx context.Context, req *gantryv1.CreateGroupRequest) (*gantryv1.CreateGroupResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_CreateGroup_FullMethodName); err != nil {
		return nil, err
	}
	g := req.GetGroup()
	if g == nil {
		return nil, status.Error(codes.InvalidArgument, "create group: no group given")
	}
	sg := broker.DefaultSubscriptionGroup(g.GetName())
	sg.ConsumeEnable = g.GetConsumeEnable()
	sg.ConsumeBroadcastEnable = g.GetConsumeBroadcastEnable()
	sg.ConsumeMessageOrderly = g.GetConsumeMessageOrderly()
	if g.GetRetryMaxTimes() != 0 {
		sg.RetryMaxTimes = g.GetRetryMaxTimes()
	}
	if p := g.GetRetryPolicy(); p != nil {
		sg.GroupRetryPolicy = &broker.RetryPolicy{Type: broker.RetryExponential, Exponential: &broker.ExponentialRetryPolicy{
			Initial: p.GetInitialMs(), Max: p.GetMaxMs(), Multiplier: p.GetMultiplier(), Jitter: p.GetJitter()}}
	}
	if err := s.b.PutGroup(sg); err != nil {
		return nil, toStatus(err)
	}
	return &gantryv1.CreateGroupResponse{}, nil
}

// DeleteGroup implements the service: the group's config goes; its
// offsets and its retry and dead-letter topics go too with clean
// (broker.DeleteGroup).
func (s *Admin) DeleteGroup(ctx context.Context, req *gantryv1.DeleteGroupRequest) (*gantryv1.DeleteGroupResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_DeleteGroup_FullMethodName); err != nil {
		return nil, err
	}
	if err := s.b.DeleteGroup(req.GetName(), !req.GetClean()); err != nil {
		return nil, toStatus(err)
	}
	return &gantryv1.DeleteGroupResponse{}, nil
}

// ListGroups implements the service.
func (s *Admin) ListGroups(ctx context.Context, _ *gantryv1.ListGroupsRequest) (*gantryv1.ListGroupsResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_ListGroups_FullMethodName); err != nil {
		return nil, err
	}
	resp := &gantryv1.ListGroupsResponse{}
	for _, g := range s.b.Groups() {
		gc := &gantryv1.GroupConfig{Name: g.GroupName, ConsumeEnable: g.ConsumeEnable,
			ConsumeBroadcastEnable: g.ConsumeBroadcastEnable, ConsumeMessageOrderly: g.ConsumeMessageOrderly, RetryMaxTimes: g.RetryMaxTimes}
		if p := g.GroupRetryPolicy; p != nil && p.Type == broker.RetryExponential && p.Exponential != nil {
			e := p.Exponential
			gc.RetryPolicy = &gantryv1.RetryPolicy{InitialMs: e.Initial, MaxMs: e.Max, Multiplier: e.Multiplier, Jitter: e.Jitter}
		}
		resp.Groups = append(resp.Groups, gc)
	}
	return resp, nil
}

// ConsumerProgress implements the service: for every topic the group has
// offsets in (or the one asked), each queue's broker offset, the group's
// offset and the lag.
func (s *Admin) ConsumerProgress(ctx context.Context, req *gantryv1.ConsumerProgressRequest) (*gantryv1.ConsumerProgressResponse, error) {
	group := req.GetGroup()
	rs := [2]auth.Resource{auth.Group(group), auth.Topic(req.GetTopic())}
	n := 1
	if req.GetTopic() != "" {
		n = 2
	}
	if err := s.guard.allow(ctx, gantryv1.Admin_ConsumerProgress_FullMethodName, rs[:n]...); err != nil {
		return nil, err
	}
	if err := s.checkGroup("consumer progress", group); err != nil {
		return nil, err
	}
	topics := map[string]bool{}
	if req.GetTopic() != "" {
		topics[req.GetTopic()] = true
	} else {
		for _, k := range s.b.OffsetKeys(group) {
			topics[k.Topic] = true
		}
		for _, c := range s.b.Consumers(group) {
			for _, sub := range c.Subscriptions {
				topics[sub.Topic] = true
			}
		}
	}
	consumers := consumersOf(s.b.Consumers(group))
	resp := &gantryv1.ConsumerProgressResponse{}
	for topic := range topics {
		qs, err := s.b.TopicStatus(topic)
		if errors.Is(err, broker.ErrTopicNotFound) && req.GetTopic() == "" {
			continue // a deleted topic the group still has offsets in
		}
		if err != nil {
			return nil, toStatus(err)
		}
		for _, q := range qs {
			p := &gantryv1.QueueProgress{Topic: topic, QueueId: q.QueueID, BrokerOffset: q.MaxOffset, LastTimestampMs: q.LastStoreTimestamp}
			if off, ok := s.b.QueryOffset(group, topic, q.QueueID); ok {
				p.ConsumerOffset = off
			} else {
				p.ConsumerOffset = q.MinOffset
			}
			p.Lag = max(p.BrokerOffset-p.ConsumerOffset, 0)
			p.ClientId = consumers[broker.QueueRef{Topic: topic, QueueID: q.QueueID}]
			resp.Queues = append(resp.Queues, p)
		}
	}
	return resp, nil
}

// consumersOf maps each queue to the clustering client that reported it
// assigned in its heartbeat. While a group rebalances two may claim a
// queue: the one that heartbeated last wins (its view is the newest).
func consumersOf(cs []broker.Consumer) map[broker.QueueRef]string {
	out := map[broker.QueueRef]string{}
	seen := map[broker.QueueRef]time.Time{}
	for _, c := range cs { // sorted by id: ties go to the smaller id
		if c.Model != broker.Clustering {
			continue
		}
		for _, q := range c.Assigned {
			if at, ok := seen[q]; !ok || c.LastHeartbeat.After(at) {
				out[q], seen[q] = c.ClientID, c.LastHeartbeat
			}
		}
	}
	return out
}

// checkGroup refuses a request without a group (INVALID_ARGUMENT) or for
// a group this broker knows nothing of (NOT_FOUND): no subscription group,
// no committed offsets and no live client.
func (s *Admin) checkGroup(op, group string) error {
	if group == "" {
		return status.Errorf(codes.InvalidArgument, "%s: no group given", op)
	}
	if s.b.GroupKnown(group) {
		return nil
	}
	return status.Errorf(codes.NotFound, "%s: consumer group %q not found: no subscription group, offsets or live client on broker %s",
		op, group, s.b.Config().BrokerName)
}

// ConsumerConnection implements the service: a group's live clients, by
// client id (a known group may have none); an unknown group is NOT_FOUND.
func (s *Admin) ConsumerConnection(ctx context.Context, req *gantryv1.ConsumerConnectionRequest) (*gantryv1.ConsumerConnectionResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_ConsumerConnection_FullMethodName, auth.Group(req.GetGroup())); err != nil {
		return nil, err
	}
	if err := s.checkGroup("consumer connection", req.GetGroup()); err != nil {
		return nil, err
	}
	resp := &gantryv1.ConsumerConnectionResponse{}
	for _, c := range s.b.Consumers(req.GetGroup()) {
		cc := &gantryv1.ConsumerConnection{
			ClientId: c.ClientID, Address: c.Addr, Model: gantryv1.ConsumeModel(c.Model), Ordered: c.Ordered,
			LastHeartbeatMs: c.LastHeartbeat.UnixMilli(), Assigned: toQueueRefs(c.Assigned),
		}
		for _, sub := range c.Subscriptions {
			cc.Subscriptions = append(cc.Subscriptions, &gantryv1.Subscription{Topic: sub.Topic, Expression: sub.Expression})
		}
		resp.Connections = append(resp.Connections, cc)
	}
	return resp, nil
}

// ResetOffsetByTime implements the service.
func (s *Admin) ResetOffsetByTime(ctx context.Context, req *gantryv1.ResetOffsetByTimeRequest) (*gantryv1.ResetOffsetByTimeResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_ResetOffsetByTime_FullMethodName); err != nil {
		return nil, err
	}
	offs, err := s.b.ResetOffsetByTime(req.GetGroup(), req.GetTopic(), req.GetTimestampMs())
	if err != nil {
		return nil, toStatus(err)
	}
	return &gantryv1.ResetOffsetByTimeResponse{Offsets: offs}, nil
}

// QueryMessageById implements the service. The id is an offset message
// id of this broker, answered with the record it names, or a UNIQ_KEY (the
// client's message id), answered with the records of every topic whose
// UNIQ_KEY it is (the message and its retry and dead-letter copies),
// oldest first, at most broker.MaxByUniqKey. NOT_FOUND when there is none.
func (s *Admin) QueryMessageById(ctx context.Context, req *gantryv1.QueryMessageByIdRequest) (*gantryv1.QueryMessageResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_QueryMessageById_FullMethodName); err != nil {
		return nil, err
	}
	id := req.GetMsgId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "query message: no message id given")
	}
	rec, err := s.recordByOffsetID(id)
	if err == nil {
		return &gantryv1.QueryMessageResponse{Records: rec}, nil
	}
	if status.Code(err) != codes.NotFound {
		return nil, err
	}
	ms, kerr := s.b.MessagesByUniqKey(ctx, id)
	if kerr != nil {
		return nil, toStatus(kerr)
	}
	if len(ms) == 0 {
		return nil, status.Errorf(codes.NotFound, "message %s: no message with that UNIQ_KEY on broker %s, and %v",
			id, s.b.Config().BrokerName, status.Convert(err).Message())
	}
	var records []byte
	for _, m := range ms {
		if records, err = message.Append(records, m, true); err != nil {
			return nil, toStatus(fmt.Errorf("re-encode message at %d: %w", m.PhysicalOffset, err))
		}
	}
	return &gantryv1.QueryMessageResponse{Records: records}, nil
}

// recordByOffsetID returns the record id names as an offset message id
// of this broker; NOT_FOUND when id is no such id or names no record.
func (s *Admin) recordByOffsetID(id string) ([]byte, error) {
	host, phys, err := message.DecodeOffsetMsgID(id)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "it is no offset message id (%v)", err)
	}
	if want := s.b.Config().StoreAddr(); host != want {
		return nil, status.Errorf(codes.NotFound, "as an offset message id it names broker %s, this is %s", host, want)
	}
	rec, err := s.b.AppendRecordAt(nil, phys)
	if err != nil {
		return nil, toStatus(fmt.Errorf("as an offset message id: %w", err))
	}
	return rec, nil
}

// QueryMessageByKey implements the service.
func (s *Admin) QueryMessageByKey(ctx context.Context, req *gantryv1.QueryMessageByKeyRequest) (*gantryv1.QueryMessageResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_QueryMessageByKey_FullMethodName, auth.Topic(req.GetTopic())); err != nil {
		return nil, err
	}
	end := req.GetEndMs()
	if end == 0 {
		end = 1<<63 - 1
	}
	limit := int(req.GetMax())
	if limit <= 0 {
		limit = 64
	}
	ms, err := s.b.MessagesByKey(ctx, req.GetTopic(), req.GetKey(), req.GetBeginMs(), end, limit)
	if err != nil {
		return nil, toStatus(err)
	}
	var records []byte
	for _, m := range ms {
		if records, err = message.Append(records, m, true); err != nil {
			return nil, toStatus(fmt.Errorf("re-encode message at %d: %w", m.PhysicalOffset, err))
		}
	}
	return &gantryv1.QueryMessageResponse{Records: records}, nil
}

// BrokerStatus implements the service.
func (s *Admin) BrokerStatus(ctx context.Context, _ *gantryv1.BrokerStatusRequest) (*gantryv1.BrokerStatusResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_BrokerStatus_FullMethodName); err != nil {
		return nil, err
	}
	st := s.b.Status()
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	m := map[string]string{
		"clusterName": st.ClusterName, "brokerName": st.BrokerName, "brokerId": i(st.BrokerID),
		"brokerAddr": st.BrokerAddr, "grpcAddr": st.GRPCListenAddr, "httpAddr": st.HTTPListenAddr,
		"ready": strconv.FormatBool(st.Ready), "minLogOffset": i(st.MinLogOffset), "maxLogOffset": i(st.MaxLogOffset),
		"flushedOffset": i(st.FlushedOffset), "topics": strconv.Itoa(st.Topics), "messagesPut": i(st.MessagesPut),
		"messagesGot": i(st.MessagesGot), "uptime": st.Uptime.Round(1e9).String(),
		"flushDiskType": s.b.Config().FlushDiskType.String(),
	}
	if st.Ready {
		// Held: what a controller-mode master's in-sync set does not hold
		// yet, which its consumers do not read (docs/REPLICATION.md).
		m["dispatchBehindBytes"], m["dispatchHeldBytes"] = i(st.Dispatch.LagBytes), i(st.Dispatch.Held)
	}
	return &gantryv1.BrokerStatusResponse{Status: m}, nil
}

func dlqFilter(f *gantryv1.DLQFilter) broker.DLQFilter {
	return broker.DLQFilter{Group: f.GetGroup(), Begin: msTime(f.GetBeginMs()), End: msTime(f.GetEndMs()),
		OriginTopic: f.GetOriginTopic(), Key: f.GetKey(), MsgID: f.GetMsgId()}
}

func dlqSelect(s *gantryv1.DLQSelection) broker.DLQSelect {
	return broker.DLQSelect{DLQFilter: dlqFilter(s.GetFilter()), Offsets: s.GetOffsets(), All: s.GetAll()}
}

// msTime converts unix ms, 0 being the zero time.
func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// unixMs converts a time to unix ms, the zero time being 0.
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func toDLQEntry(e broker.DLQEntry) *gantryv1.DLQEntry {
	return &gantryv1.DLQEntry{
		Offset: e.Offset, MsgId: e.MsgID, OriginTopic: e.OriginTopic, OriginMsgId: e.OriginMsgID, UniqKey: e.UniqKey,
		Keys: e.Keys, Tags: e.Tags, ReconsumeTimes: e.ReconsumeTimes, BornTimeMs: unixMs(e.BornTime),
		DeadLetterTimeMs: unixMs(e.DeadLetterTime), Reason: e.Reason, Resends: e.Resends,
		LastResendMs: unixMs(e.LastResend), EarlierResends: e.EarlierResends, BodySize: int32(min(e.BodySize, 1<<31-1)),
	}
}

// DLQList implements the service.
func (s *Admin) DLQList(ctx context.Context, req *gantryv1.DLQListRequest) (*gantryv1.DLQListResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_DLQList_FullMethodName); err != nil {
		return nil, err
	}
	page, err := s.b.ListDLQ(ctx, broker.DLQListRequest{DLQFilter: dlqFilter(req.GetFilter()), Cursor: req.GetCursor(), Limit: int(req.GetLimit())})
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &gantryv1.DLQListResponse{NextCursor: page.NextCursor, More: page.More}
	for _, e := range page.Entries {
		resp.Entries = append(resp.Entries, toDLQEntry(e))
	}
	return resp, nil
}

// DLQShow implements the service.
func (s *Admin) DLQShow(ctx context.Context, req *gantryv1.DLQShowRequest) (*gantryv1.DLQShowResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_DLQShow_FullMethodName); err != nil {
		return nil, err
	}
	m, err := s.b.ShowDLQ(ctx, broker.DLQRef{Group: req.GetGroup(), Offset: req.GetOffset(), MsgID: req.GetMsgId()})
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &gantryv1.DLQShowResponse{Entry: toDLQEntry(m.DLQEntry), Body: m.Body, SysFlag: m.SysFlag, ExpiresMs: unixMs(m.Expires)}
	for _, p := range m.Properties {
		resp.Properties = append(resp.Properties, &gantryv1.DLQProperty{Key: p.Key, Value: p.Value})
	}
	for _, h := range m.History {
		resp.History = append(resp.History, &gantryv1.DLQEvent{TimeMs: unixMs(h.Time), What: h.What})
	}
	return resp, nil
}

// DLQResend implements the service. A call that stopped part way (the
// broker shutting down, the disk full) answers its error: what it resent
// before is recorded (DLQList shows the resend counts).
func (s *Admin) DLQResend(ctx context.Context, req *gantryv1.DLQResendRequest) (*gantryv1.DLQResendResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_DLQResend_FullMethodName); err != nil {
		return nil, err
	}
	res, err := s.b.ResendDLQ(ctx, broker.DLQResendRequest{DLQSelect: dlqSelect(req.GetSelection()), ToRetry: req.GetToRetry()})
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &gantryv1.DLQResendResponse{}
	for _, r := range res.Resent {
		resp.Resent = append(resp.Resent, &gantryv1.DLQResent{Offset: r.Offset, UniqKey: r.UniqKey, Topic: r.Topic, MsgId: r.MsgID, Resends: r.Resends})
	}
	for _, f := range res.Failed {
		resp.Failed = append(resp.Failed, &gantryv1.DLQResendFailure{Offset: f.Offset, UniqKey: f.UniqKey, Error: f.Err.Error()})
	}
	return resp, nil
}

// exportChunkBytes is the most a DLQExport chunk carries.
const exportChunkBytes = 256 << 10

// chunkWriter sends what is written to it as DLQExport chunks.
type chunkWriter struct {
	stream gantryv1.Admin_DLQExportServer
}

func (w chunkWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += exportChunkBytes {
		if err := w.stream.Send(&gantryv1.DLQExportChunk{Data: p[off:min(off+exportChunkBytes, len(p))]}); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

// DLQExport implements the service.
func (s *Admin) DLQExport(req *gantryv1.DLQExportRequest, stream gantryv1.Admin_DLQExportServer) error {
	if err := s.guard.allow(stream.Context(), gantryv1.Admin_DLQExport_FullMethodName); err != nil {
		return err
	}
	_, err := s.b.ExportDLQ(stream.Context(), dlqFilter(req.GetFilter()), chunkWriter{stream: stream})
	return toStatus(err)
}

// DLQPurge implements the service.
func (s *Admin) DLQPurge(ctx context.Context, req *gantryv1.DLQPurgeRequest) (*gantryv1.DLQPurgeResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_DLQPurge_FullMethodName); err != nil {
		return nil, err
	}
	n, err := s.b.PurgeDLQ(ctx, dlqSelect(req.GetSelection()))
	if err != nil {
		return nil, toStatus(err)
	}
	return &gantryv1.DLQPurgeResponse{Purged: int64(n)}, nil
}
