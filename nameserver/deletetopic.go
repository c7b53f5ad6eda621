package nameserver

import (
	"context"
	"maps"

	"github.com/gantrymq/gantry/remoting"
)

// DeleteTopic forgets topic's route: no broker serves it any more as far
// as Route, Topics and the remoting front end tell. It reports whether the
// topic had a route. A broker that still has the topic registers it again
// with its next registration (within its registerNameServerPeriod), as the
// route of a topic some broker serves must be; delete the topic on the
// brokers first (Gantry's brokers then register without it at once).
func (r *Registry) DeleteTopic(topic string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	byName, ok := r.routes[topic]
	if !ok {
		return false
	}
	delete(r.routes, topic)
	for name := range byName {
		g := r.groups[name]
		if g == nil {
			continue
		}
		g.indexed = withoutTopic(g.indexed, topic)
		for _, b := range g.members {
			if _, has := b.topics[topic]; has {
				b.topics = withoutTopic(b.topics, topic) // stored maps are replaced, never modified
			}
		}
	}
	r.log.Info("topic deleted", "topic", topic, "brokers", len(byName))
	return true
}

// withoutTopic returns a copy of topics without topic.
func withoutTopic(topics map[string]TopicInfo, topic string) map[string]TopicInfo {
	out := maps.Clone(topics)
	delete(out, topic)
	return out
}

// deleteTopic answers DELETE_TOPIC_IN_NAMESRV (216), which the official Go
// client's admin.DeleteTopic and mqadmin deleteTopic send to every
// nameserver after deleting the topic on its brokers: ext topic. A topic
// the nameserver does not route is answered SUCCESS too, with a remark
// saying so, as from Java: the brokers' registrations may have removed it
// already.
func (h remotingHandler) deleteTopic(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic := req.Ext("topic")
	if topic == "" {
		return remoting.ErrorResponse(req, remoting.ResInvalidParameter, "DELETE_TOPIC_IN_NAMESRV needs the ext field topic")
	}
	if !h.reg.DeleteTopic(topic) {
		return remoting.NewResponse(req, remoting.ResSuccess, "topic "+topic+" has no route in this name server: nothing to delete")
	}
	return remoting.NewResponse(req, remoting.ResSuccess, "")
}
