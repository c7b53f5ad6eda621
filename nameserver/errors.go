package nameserver

import (
	"errors"
	"fmt"
)

var (
	// ErrTopicNotFound means no live broker serves the topic (RocketMQ's
	// TOPIC_NOT_EXIST, 17, on a route query).
	ErrTopicNotFound = errors.New("nameserver: topic not found")
	// ErrInvalid means a registration breaks a rule; see InvalidError.
	ErrInvalid = errors.New("nameserver: invalid registration")
	// ErrConflict means a valid registration contradicts live state: its
	// broker name is already registered in another cluster.
	ErrConflict = errors.New("nameserver: conflicting registration")
)

// TopicNotFoundError is Route's answer for a topic no live broker serves.
// It unwraps to ErrTopicNotFound.
type TopicNotFoundError struct {
	Topic string
}

func (e *TopicNotFoundError) Error() string {
	return fmt.Sprintf("nameserver: no route for topic %q", e.Topic)
}

func (e *TopicNotFoundError) Unwrap() error { return ErrTopicNotFound }

// InvalidError names one field of a Registration that breaks a rule:
// Field is a Go expression on the Registration, such as "BrokerName" or
// `Topics["T"].Perm`. It unwraps to ErrInvalid. Register joins one per
// problem (errors.Join), so use errors.As to get the first.
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("nameserver: invalid registration: %s %s", e.Field, e.Reason)
}

func (e *InvalidError) Unwrap() error { return ErrInvalid }
