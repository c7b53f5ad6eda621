package message

import (
	"fmt"
	"strings"
)

// Well-known property keys (Java's MessageConst).
const (
	PropKeys                     = "KEYS"     // business keys separated by spaces; indexed
	PropTags                     = "TAGS"     // the tag; filtering and the consume-queue tag hash
	PropUniqKey                  = "UNIQ_KEY" // client message id; indexed
	PropWait                     = "WAIT"     // "false": do not wait for flush or replicas
	PropDelay                    = "DELAY"    // delay level 1..18
	PropTimerDeliverMS           = "TIMER_DELIVER_MS"
	PropTimerDelaySec            = "TIMER_DELAY_SEC"
	PropRealTopic                = "REAL_TOPIC" // original topic of a parked (delayed, half) message
	PropRealQueueID              = "REAL_QID"
	PropRetryTopic               = "RETRY_TOPIC" // original topic of a retry message
	PropOriginMessageID          = "ORIGIN_MESSAGE_ID"
	PropReconsumeTime            = "RECONSUME_TIME"
	PropMaxReconsumeTimes        = "MAX_RECONSUME_TIMES"
	PropConsumeStartTime         = "CONSUME_START_TIME"
	PropMinOffset                = "MIN_OFFSET"
	PropMaxOffset                = "MAX_OFFSET"
	PropTransactionPrepared      = "TRAN_MSG" // "true" marks a half message
	PropProducerGroup            = "PGROUP"
	PropTransactionID            = "__transactionId__"
	PropTransactionPreparedQueue = "TRAN_PREPARED_QUEUE_OFFSET"
	PropTransactionCheckTimes    = "TRANSACTION_CHECK_TIMES"
	PropCheckImmunityTimeSeconds = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	PropCluster                  = "CLUSTER"
	PropMsgRegion                = "MSG_REGION"
	PropTraceSwitch              = "TRACE_ON"
	PropCorrelationID            = "CORRELATION_ID"
	PropReplyToClient            = "REPLY_TO_CLIENT"
	PropMessageTTL               = "TTL"
	PropMessageType              = "MSG_TYPE" // "reply" for request-reply
	PropArriveTime               = "ARRIVE_TIME"
	PropShardingKey              = "__SHARDINGKEY" // Java's key; the Go client's SHARDING_KEY stays client side
	PropDLQOriginTopic           = "DLQ_ORIGIN_TOPIC"
	PropDLQOriginMessageID       = "DLQ_ORIGIN_MESSAGE_ID"
	PropDLQReason                = "DLQ_REASON"  // Gantry: why the consumer gave up, on a dead letter
	PropDLQResendTimes           = "DLQ_RESENDS" // Gantry: how many times a dead letter was resent
	// PropIdempotencyKey (Gantry) is a producer-chosen de-duplication key:
	// the broker de-duplicates sends by it instead of UNIQ_KEY, and
	// client.Idempotent consumers handle it once.
	PropIdempotencyKey = "IDEMPOTENCY_KEY"
	// PropRetryRefs (Gantry, reserved) marks a parked retry reference: a
	// record of the schedule topic whose body names the messages to retry
	// (their commit-log offsets) instead of carrying them. Its value is
	// how many it names. Parking drops it from any other message.
	PropRetryRefs = "GANTRY_RETRY_REFS"
	// PropTTLMs (Gantry) is a message's time to live in whole
	// milliseconds, counted from its send: once passed, the broker never
	// delivers it (docs/BROKER.md, "Retention, limits and TTL").
	PropTTLMs = "TTL_MS"
	// PropCRC is the key of the whole-record CRC tail (§4.2). It is reserved:
	// Append never writes a pair with this key from Message.Properties.
	PropCRC = "__CRC32#"
)

const (
	nameValueSeparator = 0x01
	propertySeparator  = 0x02
)

// Property is one key/value pair.
type Property struct {
	Key, Value string
}

