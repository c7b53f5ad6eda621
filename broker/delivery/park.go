package delivery

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gantrymq/gantry/broker/brokererr"
	"github.com/gantrymq/gantry/message"
)

// Parking: a delayed message is not stored in its topic but in a parking
// topic, with its topic and queue saved in REAL_TOPIC and REAL_QID, until
// the scheduler (delay levels, schedule.go) or the timer (delivery times,
// timer.go) re-publishes it there.

// DelayProps are the delay properties of one message, as found (each value
// is meaningful only when its has flag is set). The broker's record path
// collects them with See while it reads a record's properties.
type DelayProps struct {
	level, deliverMS, delaySec          string
	hasLevel, hasDeliverMS, hasDelaySec bool
}

// See records the property k=v if it is a delay property.
func (d *DelayProps) See(k string, v []byte) {
	switch k {
	case message.PropDelay:
		d.level, d.hasLevel = string(v), true
	case message.PropTimerDeliverMS:
		d.deliverMS, d.hasDeliverMS = string(v), true
	case message.PropTimerDelaySec:
		d.delaySec, d.hasDelaySec = string(v), true
	}
}

// Delayed reports whether the message may need parking: it has a DELAY
// other than "0" or a timer property. A record that is not stays on
// SendRecords' fast path.
func (d *DelayProps) Delayed() bool {
	return (d.hasLevel && d.level != "0") || d.hasDeliverMS || d.hasDelaySec
}

// messageDelayProps finds the delay properties of p (the last of a repeated
// key wins, as in Properties.Get).
func messageDelayProps(p message.Properties) DelayProps {
	var d DelayProps
	for _, kv := range p {
		switch kv.Key {
		case message.PropDelay:
			d.level, d.hasLevel = kv.Value, true
		case message.PropTimerDeliverMS:
			d.deliverMS, d.hasDeliverMS = kv.Value, true
		case message.PropTimerDelaySec:
			d.delaySec, d.hasDelaySec = kv.Value, true
		}
	}
	return d
}

// parkKind is what becomes of a message on its way to the store.
type parkKind int

const (
	parkNone  parkKind = iota // stored as it is
	parkLevel                 // parked in ScheduleTopic, queue level-1
	parkTimer                 // parked in TimerTopic
	parkStrip                 // a delivery time already past: stored in its topic without the timer properties
)

// parkPlan says how a message is stored.
type parkPlan struct {
	kind  parkKind
	level int   // parkLevel: 1..len(MessageDelayLevel)
	at    int64 // parkTimer: delivery time, unix ms
}

// planPark decides how a message with delay properties d and SYSFLAG
// sysFlag is stored at now. A DELAY level above 0 wins over the timer
// properties, which the parked copy drops (as RocketMQ 5 does); a DELAY
// above the last level means the last. TIMER_DELAY_SEC wins over
// TIMER_DELIVER_MS. Half (prepared) and rolled-back transactional messages
// are never parked: the commit is. Unparsable values and delivery times
// beyond TimerMaxDelay are ErrInvalidMessage naming the property.
func (d *Service) planPark(dp *DelayProps, sysFlag int32, now time.Time) (parkPlan, error) {
	if tx := sysFlag & message.TransactionMask; tx == message.TransactionPrepared || tx == message.TransactionRollback {
		return parkPlan{}, nil
	}
	levels := len(d.cfg.DelayLevels)
	if dp.hasLevel {
		n, err := strconv.Atoi(dp.level)
		if err != nil || n < 0 {
			return parkPlan{}, fmt.Errorf("%w: %s %q: want a delay level 0..%d (0: not delayed; larger: %d)",
				brokererr.ErrInvalidMessage, message.PropDelay, dp.level, levels, levels)
		}
		if n > 0 {
			return parkPlan{kind: parkLevel, level: min(n, levels)}, nil
		}
	}
	return d.planTimer(dp, now)
}

// planTimer is planPark for the timer properties.
func (d *Service) planTimer(dp *DelayProps, now time.Time) (parkPlan, error) {
	nowMS, maxDelay := now.UnixMilli(), d.cfg.TimerMaxDelay
	var at int64
	switch {
	case dp.hasDelaySec:
		sec, err := strconv.ParseInt(dp.delaySec, 10, 64)
		if err != nil {
			return parkPlan{}, fmt.Errorf("%w: %s %q: want whole seconds", brokererr.ErrInvalidMessage, message.PropTimerDelaySec, dp.delaySec)
		}
		if sec <= 0 {
			return parkPlan{kind: parkStrip}, nil
		}
		if sec > int64(maxDelay/time.Second) {
			return parkPlan{}, fmt.Errorf("%w: %s %d: beyond timerMaxDelay (%s)", brokererr.ErrInvalidMessage, message.PropTimerDelaySec, sec, maxDelay)
		}
		at = nowMS + sec*1000
	case dp.hasDeliverMS:
		ms, err := strconv.ParseInt(dp.deliverMS, 10, 64)
		if err != nil {
			return parkPlan{}, fmt.Errorf("%w: %s %q: want a unix time in milliseconds", brokererr.ErrInvalidMessage, message.PropTimerDeliverMS, dp.deliverMS)
		}
		at = ms
	default:
		return parkPlan{}, nil
	}
	switch {
	case at <= nowMS:
		return parkPlan{kind: parkStrip}, nil
	case at-nowMS > maxDelay.Milliseconds():
		return parkPlan{}, fmt.Errorf("%w: %s %d is %s from now, beyond timerMaxDelay (%s)", brokererr.ErrInvalidMessage,
			message.PropTimerDeliverMS, at, time.Duration(at-nowMS)*time.Millisecond, maxDelay)
	}
	return parkPlan{kind: parkTimer, at: at}, nil
}

