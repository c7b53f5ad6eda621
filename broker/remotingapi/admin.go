package remotingapi

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/remoting"
)

// This file holds what RocketMQ's admin requests (admin_topics.go,
// admin_groups.go, admin_stats.go) share: the MessageQueue-keyed tables of
// their answers, the data version, and the refusal of configuration
// changes.

// queueEntry is one entry of a queue table: a queue of this broker and
// its value.
type queueEntry struct {
	topic   string
	queueID int32
	value   any // encoded with encoding/json
}

// offsetTableBody returns {"offsetTable":TABLE}, the body of TopicStatsTable,
// ConsumeStats and ResetOffsetBody (the answer to
// INVOKE_BROKER_TO_RESET_OFFSET and RESET_CONSUMER_CLIENT_OFFSET's
// request), with TABLE a Java Map<MessageQueue, V>
// as fastjson (which the Java broker and mqadmin use) writes it: an object
// whose keys are MessageQueue objects, not strings,
//
//	{"offsetTable":{{"topic":"T","brokerName":"broker-a","queueId":0}:{"maxOffset":5,...},...}}
//
// That is not JSON, so encoding/json cannot write it; it is what a Java
// broker sends, Java's fastjson reads, and the official Go client's
// ResetOffsetBody parser takes (docs/BROKER.md, Administration).
// Entries are sorted by topic, then queue id. The fields Gantry does not
// measure (topicPutTps, consumeTps) are left out, which Java reads as 0.
func offsetTableBody(brokerName string, entries []queueEntry) ([]byte, error) {
	slices.SortFunc(entries, func(a, b queueEntry) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.queueID, b.queueID))
	})
	body := []byte(`{"offsetTable":{`)
	for i, e := range entries {
		if i > 0 {
			body = append(body, ',')
		}
		k, err := json.Marshal(messageQueue{BrokerName: brokerName, QueueID: e.queueID, Topic: e.topic})
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(e.value)
		if err != nil {
			return nil, err
		}
		body = append(append(append(body, k...), ':'), v...)
	}
	return append(body, "}}"...), nil
}

// offsetTableResponse is SUCCESS with an offsetTableBody.
func (h *Handler) offsetTableResponse(req *remoting.Command, entries []queueEntry) *remoting.Command {
	body, err := offsetTableBody(h.b.Config().BrokerName, entries)
	if err != nil {
		return remoting.ErrorResponse(req, remoting.ResSystemError, "encoding the answer to %s: %v", req.RequestCode(), err)
	}
	resp := remoting.NewResponse(req, remoting.ResSuccess, "")
	resp.Body = body
	return resp
}

// dataVersion is RocketMQ's DataVersion as its admin answers carry it.
type dataVersion struct {
	Counter      int64 `json:"counter"`
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"`
}

func toDataVersion(v broker.DataVersion) dataVersion {
	return dataVersion{Counter: v.Counter, Timestamp: v.Timestamp}
}

// groupNotFound is the answer about a group the broker does not know.
func groupNotFound(req *remoting.Command, group string) *remoting.Command {
	return remoting.ErrorResponse(req, remoting.ResSubscriptionGroupNotExist,
		"%s: the consumer group %q does not exist on this broker", req.RequestCode(), group)
}

// refuseConfigChange answers the requests that would change the broker's
// configuration at run time (UPDATE_BROKER_CONFIG): Gantry's configuration
// is broker.conf's, read at start, so they are refused naming the code.
func refuseConfigChange(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return remoting.ErrorResponse(req, remoting.ResRequestCodeNotSupported,
		"request code %d (%s) is not supported by Gantry: the broker's configuration is broker.conf's, read at start; change it there and restart",
		req.Code, req.RequestCode().Name())
}

// unknownTopic is the answer about a topic the broker does not have.
func unknownTopic(req *remoting.Command, topic string) *remoting.Command {
	return remoting.ErrorResponse(req, remoting.ResTopicNotExist, "%s: topic[%s] not exist", req.RequestCode(), topic)
}

// checkTopicExists returns the answer for a request about topic when the
// broker does not have it, nil when it does.
func (h *Handler) checkTopicExists(req *remoting.Command, topic string) *remoting.Command {
	if _, ok := h.b.Topic(topic); !ok {
		return unknownTopic(req, topic)
	}
	return nil
}
