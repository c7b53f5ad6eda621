package client

import (
	"fmt"
	"hash/fnv"
	"sync/atomic"
)

// QueueSelector picks the queue a send goes to. Select gets the topic, its
// writable queues (never empty) and the send's message (for a SendBatch,
// its first message with a ShardingKey, else its first), and returns one
// of the queues. It must be safe for concurrent use. A custom selector
// sees Message.ShardingKey and is responsible for honouring it.
//
// For a message without a ShardingKey the producer leaves out the queues of
// brokers that failed a send in the last 30 s, unless that would leave none.
// For a message with a ShardingKey it passes every writable queue, so a
// selector hashing the key keeps mapping it to the same queue.
type QueueSelector interface {
	Select(topic string, queues []Queue, msg *Message) Queue
}

// RoundRobin is a QueueSelector that sends each send to the next queue,
// whatever its ShardingKey. The zero value is ready to use. Chosen with
// WithQueueSelector, it refuses messages that have a ShardingKey (the send
// fails with ErrInvalidArgument), since it would spread one key over every
// queue and lose the key's order; the default selector, ByShardingKey, is
// round-robin for messages without a key.
type RoundRobin struct {
	next atomic.Uint64
}

// Select returns the next queue in turn.
func (r *RoundRobin) Select(_ string, queues []Queue, _ *Message) Queue {
	return queues[(r.next.Add(1)-1)%uint64(len(queues))]
}

// ByShardingKey is the default QueueSelector. It sends every message with
// one ShardingKey to one queue, which keeps their order: the queue is the
// FNV-1a hash of the key modulo the number of writable queues. That
// mapping changes when the number of queues does. Messages without a key
// go round-robin.
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

// keyRule is what the producer checks of ShardingKeys before a send, by
// its selector.
type keyRule uint8

const (
	keysCustom  keyRule = iota // a custom selector: its business
	keysHashed                 // ByShardingKey: a batch's keys must agree
	keysRefused                // RoundRobin: a key would be ignored
)

func keyRuleOf(s QueueSelector) keyRule {
	switch s.(type) {
	case *RoundRobin:
		return keysRefused
	case *ByShardingKey:
		return keysHashed
	}
	return keysCustom
}

// checkSharding refuses a send whose ShardingKeys the selector would not
// honour, rather than lose their order silently.
func (p *Producer) checkSharding(b *batch) error {
	if p.keys == keysCustom {
		return nil
	}
	key := ""
	for i, m := range b.msgs {
		switch {
		case m.ShardingKey == "":
		case p.keys == keysRefused:
			return fmt.Errorf("client: message %d has ShardingKey %q, but the producer's queue selector is RoundRobin "+
				"(WithQueueSelector), which ignores it and would spread the key over every queue, losing its order; "+
				"use the default selector (ByShardingKey) or clear the key: %w", i, m.ShardingKey, ErrInvalidArgument)
		case key == "":
			key = m.ShardingKey
		case m.ShardingKey != key:
			return fmt.Errorf("client: message %d has ShardingKey %q, another message of the batch %q: one SendBatch "+
				"goes to one queue, so the keys of its messages must agree (ByShardingKey): %w", i, m.ShardingKey, key, ErrInvalidArgument)
		}
	}
	return nil
}

// selectMsg is the message the queue selector gets for b: its first
// message with a ShardingKey, else its first.
func (b *batch) selectMsg() *Message {
	for _, m := range b.msgs {
		if m.ShardingKey != "" {
			return m
		}
	}
	return b.msgs[0]
}

// SelectorFunc adapts a function to a QueueSelector.
type SelectorFunc func(topic string, queues []Queue, msg *Message) Queue

// Select calls f.
func (f SelectorFunc) Select(topic string, queues []Queue, msg *Message) Queue {
	return f(topic, queues, msg)
}
