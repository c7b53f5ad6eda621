package remotingapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/remoting"
)

// subscriptionGroupConfig is the body of UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
// RocketMQ's SubscriptionGroupConfig, with the fields Gantry keeps; the
// others (groupSysFlag, consumeTimeoutMinute, subscriptionDataSet,
// attributes) are ignored.
type subscriptionGroupConfig struct {
	GroupName                      string            `json:"groupName"`
	ConsumeEnable                  bool              `json:"consumeEnable"`
	ConsumeFromMinEnable           bool              `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool              `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          bool              `json:"consumeMessageOrderly"`
	RetryQueueNums                 int32             `json:"retryQueueNums"`
	RetryMaxTimes                  int32             `json:"retryMaxTimes"`
	BrokerID                       int64             `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64             `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool              `json:"notifyConsumerIdsChangedEnable"`
	GroupRetryPolicy               *groupRetryPolicy `json:"groupRetryPolicy"`
}

// groupRetryPolicy is RocketMQ 5's GroupRetryPolicy. A CUSTOMIZED policy
// is the broker's delay-level ladder (messageDelayLevel): its "next"
// delays are not read.
type groupRetryPolicy struct {
	Type                   string `json:"type"`
	ExponentialRetryPolicy *struct {
		Initial    int64 `json:"initial"`
		Max        int64 `json:"max"`
		Multiplier int64 `json:"multiplier"`
	} `json:"exponentialRetryPolicy"`
}

// decodeGroupConfig decodes an UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body;
// a field it lacks has Gantry's default (broker.DefaultSubscriptionGroup),
// as for a group created by a heartbeat.
func decodeGroupConfig(body []byte) (broker.SubscriptionGroup, error) {
	if len(body) == 0 {
		return broker.SubscriptionGroup{}, fmt.Errorf("%w: no SubscriptionGroupConfig body", errBadHeader)
	}
	d := broker.DefaultSubscriptionGroup("")
	c := subscriptionGroupConfig{
		ConsumeEnable: d.ConsumeEnable, ConsumeFromMinEnable: d.ConsumeFromMinEnable, ConsumeBroadcastEnable: d.ConsumeBroadcastEnable,
		ConsumeMessageOrderly: d.ConsumeMessageOrderly, RetryQueueNums: d.RetryQueueNums, RetryMaxTimes: d.RetryMaxTimes,
		BrokerID: d.BrokerID, WhichBrokerWhenConsumeSlowly: d.WhichBrokerWhenConsumeSlowly,
		NotifyConsumerIdsChangedEnable: d.NotifyConsumerIdsChangedEnable,
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return broker.SubscriptionGroup{}, fmt.Errorf("%w: SubscriptionGroupConfig body: %w", errBadHeader, err)
	}
	g := broker.SubscriptionGroup{
		GroupName: c.GroupName, ConsumeEnable: c.ConsumeEnable, ConsumeFromMinEnable: c.ConsumeFromMinEnable,
		ConsumeBroadcastEnable: c.ConsumeBroadcastEnable, ConsumeMessageOrderly: c.ConsumeMessageOrderly,
		RetryQueueNums: c.RetryQueueNums, RetryMaxTimes: c.RetryMaxTimes, BrokerID: c.BrokerID,
		WhichBrokerWhenConsumeSlowly: c.WhichBrokerWhenConsumeSlowly, NotifyConsumerIdsChangedEnable: c.NotifyConsumerIdsChangedEnable,
	}
	if p := c.GroupRetryPolicy; p != nil && p.Type != broker.RetryCustomized {
		g.GroupRetryPolicy = &broker.RetryPolicy{Type: p.Type}
		if e := p.ExponentialRetryPolicy; e != nil {
			g.GroupRetryPolicy.Exponential = &broker.ExponentialRetryPolicy{Initial: e.Initial, Max: e.Max, Multiplier: e.Multiplier}
		}
	}
	return g, nil
}

// updateAndCreateGroup answers UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200),
// mqadmin updateSubGroup's request: the body's SubscriptionGroupConfig
// creates the group or replaces its config, and is saved before the
// answer (broker.PutGroup). A bad group name or value is
// INVALID_PARAMETER naming it.
func (h *Handler) updateAndCreateGroup(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	g, err := decodeGroupConfig(req.Body)
	if err != nil {
		return errorResponse(req, err)
	}
	if err := h.b.PutGroup(g); err != nil {
		return errorResponse(req, err)
	}
	return remoting.NewResponse(req, remoting.ResSuccess, "")
}

// deleteGroup answers DELETE_SUBSCRIPTIONGROUP (207), mqadmin
// deleteSubGroup's request: ext groupName, and cleanOffset (mqadmin's
// -r/--removeOffset; default false) to remove the group's committed
// offsets and its retry and dead-letter topics too (broker.DeleteGroup).
// A group the broker does not know is answered SUCCESS with a remark
// saying so, as RocketMQ's broker answers: deleting is idempotent, and
// mqadmin deleteSubGroup -c goes on to the cluster's other brokers.
func (h *Handler) deleteGroup(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	rd := extReader{req: req}
	group := rd.str("groupName", true)
	cleanOffset := rd.bool("cleanOffset")
	if rd.err != nil {
		return errorResponse(req, rd.err)
	}
	err := h.b.DeleteGroup(group, !cleanOffset)
	switch {
	case errors.Is(err, broker.ErrGroupNotFound):
		return remoting.NewResponse(req, remoting.ResSuccess, "subscription group "+group+" not found on this broker: nothing to delete")
	case err != nil:
		return errorResponse(req, err)
	}
	return remoting.NewResponse(req, remoting.ResSuccess, "")
}

// subscriptionGroupWrapper is RocketMQ's SubscriptionGroupWrapper. Gantry
// has no forbidden table: it is always empty.
type subscriptionGroupWrapper struct {
	DataVersion            dataVersion                         `json:"dataVersion"`
	ForbiddenTable         map[string]map[string]int32         `json:"forbiddenTable"`
	SubscriptionGroupTable map[string]broker.SubscriptionGroup `json:"subscriptionGroupTable"`
}

// allGroupConfig answers GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), which the
// official Go client's admin.GetAllSubscriptionGroup sends: every group's
// config and the table's data version. Paging fields are ignored, as for
// GET_ALL_TOPIC_CONFIG.
func (h *Handler) allGroupConfig(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	w := subscriptionGroupWrapper{
		DataVersion:            toDataVersion(h.b.GroupsVersion()),
		ForbiddenTable:         map[string]map[string]int32{},
		SubscriptionGroupTable: map[string]broker.SubscriptionGroup{},
	}
	for _, g := range h.b.Groups() {
		w.SubscriptionGroupTable[g.GroupName] = g
	}
	return jsonResponse(req, w)
}
