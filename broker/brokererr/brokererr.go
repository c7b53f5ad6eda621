// Package brokererr holds the broker's sentinel errors, so that the
// broker's parts (broker, broker/delivery) wrap the same values and
// callers match them with errors.Is. Package broker re-exports each one
// (broker.ErrInvalidArgument is brokererr.ErrInvalidArgument); use those.
package brokererr

import "errors"

// Sentinel errors; their meaning is documented where package broker
// re-exports them (broker/errors.go).
var (
	ErrInvalidConfig     = errors.New("broker: invalid config")
	ErrInvalidTopic      = errors.New("broker: invalid topic name")
	ErrReservedTopic     = errors.New("broker: reserved system topic")
	ErrTopicNotFound     = errors.New("broker: topic not found")
	ErrNoPermission      = errors.New("broker: no permission")
	ErrInvalidMessage    = errors.New("broker: invalid message")
	ErrInvalidArgument   = errors.New("broker: invalid argument")
	ErrGroupNotFound     = errors.New("broker: consumer group not found")
	ErrTooManyGroups     = errors.New("broker: too many consumer groups")
	ErrNotRegistered     = errors.New("broker: consumer client not registered with the group")
	ErrQueueLocked       = errors.New("broker: queue locked by another client")
	ErrShuttingDown      = errors.New("broker: shutting down")
	ErrIndeterminate     = errors.New("broker: outcome indeterminate, the messages may be stored")
	ErrNotMaster         = errors.New("broker: not master")
	ErrNotEnoughReplicas = errors.New("broker: in-sync replicas not enough")
	ErrReplicaTimeout    = errors.New("broker: timed out waiting for the slaves")
	ErrSlaveReadDisabled = errors.New("broker: slave reads are disabled (slaveReadEnable=false)")
)