// Properties is an ordered list of pairs, kept in the order they were
// stored. Decoding keeps duplicate keys; Get returns the value of the last
// one, as Java's and the Go client's decoders (which fill a map) do.
type Properties []Property

// Get returns the value of the last pair with key, and whether there is one.
func (p Properties) Get(key string) (string, bool) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i].Key == key {
			return p[i].Value, true
		}
	}
	return "", false
}

// Set makes key's value value: it replaces the value of the first pair with
// key and removes any later duplicates, or appends a pair if there is none.
func (p *Properties) Set(key, value string) {
	i := p.index(key)
	if i < 0 {
		*p = append(*p, Property{Key: key, Value: value})
		return
	}
	(*p)[i].Value = value
	if tail := (*p)[i+1:]; tail.index(key) >= 0 {
		tail = deleteKey(tail, key) // compacts in place, within *p
		*p = (*p)[:i+1+len(tail)]
	}
}

// Del removes every pair with key.
func (p *Properties) Del(key string) {
	if p.index(key) < 0 {
		return
	}
	*p = deleteKey(*p, key)
}

func (p Properties) index(key string) int {
	for i, kv := range p {
		if kv.Key == key {
			return i
		}
	}
	return -1
}

func deleteKey(p Properties, key string) Properties {
	out := p[:0]
	for _, kv := range p {
		if kv.Key != key {
			out = append(out, kv)
		}
	}
	clear(p[len(out):]) // drop references to the removed strings
	return out
}

func appendProperty(dst []byte, key, value string) []byte {
	dst = append(dst, key...)
	dst = append(dst, nameValueSeparator)
	dst = append(dst, value...)
	return append(dst, propertySeparator)
}

// AppendProperties appends p in the stored form, key 0x01 value 0x02 for
// every pair (including the last), in order. It writes every pair as is,
// __CRC32# included, and does not check for separator bytes in keys or
// values (Append does).
func AppendProperties(dst []byte, p Properties) []byte {
	for _, kv := range p {
		dst = appendProperty(dst, kv.Key, kv.Value)
	}
	return dst
}

// DecodeProperties parses a stored properties string the way the official
// Go client does (§3.3 and its corrections): split on 0x02, then each piece
// on 0x01; a piece with exactly one 0x01 is a pair, kept even when its key
// or value is empty; any other piece (no 0x01, more than one, or empty) is
// skipped, so a missing final 0x02 is tolerated and a value containing 0x01
// is lost, as it is for a Go consumer. Order and duplicates are kept. It
// returns nil for no pairs.
//
// Every byte string up to MaxPropertiesLen bytes decodes; the only error is
// ErrPropertiesTooLarge, for longer input, which no record can carry.
// DecodeProperties never panics. Keys and values share one allocated copy of
// b.
func DecodeProperties(b []byte) (Properties, error) {
	if len(b) > MaxPropertiesLen {
		return nil, fmt.Errorf("message: properties are %d bytes, at most %d: %w", len(b), MaxPropertiesLen, ErrPropertiesTooLarge)
	}
	if len(b) == 0 {
		return nil, nil
	}
	return parseProperties(nil, string(b)), nil
}

// parseProperties appends the pairs of s to dst; keys and values are
// substrings of s.
func parseProperties(dst Properties, s string) Properties {
	if len(s) == 0 {
		return dst
	}
	fresh := dst == nil
	if fresh {
		dst = make(Properties, 0, strings.Count(s, "\x02")+1)
	}
	for len(s) > 0 {
		piece, rest, _ := strings.Cut(s, "\x02")
		s = rest
		k, v, ok := strings.Cut(piece, "\x01")
		if !ok || strings.IndexByte(v, nameValueSeparator) >= 0 {
			continue
		}
		dst = append(dst, Property{Key: k, Value: v})
	}
	if fresh && len(dst) == 0 {
		return nil
	}
	return dst
}
