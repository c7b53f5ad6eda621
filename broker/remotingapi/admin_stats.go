package remotingapi

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

// topicOffset is RocketMQ's TopicOffset, a queue of GET_TOPIC_STATS_INFO.
type topicOffset struct {
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
	MaxOffset           int64 `json:"maxOffset"`
	MinOffset           int64 `json:"minOffset"`
}

// topicStats answers GET_TOPIC_STATS_INFO (202), mqadmin topicStatus's
// request: ext topic; a TopicStatsTable with each queue's (read or write)
// min and max offsets and the store time of its last message (0 when
// empty). An unknown topic is TOPIC_NOT_EXIST.
func (h *Handler) topicStats(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	topic := rd.str("topic", true)
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	qs, err := h.b.TopicStatus(topic)
	if err != nil {
		return errorResponse(req, err)
	}
	entries := make([]queueEntry, 0, len(qs))
	for _, q := range qs {
		entries = append(entries, queueEntry{topic, q.QueueID, topicOffset{q.LastStoreTimestamp, q.MaxOffset, q.MinOffset}})
	}
	return h.offsetTableResponse(req, entries)
}

// offsetWrapper is RocketMQ's OffsetWrapper, a queue of GET_CONSUME_STATS.
type offsetWrapper struct {
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	LastTimestamp  int64 `json:"lastTimestamp"`
	PullOffset     int64 `json:"pullOffset"`
}

// consumeStats answers GET_CONSUME_STATS (208), mqadmin consumerProgress's
// request: ext consumerGroup, and topic or topicList (";"-separated) to
// choose topics; without either, the topics the group's live clients
// subscribe to or, with none online, those it has offsets in (deleted
// topics left out). For each read queue: the broker's max offset, the
// group's committed offset (0 without one, as in Java), the pull offset
// (the committed one: Gantry keeps no other) and the store time of the
// last message consumed. An unknown group is SUBSCRIPTION_GROUP_NOT_EXIST,
// a topic asked for that does not exist TOPIC_NOT_EXIST.
func (h *Handler) consumeStats(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	group := rd.str("consumerGroup", true)
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	if !h.b.GroupKnown(group) {
		return groupNotFound(req, group)
	}
	topics, asked := h.statsTopics(group, req.Ext("topic"), req.Ext("topicList"))
	var entries []queueEntry
	for _, topic := range topics {
		tc, ok := h.b.Topic(topic)
		if !ok {
			if asked {
				return unknownTopic(req, topic)
			}
			continue
		}
		for q := range tc.ReadQueueNums {
			entries = append(entries, queueEntry{topic, q, h.queueProgress(group, topic, q)})
		}
	}
	return h.offsetTableResponse(req, entries)
}

// statsTopics returns the topics GET_CONSUME_STATS reports on, each once,
// and whether the request named them.
func (h *Handler) statsTopics(group, topic, topicList string) ([]string, bool) {
	seen := map[string]bool{}
	if topicList != "" {
		for t := range strings.SplitSeq(topicList, ";") {
			seen[t] = t != ""
		}
		return sortedTrue(seen), true
	}
	if topic != "" {
		return []string{topic}, true
	}
	for _, c := range h.b.Consumers(group) {
		for _, s := range c.Subscriptions {
			seen[s.Topic] = true
		}
	}
	if len(seen) == 0 {
		for _, k := range h.b.OffsetKeys(group) {
			seen[k.Topic] = true
		}
	}
	return sortedTrue(seen), false
}

