package limits

import (
	"bytes"
	"fmt"
	"time"

	"github.com/gantrymq/gantry/broker/brokererr"
	"github.com/gantrymq/gantry/message"
)

// PropTTL is the message property a producer sets to give its message a
// time to live: whole milliseconds, 1 to MaxSpan, counted from the send
// (see SentAt). RocketMQ's own "TTL" property (request-reply timeouts,
// seconds from the Go client and milliseconds from Java) is not read.
const PropTTL = message.PropTTLMs

// ttlKey is how PropTTL starts in encoded properties: a cheap test for
// records without it.
var ttlKey = []byte(PropTTL + "\x01")

// properties returns the encoded properties of a record's view: the last
// PROPERTIESLEN bytes of the record.
func properties(v message.View) []byte {
	b := v.Bytes()
	return b[len(b)-v.PropertiesLen():]
}

// mayHaveTTL reports whether a record's properties may hold TTL_MS (one
// search of the properties, whatever the body's size).
func mayHaveTTL(rec []byte) bool {
	v, err := message.NewView(rec)
	return err == nil && bytes.Contains(properties(v), ttlKey)
}

// ParseTTL parses a TTL_MS value. The error names the property and wraps
// brokererr.ErrInvalidMessage.
func ParseTTL(v []byte) (time.Duration, error) {
	n, ok := wholeIn(string(v), 1, MaxSpan.Milliseconds())
	if !ok {
		return 0, fmt.Errorf("%w: property %s=%q: want a whole number of milliseconds from 1 to %d",
			brokererr.ErrInvalidMessage, PropTTL, v, MaxSpan.Milliseconds())
	}
	return time.Duration(n) * time.Millisecond, nil
}

// SentAt is the unix-ms time a record's TTL counts from: its born time
// (the producer's clock when it sent it, kept through delays, retries and
// dead-letter resends), or its store time when that is earlier or the born
// time is unset. So a TTL covers the time a message waits delayed or
// between retries too, and no producer clock running ahead extends it.
func SentAt(rec []byte) int64 {
	store := message.StoreTimestampOf(rec)
	if born := message.BornTimestampOf(rec); born > 0 && born < store {
		return born
	}
	return store
}

// recordTTL reads a record's TTL_MS and, when wantOrigin, its RETRY_TOPIC
// (the topic a retry was first sent to). A missing or malformed TTL_MS is
// 0: a record the broker stored without checking it (an older broker, a
// replica) is never dropped for it. ok is false for a record that does not
// parse.
func recordTTL(rec []byte, wantOrigin bool) (ttl time.Duration, origin []byte, ok bool) {
	v, err := message.NewView(rec)
	if err != nil {
		return 0, nil, false
	}
	if !wantOrigin && !bytes.Contains(properties(v), ttlKey) {
		return 0, nil, true
	}
	var raw []byte
	for k, val := range v.All() {
		switch string(k) {
		case PropTTL:
			raw = val
		case message.PropRetryTopic:
			origin = val
		}
	}
	if raw != nil {
		ttl, _ = ParseTTL(raw)
	}
	return ttl, origin, true
}

// expiresAt returns the unix-ms time a record with ttl (its own, else its
// topic's default) expires, or 0 when it does not.
func expiresAt(rec []byte, ttl time.Duration) int64 {
	if ttl <= 0 {
		return 0
	}
	return SentAt(rec) + ttl.Milliseconds()
}
