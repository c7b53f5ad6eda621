package client

import (
	"hash/fnv"
	"sync/atomic"
)

// QueueSelector picks the queue a send goes to. Select gets the topic, its
// writable queues (never empty) and the send's first message, and returns
// one of the queues. It must be safe for concurrent use.
//
// For a message without a ShardingKey the producer leaves out the queues of
// brokers that failed a send in the last 30 s, unless that would leave none.
// For a message with a ShardingKey it passes every writable queue, so a
// selector hashing the key keeps mapping it to the same queue.
type QueueSelector interface {
	Select(topic string, queues []Queue, msg *Message) Queue
}

// RoundRobin is the default QueueSelector: each send takes the next queue.
// The zero value is ready to use.
type RoundRobin struct {
	next atomic.Uint64
}

// Select returns the next queue in turn.
func (r *RoundRobin) Select(_ string, queues []Queue, _ *Message) Queue {
	return queues[(r.next.Add(1)-1)%uint64(len(queues))]
}

// ByShardingKey sends every message with one ShardingKey to one queue,
// which keeps their order: the queue is the FNV-1a hash of the key modulo
// the number of writable queues. That mapping changes when the number of
// queues does. Messages without a key go round-robin.
type ByShardingKey struct {
	rr RoundRobin
}

// Select returns the queue of msg.ShardingKey.
func (s *ByShardingKey) Select(topic string, queues []Queue, msg *Message) Queue {
	if msg.ShardingKey == "" {
		return s.rr.Select(topic, queues, msg)
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(msg.ShardingKey))
	return queues[h.Sum32()%uint32(len(queues))]
}

// SelectorFunc adapts a function to a QueueSelector.
type SelectorFunc func(topic string, queues []Queue, msg *Message) Queue

// Select calls f.
func (f SelectorFunc) Select(topic string, queues []Queue, msg *Message) Queue {
	return f(topic, queues, msg)
}
