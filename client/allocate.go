package client

import (
	"slices"
	"strings"
)

// AllocateStrategy decides which of a topic's queues a member of a
// consumer group consumes. It is called with the member's client id, every
// live member's id (sorted) and every readable queue of the topic (sorted by
// broker name, then id), and must be deterministic: every member computes
// its share from the same lists, and the shares must not overlap.
type AllocateStrategy interface {
	Name() string
	Allocate(clientID string, clients []string, queues []Queue) []Queue
}

var (
	// AllocateAveragely gives each member a run of consecutive queues;
	// the first members take one more when the queues do not divide evenly
	// (RocketMQ's AllocateMessageQueueAveragely, the default).
	AllocateAveragely AllocateStrategy = averagely{}
	// AllocateAveragelyByCircle deals the queues out one by one, like
	// cards (RocketMQ's AllocateMessageQueueAveragelyByCircle).
	AllocateAveragelyByCircle AllocateStrategy = averagelyByCircle{}
)

type averagely struct{}

func (averagely) Name() string { return "AVG" }

func (averagely) Allocate(clientID string, clients []string, queues []Queue) []Queue {
	i := slices.Index(clients, clientID)
	if i < 0 || len(queues) == 0 {
		return nil
	}
	n, q := len(clients), len(queues)
	mod := q % n
	var count int
	switch {
	case q <= n:
		count = 1
	case mod > 0 && i < mod:
		count = q/n + 1
	default:
		count = q / n
	}
	start := i*count + mod
	if mod > 0 && i < mod {
		start = i * count
	}
	if start >= q {
		return nil
	}
	return slices.Clone(queues[start:min(start+count, q)])
}

type averagelyByCircle struct{}

func (averagelyByCircle) Name() string { return "AVG_BY_CIRCLE" }

func (averagelyByCircle) Allocate(clientID string, clients []string, queues []Queue) []Queue {
	i := slices.Index(clients, clientID)
	if i < 0 {
		return nil
	}
	var out []Queue
	for j := i; j < len(queues); j += len(clients) {
		out = append(out, queues[j])
	}
	return out
}

// sortQueues sorts queues by topic, broker name and id, the order every
// member allocates from.
func sortQueues(qs []Queue) { slices.SortFunc(qs, compareQueues) }

func compareQueues(a, b Queue) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	if c := strings.Compare(a.BrokerName, b.BrokerName); c != 0 {
		return c
	}
	return int(a.ID) - int(b.ID)
}

// splitTags splits a tag expression on "||", trimming spaces.
func splitTags(expr string) []string {
	parts := strings.Split(expr, "||")
	for i, t := range parts {
		parts[i] = strings.TrimSpace(t)
	}
	return parts
}