// parked returns the message to store for m under plan p: m itself when
// the plan changes nothing, else a copy (m is not modified). A parked copy
// carries REAL_TOPIC and REAL_QID (m's topic and queue, which must be
// picked already) and the clamped DELAY or the absolute TIMER_DELIVER_MS.
func parked(m *message.Message, p parkPlan) *message.Message {
	if p.kind == parkNone {
		return m
	}
	mm := *m
	mm.Properties = make(message.Properties, 0, len(m.Properties)+3)
	parkInto(&mm, m.Properties, p)
	return &mm
}

// parkInto turns mm, a message with properties props, into its parked
// form under plan p (not parkNone), filling mm.Properties from its start:
// it may be props itself (parking a message the caller owns, in place),
// since properties are only dropped before any is added.
func parkInto(mm *message.Message, props message.Properties, p parkPlan) {
	topic, queue := mm.Topic, mm.QueueID
	out := mm.Properties[:0]
	if p.kind == parkStrip {
		for _, kv := range props {
			if kv.Key != message.PropTimerDeliverMS && kv.Key != message.PropTimerDelaySec {
				out = append(out, kv)
			}
		}
		mm.Properties = out
		return
	}
	for _, kv := range props {
		if !isParkingProperty(kv.Key) {
			out = append(out, kv)
		}
	}
	out = append(out, message.Property{Key: message.PropRealTopic, Value: topic},
		message.Property{Key: message.PropRealQueueID, Value: strconv.Itoa(int(queue))})
	switch p.kind {
	case parkLevel:
		out = append(out, message.Property{Key: message.PropDelay, Value: strconv.Itoa(p.level)})
		mm.Topic, mm.QueueID = ScheduleTopic, int32(p.level-1)
	case parkTimer:
		out = append(out, message.Property{Key: message.PropTimerDeliverMS, Value: strconv.FormatInt(p.at, 10)})
		mm.Topic, mm.QueueID = TimerTopic, 0
	}
	mm.Properties = out
}

// isParkingProperty reports whether key is one of the properties parking
// sets and delivery removes.
func isParkingProperty(key string) bool {
	switch key {
	case message.PropDelay, message.PropTimerDeliverMS, message.PropTimerDelaySec,
		message.PropRealTopic, message.PropRealQueueID, message.PropRetryRefs:
		return true
	}
	return false
}

// Park returns what to store for m, whose queue is picked, at now: m
// itself when it is not delayed, else its parked form (planPark, parked).
// When owned, m is the caller's to change and is parked in place.
// Unparsable delay properties and delivery times beyond TimerMaxDelay are
// ErrInvalidMessage naming the property.
func (d *Service) Park(m *message.Message, now time.Time, owned bool) (*message.Message, error) {
	dp := messageDelayProps(m.Properties)
	if !dp.hasLevel && !dp.hasDeliverMS && !dp.hasDelaySec {
		return m, nil
	}
	p, err := d.planPark(&dp, m.SysFlag, now)
	if err != nil {
		return nil, err
	}
	if owned && p.kind != parkNone {
		parkInto(m, m.Properties, p)
		return m, nil
	}
	return parked(m, p), nil
}

// unparked decodes a parked record and returns the message to deliver: a
// new message for REAL_TOPIC and REAL_QID with the parked one's body,
// flag, SYSFLAG, born time and host, reconsume times and properties but
// the parking ones (DELAY, REAL_TOPIC, REAL_QID, TIMER_DELIVER_MS,
// TIMER_DELAY_SEC). A group's retry or dead-letter topic deleted meanwhile
// is created again; another missing topic is an error (the message is
// dropped). A REAL_QID no longer among the topic's write queues is replaced
// by the broker's pick.
func (d *Service) unparked(rec []byte) (*message.Message, error) {
	m, _, err := message.Decode(rec)
	if err != nil {
		return nil, err
	}
	topic, _ := m.Properties.Get(message.PropRealTopic)
	qs, _ := m.Properties.Get(message.PropRealQueueID)
	qid, err := strconv.ParseInt(qs, 10, 32)
	if topic == "" || err != nil {
		return nil, fmt.Errorf("broker: parked message %s has REAL_TOPIC %q, REAL_QID %q", m.UniqKey(), topic, qs)
	}
	if d.store.TopicDeletedAt(topic, message.PhysicalOffsetOf(rec)) {
		return nil, fmt.Errorf("%w: %q was deleted after message %s was parked", brokererr.ErrTopicNotFound, topic, m.UniqKey())
	}
	tc, ok := d.meta.Topic(topic)
	switch {
	case !ok && IsGroupTopic(topic):
		if tc, err = d.topics.EnsureGroupTopic(topic); err != nil {
			return nil, err
		}
	case !ok:
		return nil, fmt.Errorf("%w: %q, the topic of parked message %s", brokererr.ErrTopicNotFound, topic, m.UniqKey())
	}
	if qid < 0 || qid >= int64(tc.WriteQueueNums) {
		qid = int64(d.topics.NextQueue(tc))
	}
	props := m.Properties[:0]
	for _, kv := range m.Properties {
		if !isParkingProperty(kv.Key) && kv.Key != message.PropCRC {
			props = append(props, kv)
		}
	}
	return &message.Message{Topic: topic, QueueID: int32(qid), Flag: m.Flag, SysFlag: m.SysFlag,
		BornTimestamp: m.BornTimestamp, BornHost: m.BornHost, ReconsumeTimes: m.ReconsumeTimes,
		Body: m.Body, Properties: props}, nil
}
