package broker

import (
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

// BrokerStatus is a snapshot of the broker for admin tools and health.
type BrokerStatus struct {
	ClusterName    string
	BrokerName     string
	BrokerID       int64
	BrokerAddr     string // brokerIP1:listenPort (remoting)
	GRPCListenAddr string
	HTTPListenAddr string
	NamesrvAddr    []string
	Ready          bool

	MinLogOffset  int64 // first commit-log offset still stored
	MaxLogOffset  int64 // readable end of the commit log
	FlushedOffset int64 // durable end of the commit log
	Topics        int
	// Dispatch says how far the store's dispatcher is behind the commit
	// log, whether it is stalled (a full disk refusing a consume-queue or
	// index file) and whether sends are refused for it. Zero once Close
	// has started.
	Dispatch DispatchStatus

	MessagesPut int64 // messages stored by Send since Open
	MessagesGot int64 // messages returned by Pull since Open
	StartedAt   time.Time
	Uptime      time.Duration

	// Duplicates counts the messages of sends answered as duplicates since
	// Open (nothing stored). DedupRecent is how many keys of recent sends
	// the broker holds in memory until the store has indexed their records
	// (the keys of about the dispatcher's delay, whatever the window: the
	// index holds the others). Both 0 when DuplicationWindow is off.
	Duplicates  int64
	DedupRecent int

	// DelayPending holds, per delay level (index L-1), the messages parked
	// with that level and not yet delivered; TimerPending the messages
	// parked with a delivery time. Zero once Close has started.
	DelayPending []int64
	TimerPending int64
}

// DispatchStatus is how far the store's dispatcher is behind the commit
// log and whether it is stalled.
type DispatchStatus = store.DispatchStatus

// QueueStatus is one queue of a topic.
type QueueStatus struct {
	QueueID            int32
	MinOffset          int64
	MaxOffset          int64 // next offset to be written
	LastStoreTimestamp int64 // store time of the last message (unix ms), 0 if none
	// Backlog is the queue's messages not yet consumed by every group with
	// an offset in it (all its readable ones when none has); Expired and
	// Dropped count its messages found expired, and dropped from it when
	// full (queue.max.policy drop-oldest) before every group consumed
	// them (docs/BROKER.md, "Retention, limits and TTL").
	Backlog, Expired, Dropped int64
}

// Status returns a snapshot of the broker. The log offsets are zero once
// Close has started.
func (b *Broker) Status() BrokerStatus {
	c := b.cfg
	s := BrokerStatus{
		ClusterName:    c.BrokerClusterName,
		BrokerName:     c.BrokerName,
		BrokerID:       c.BrokerID,
		BrokerAddr:     net.JoinHostPort(c.BrokerIP1, strconv.Itoa(c.ListenPort)),
		GRPCListenAddr: c.GRPCListenAddr,
		HTTPListenAddr: c.HTTPListenAddr,
		NamesrvAddr:    slices.Clone(c.NamesrvAddr),
		Topics:         len(b.Topics()),
		MessagesPut:    b.msgsPut.Load(),
		MessagesGot:    b.msgsGot.Load(),
		StartedAt:      b.started,
		Uptime:         c.Now().Sub(b.started),
	}
	if b.dedup != nil {
		s.Duplicates, s.DedupRecent = b.dedup.Duplicates(), b.dedup.Recent()
	}
	if b.calls.enter() {
		defer b.calls.leave()
		s.Ready = true
		cl := b.store.CommitLog()
		s.MinLogOffset, s.MaxLogOffset, s.FlushedOffset = cl.MinOffset(), cl.MaxOffset(), cl.FlushedOffset()
		s.Dispatch = b.store.DispatchState()
		s.DelayPending, s.TimerPending = b.delivery.Pending()
	}
	return s
}

// TopicStatus returns the offsets of each queue of a topic (read or
// write), by queue id.
func (b *Broker) TopicStatus(topic string) ([]QueueStatus, error) {
	if !b.calls.enter() {
		return nil, ErrShuttingDown
	}
	defer b.calls.leave()
	tc, err := b.topic(topic)
	if err != nil {
		return nil, err
	}
	n := max(tc.ReadQueueNums, tc.WriteQueueNums)
	out := make([]QueueStatus, n)
	for q := range n {
		minOff, maxOff := b.store.QueueOffsets(topic, q)
		out[q] = QueueStatus{QueueID: q, MinOffset: minOff, MaxOffset: maxOff, LastStoreTimestamp: b.lastStoreTime(topic, q, maxOff)}
		b.queueLimits(topic, &out[q]) // limits.go
	}
	return out, nil
}

// lastStoreTime reads the store time of the message before maxOff, 0 if
// there is none (or its log data is gone).
func (b *Broker) lastStoreTime(topic string, q int32, maxOff int64) int64 {
	if maxOff == 0 {
		return 0
	}
	gr, err := b.store.Get(topic, q, maxOff-1, 1, 1, nil)
	if err != nil || len(gr.Records) == 0 {
		return 0
	}
	defer gr.Release()
	return message.StoreTimestampOf(gr.Records[0].B)
}
