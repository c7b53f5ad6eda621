package remotingapi

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/remoting"
)

// updateAndCreateTopic answers UPDATE_AND_CREATE_TOPIC (17), which the
// official Go client's admin.CreateTopic and mqadmin updateTopic send:
// ext topic, readQueueNums, writeQueueNums and perm (required, as Java's
// header requires them), topicFilterType (SINGLE_TAG or MULTI_TAG;
// default SINGLE_TAG), topicSysFlag, order and attributes (mqadmin's
// "+key=value,-key" changes of the topic's attributes). defaultTopic is
// ignored, as by Java. The broker's rules apply (broker.CreateOrUpdateTopic):
// queue counts 1..1024, perm 0..7, no system topic. The nameservers learn
// the topic at once.
func (h *Handler) updateAndCreateTopic(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	tc := broker.TopicConfig{
		TopicName:       rd.str("topic", true),
		ReadQueueNums:   int32(rd.required("readQueueNums", 32)),
		WriteQueueNums:  int32(rd.required("writeQueueNums", 32)),
		Perm:            int32(rd.required("perm", 32)),
		TopicFilterType: rd.str("topicFilterType", false),
		TopicSysFlag:    rd.int32("topicSysFlag", 0),
		Order:           rd.bool("order"),
	}
	switch tc.TopicFilterType {
	case "":
		tc.TopicFilterType = broker.FilterSingleTag
	case broker.FilterSingleTag, broker.FilterMultiTag:
	default:
		rd.fail("topicFilterType", "%q: want %s or %s", tc.TopicFilterType, broker.FilterSingleTag, broker.FilterMultiTag)
	}
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	old, _ := h.b.Topic(tc.TopicName)
	attrs, err := alterAttributes(old.Attributes, req.Ext("attributes"))
	if err != nil {
		return errorResponse(req, err)
	}
	tc.Attributes = attrs
	if err := h.b.CreateOrUpdateTopic(tc); err != nil {
		return errorResponse(req, err)
	}
	return remoting.NewResponse(req, remoting.ResSuccess, "")
}

// alterAttributes applies mqadmin's attribute changes to a topic's
// attributes (Java's AttributeParser): a comma-separated list of
// "+key=value" (set) and "-key" (remove). The result is a new map.
func alterAttributes(cur map[string]string, changes string) (map[string]string, error) {
	out := maps.Clone(cur)
	if out == nil {
		out = map[string]string{}
	}
	if changes == "" {
		return out, nil
	}
	for item := range strings.SplitSeq(changes, ",") {
		key, value, isSet := strings.Cut(item[min(1, len(item)):], "=")
		switch {
		case strings.HasPrefix(item, "+") && isSet && key != "" && !strings.ContainsAny(key, "+-="):
			out[key] = value
		case strings.HasPrefix(item, "-") && !isSet && key != "" && !strings.ContainsAny(key, "+-"):
			delete(out, key)
		default:
			return nil, fmt.Errorf("%w: ext field attributes: %q: want +key=value or -key, comma-separated", errBadHeader, item)
		}
	}
	return out, nil
}

// deleteTopicInBroker answers DELETE_TOPIC_IN_BROKER (215), ext topic: the
// topic's configuration and every group's offsets in it are removed
// (broker.DeleteTopic) and the nameservers learn it at once. An unknown
// topic is TOPIC_NOT_EXIST, a system topic NO_PERMISSION.
func (h *Handler) deleteTopicInBroker(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	topic := rd.str("topic", true)
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	if err := h.b.DeleteTopic(topic); err != nil {
		return errorResponse(req, err)
	}
	return remoting.NewResponse(req, remoting.ResSuccess, "")
}

// topicConfigWrapper is RocketMQ's TopicConfigSerializeWrapper.
type topicConfigWrapper struct {
	DataVersion      dataVersion                   `json:"dataVersion"`
	TopicConfigTable map[string]broker.TopicConfig `json:"topicConfigTable"`
}

// allTopicConfig answers GET_ALL_TOPIC_CONFIG (21) with every topic's
// configuration (the parking topics aside, as everywhere: broker.Topics)
// and the table's data version. The paging fields newer mqadmins send
// (topicSeq, maxTopicNum) are ignored: without totalTopicNum in the answer
// they read it as the whole table, as from an older broker.
func (h *Handler) allTopicConfig(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	w := topicConfigWrapper{
		DataVersion:      toDataVersion(h.b.TopicsVersion()),
		TopicConfigTable: map[string]broker.TopicConfig{},
	}
	for _, tc := range h.b.Topics() {
		w.TopicConfigTable[tc.TopicName] = tc
	}
	return jsonResponse(req, w)
}
