package broker

import "github.com/gantrymq/gantry/message"

// QueueOffsets returns a queue's first kept offset and its next offset to
// be written; both 0 for a queue that does not exist.
func (b *Broker) QueueOffsets(topic string, queueID int32) (minOff, maxOff int64) {
	return b.store.QueueOffsets(topic, queueID)
}

// OffsetAtTime returns the offset of a queue's first message stored at or
// after ts (unix ms), or the queue's max offset if there is none.
func (b *Broker) OffsetAtTime(topic string, queueID int32, ts int64) (int64, error) {
	return b.store.OffsetAtTime(topic, queueID, ts)
}

// MessageByQueueOffset returns the message at a queue offset.
func (b *Broker) MessageByQueueOffset(topic string, queueID int32, offset int64) (*message.Message, error) {
	return b.store.MessageByQueueOffset(topic, queueID, offset)
}

// DispatchedOffset returns the commit-log offset up to which stored
// records are in their consume queues and the index.
func (b *Broker) DispatchedOffset() int64 { return b.store.DispatchedOffset() }

// LogOffsets returns the commit log's first offset still stored and its
// readable end.
func (b *Broker) LogOffsets() (minOff, maxOff int64) {
	cl := b.store.CommitLog()
	return cl.MinOffset(), cl.MaxOffset()
}
