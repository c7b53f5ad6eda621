package broker

import (
	"fmt"

	"github.com/gantrymq/gantry/broker/metadata"
)

// The topic and group tables' records, as the front ends read and write
// them. They are plain data, the metadata package's own types.
type (
	TopicConfig            = metadata.TopicConfig
	SubscriptionGroup      = metadata.SubscriptionGroup
	RetryPolicy            = metadata.RetryPolicy
	ExponentialRetryPolicy = metadata.ExponentialRetryPolicy
	// DataVersion is a table's version: its timestamp and change counter.
	DataVersion = metadata.DataVersion
)

// Topic permissions (TopicConfig.Perm) and filter types
// (TopicConfig.TopicFilterType), RocketMQ's values.
const (
	PermWrite       = metadata.PermWrite
	PermRead        = metadata.PermRead
	FilterSingleTag = metadata.FilterSingleTag
	FilterMultiTag  = metadata.FilterMultiTag
)

// Retry policy types (RetryPolicy.Type).
const (
	RetryCustomized  = metadata.RetryCustomized
	RetryExponential = metadata.RetryExponential
)

// DefaultSubscriptionGroup returns RocketMQ's defaults for a new group.
func DefaultSubscriptionGroup(name string) SubscriptionGroup {
	return metadata.DefaultSubscriptionGroup(name)
}

// Group returns a consumer group's subscription config.
func (b *Broker) Group(name string) (SubscriptionGroup, bool) { return b.meta.Group(name) }

// Groups returns every consumer group's subscription config.
func (b *Broker) Groups() []SubscriptionGroup { return b.meta.Groups() }

// GroupsVersion returns the version of the subscription group table.
func (b *Broker) GroupsVersion() DataVersion { return b.meta.GroupsVersion() }

// TopicsVersion returns the version of the topic table.
func (b *Broker) TopicsVersion() DataVersion { return b.meta.TopicsVersion() }

// GroupTopic names a group's offsets in one topic.
type GroupTopic struct {
	Group, Topic string
}

// OffsetKeys returns the (group, topic) pairs with committed offsets: of
// group, or of every group when group is "".
func (b *Broker) OffsetKeys(group string) []GroupTopic {
	keys := b.meta.OffsetKeys(group, "")
	out := make([]GroupTopic, len(keys))
	for i, k := range keys {
		out[i] = GroupTopic{Group: k[0], Topic: k[1]}
	}
	return out
}

// SaveMetadata writes the topic and group tables and the offsets to disk
// now; they are otherwise saved every metadata interval and at Close.
func (b *Broker) SaveMetadata() error {
	if err := b.meta.Save(); err != nil {
		return fmt.Errorf("broker: save metadata: %w", err)
	}
	return nil
}
