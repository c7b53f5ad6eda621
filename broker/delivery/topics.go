package delivery

import (
	"strings"

	"github.com/gantrymq/gantry/broker/store"
)

// The topics delivery writes to.
const (
	// ScheduleTopic holds messages with a delay level: queue L-1 holds
	// level L.
	ScheduleTopic = store.ScheduleTopic
	// TimerTopic holds messages with a delivery time, in one queue.
	TimerTopic = "rmq_sys_wheel_timer"
	// RetryTopicPrefix and DLQTopicPrefix start a group's retry and
	// dead-letter topics.
	RetryTopicPrefix = store.RetryTopicPrefix
	DLQTopicPrefix   = "%DLQ%"
	// DLQQueue is the queue of a dead-letter topic that holds the dead
	// letters: send-back writes queue 0, and the broker creates the topic
	// with one queue.
	DLQQueue int32 = 0
)

// pickQueue as a message's queue id asks the broker to pick it
// (broker.pickQueue).
const pickQueue = -1

// RetryTopic returns group's retry topic, %RETRY%<group>.
func RetryTopic(group string) string { return RetryTopicPrefix + group }

// DLQTopic returns group's dead-letter topic, %DLQ%<group>.
func DLQTopic(group string) string { return DLQTopicPrefix + group }

// IsGroupTopic reports whether name is a group's retry or dead-letter
// topic.
func IsGroupTopic(name string) bool {
	return strings.HasPrefix(name, RetryTopicPrefix) || strings.HasPrefix(name, DLQTopicPrefix)
}

// IsDLQTopic reports whether name is a group's dead-letter topic.
func IsDLQTopic(name string) bool { return strings.HasPrefix(name, DLQTopicPrefix) }