// sortedTrue returns the keys of set that are true, sorted.
func sortedTrue(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k, ok := range set {
		if ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// queueProgress is a group's progress in one queue.
func (h *Handler) queueProgress(group, topic string, q int32) offsetWrapper {
	_, maxOff := h.b.QueueOffsets(topic, q)
	off, _ := h.b.QueryOffset(group, topic, q)
	w := offsetWrapper{BrokerOffset: maxOff, ConsumerOffset: off, PullOffset: off}
	if off > 0 {
		if m, err := h.b.MessageByQueueOffset(topic, q, off-1); err == nil {
			w.LastTimestamp = m.StoreTimestamp
		}
	}
	return w
}

// connection is RocketMQ's Connection: one client of a group.
type connection struct {
	ClientAddr string `json:"clientAddr"`
	ClientID   string `json:"clientId"`
	Language   string `json:"language"`
	Version    int32  `json:"version"`
}

// groupSubscription is RocketMQ's SubscriptionData as a Java broker keeps
// it: the expression, its tags and their hash codes.
type groupSubscription struct {
	ClassFilterMode bool     `json:"classFilterMode"`
	CodeSet         []int32  `json:"codeSet"`
	ExpressionType  string   `json:"expressionType"`
	SubString       string   `json:"subString"`
	TagsSet         []string `json:"tagsSet"`
	Topic           string   `json:"topic"`
}

// consumerConnection is RocketMQ's ConsumerConnection.
type consumerConnection struct {
	ConnectionSet     []connection                 `json:"connectionSet"`
	ConsumeFromWhere  string                       `json:"consumeFromWhere,omitempty"`
	ConsumeType       string                       `json:"consumeType,omitempty"`
	MessageModel      string                       `json:"messageModel"`
	SubscriptionTable map[string]groupSubscription `json:"subscriptionTable"`
}

// consumerConnections answers GET_CONSUMER_CONNECTION_LIST (203), mqadmin
// consumerConnection's request: ext consumerGroup; the group's live
// clients (id, address, and the language and version of their last
// heartbeat: OTHER and 0 for Gantry's gRPC clients), its subscriptions
// (the newest heartbeat's for each topic), message model, and the consume
// type and where-from of the remoting clients' heartbeats. A group without
// a live client is CONSUMER_NOT_ONLINE, as from Java.
func (h *Handler) consumerConnections(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	group := rd.str("consumerGroup", true)
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	cs := h.b.Consumers(group)
	if len(cs) == 0 {
		return remoting.ErrorResponse(req, remoting.ResConsumerNotOnline, "the consumer group[%s] not online", group)
	}
	cc := consumerConnection{ConnectionSet: []connection{}, MessageModel: cs[0].Model.String(), SubscriptionTable: map[string]groupSubscription{}}
	newest := map[string]time.Time{}
	for _, c := range cs {
		conn := connection{ClientAddr: c.Addr, ClientID: c.ClientID, Language: "OTHER"}
		if hb, ok := h.clients.lastHeartbeat(member{group, c.ClientID}); ok {
			conn.Language, conn.Version = hb.language, hb.version
			if cc.ConsumeType == "" {
				cc.ConsumeType, cc.ConsumeFromWhere = hb.consumeType, hb.consumeFromWhere
			}
		}
		cc.ConnectionSet = append(cc.ConnectionSet, conn)
		for _, s := range c.Subscriptions {
			if at, ok := newest[s.Topic]; !ok || c.LastHeartbeat.After(at) {
				newest[s.Topic] = c.LastHeartbeat
				cc.SubscriptionTable[s.Topic] = h.toSubscriptionData(group, s)
			}
		}
	}
	return jsonResponse(req, cc)
}

// toSubscriptionData describes a subscription as Java does: a TAG
// expression's tags and their hash codes ("*" has none).
func (h *Handler) toSubscriptionData(group string, s broker.Subscription) groupSubscription {
	d := groupSubscription{Topic: s.Topic, SubString: s.Expression, ExpressionType: expressionTag, TagsSet: []string{}, CodeSet: []int32{}}
	if sub, ok := h.subs.get(group, s.Topic); ok && sub.kind != "" { // a remoting client's own words
		d.SubString, d.ExpressionType = sub.expression, sub.kind
	}
	if d.SubString == "" {
		d.SubString = "*"
	}
	if d.ExpressionType != expressionTag || d.SubString == "*" {
		return d
	}
	for tag := range strings.SplitSeq(d.SubString, "||") {
		if tag = strings.TrimSpace(tag); tag != "" {
			d.TagsSet = append(d.TagsSet, tag)
			d.CodeSet = append(d.CodeSet, message.JavaHashCode(tag))
		}
	}
	return d
}

// runtimeInfo answers GET_BROKER_RUNTIME_INFO (28), mqadmin brokerStatus's
// and clusterList's request: a KVTable of the broker's figures under
// Java's names, those Gantry measures (docs/BROKER.md lists them).
func (h *Handler) runtimeInfo(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	st := h.b.Status()
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	t := map[string]string{
		"brokerVersionDesc":        "V5_3_3",
		"brokerVersion":            strconv.Itoa(int(remoting.VersionV5_3_3)),
		"brokerActive":             strconv.FormatBool(st.Ready),
		"bootTimestamp":            i(st.StartedAt.UnixMilli()),
		"runtime":                  javaRuntime(st.Uptime),
		"commitLogMinOffset":       i(st.MinLogOffset),
		"commitLogMaxOffset":       i(st.MaxLogOffset),
		"remainHowManyDataToFlush": humanBytes(st.MaxLogOffset - st.FlushedOffset),
		"msgPutTotalTodayNow":      i(st.MessagesPut),
		"msgGetTotalTodayNow":      i(st.MessagesGot),
	}
	if st.Ready {
		t["dispatchBehindBytes"] = i(max(st.MaxLogOffset-h.b.DispatchedOffset(), 0))
		t["dispatchHeldBytes"] = i(st.Dispatch.Held) // controller mode: what the in-sync set does not hold yet
		if ts, ok := h.earliestMessageTime(st.MinLogOffset); ok {
			t["earliestMessageTimeStamp"] = i(ts)
		}
	}
	if u, err := fsx.OS.DiskUsage(h.b.Config().StorePathRootDir); err == nil {
		t["commitLogDiskRatio"] = strconv.FormatFloat(u.UsedRatio(), 'f', -1, 64)
		t["commitLogDirCapacity"] = fmt.Sprintf("Total : %s, Free : %s.", humanBytes(u.Total), humanBytes(u.Free))
	}
	return jsonResponse(req, struct {
		Table map[string]string `json:"table"`
	}{t})
}

// earliestMessageTime returns the store time of the commit log's first
// record.
func (h *Handler) earliestMessageTime(minOff int64) (int64, bool) {
	rec, err := h.b.AppendRecordAt(nil, minOff)
	if err != nil {
		return 0, false
	}
	return message.StoreTimestampOf(rec), true
}

// javaRuntime formats an uptime as Java's broker does:
// "[ 0 days, 1 hours, 2 minutes, 3 seconds ]".
func javaRuntime(d time.Duration) string {
	s := int64(d / time.Second)
	return fmt.Sprintf("[ %d days, %d hours, %d minutes, %d seconds ]", s/86400, s/3600%24, s/60%60, s%60)
}

// humanBytes formats a byte count as Java's MixAll.humanReadableByteCount
// (binary units): "512 B", "1.5 KiB", "3.0 GiB".
func humanBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	exp := int(math.Log(float64(n)) / math.Log(1024))
	exp = min(exp, 6)
	return fmt.Sprintf("%.1f %ciB", float64(n)/math.Pow(1024, float64(exp)), "KMGTPE"[exp-1])
}

// resetOffset answers INVOKE_BROKER_TO_RESET_OFFSET (222), mqadmin
// resetOffsetByTime's request: ext topic, group and timestamp (unix ms;
// negative: every queue's max offset, as in Java). The group's offset in
// every read queue of the topic becomes that of the first message stored
// at or after timestamp (broker.ResetOffsetByTime); the answer is a
// ResetOffsetBody of the new offsets. isForce is ignored (a Java broker
// resetting on the server side ignores it too). One queue's reset (queueId
// 0 or more, or offset other than -1) is refused: Gantry resets a topic's
// queues together. An unknown topic is TOPIC_NOT_EXIST, an unknown group
// SUBSCRIPTION_GROUP_NOT_EXIST.
func (h *Handler) resetOffset(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	topic := rd.str("topic", true)
	group := rd.str("group", true)
	ts := rd.required("timestamp", 64)
	queueID := rd.int32("queueId", -1)
	offset := rd.int64("offset", -1)
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	if queueID >= 0 || offset != -1 {
		return remoting.ErrorResponse(req, remoting.ResInvalidParameter,
			"%s: resetting one queue (queueId %d, offset %d) is not supported by Gantry: reset every queue of the topic by timestamp",
			req.RequestCode(), queueID, offset)
	}
	if r := h.checkTopicExists(req, topic); r != nil {
		return r
	}
	if !h.b.GroupKnown(group) {
		return groupNotFound(req, group)
	}
	if ts < 0 {
		ts = math.MaxInt64 // no message is stored later: every queue's max offset
	}
	offs, err := h.b.ResetOffsetByTime(group, topic, ts)
	if err != nil {
		return errorResponse(req, err)
	}
	return h.offsetTableResponse(req, offsetEntries(topic, offs))
}
