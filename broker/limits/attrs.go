package limits

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gantrymq/gantry/broker/brokererr"
)

// Topic attribute keys (docs/BROKER.md, "Retention, limits and TTL"), set
// with updateTopic's "+key=value" (mqadmin, gantry admin) or
// TopicConfig.Attributes.
const (
	// AttrRetentionHours and AttrRetentionMs are how long the topic's
	// messages stay readable, in place of fileReservedTime: whole hours
	// or milliseconds; one of the two.
	AttrRetentionHours = "retention.hours"
	AttrRetentionMs    = "retention.ms"
	// AttrMaxBacklog bounds each queue's backlog, in messages.
	AttrMaxBacklog = "queue.max.backlog"
	// AttrBacklogPolicy says what a full queue does: PolicyDropOldest
	// (default) or PolicyRefuse.
	AttrBacklogPolicy = "queue.max.policy"
	// AttrDefaultTTL is the time to live, in milliseconds, of the topic's
	// messages sent without a TTL_MS property.
	AttrDefaultTTL = "ttl.default.ms"
)

// Values of AttrBacklogPolicy.
const (
	PolicyDropOldest = "drop-oldest"
	PolicyRefuse     = "refuse"
)

// MaxSpan bounds every time span (retention, TTL): 100 years, far from
// overflowing unix-millisecond arithmetic.
const MaxSpan = 100 * 365 * 24 * time.Hour

// ownedPrefixes are the attribute namespaces this package owns: a key in
// one of them that it does not know is refused. Other keys belong to other
// parts of the broker.
var ownedPrefixes = []string{"retention.", "queue.max.", "ttl."}

var knownKeys = []string{AttrRetentionHours, AttrRetentionMs, AttrMaxBacklog, AttrBacklogPolicy, AttrDefaultTTL}

// Policy is what a topic's attributes ask of its queues. The zero value
// asks nothing: the broker's fileReservedTime, no backlog limit, no
// default TTL.
type Policy struct {
	// Retention, if set, replaces fileReservedTime for the topic's
	// messages: older ones are no longer read.
	Retention time.Duration
	// MaxBacklog, if set, bounds each queue's backlog (messages not yet
	// consumed by every group with an offset in the queue).
	MaxBacklog int64
	// Refuse: a full queue refuses new sends; otherwise its oldest
	// messages are dropped.
	Refuse bool
	// DefaultTTL, if set, is the time to live of messages without TTL_MS.
	DefaultTTL time.Duration
}

// IsZero reports whether p asks nothing.
func (p Policy) IsZero() bool { return p == Policy{} }

// BacklogPolicy names what a full queue does, "" without a backlog limit.
func (p Policy) BacklogPolicy() string {
	switch {
	case p.MaxBacklog == 0:
		return ""
	case p.Refuse:
		return PolicyRefuse
	}
	return PolicyDropOldest
}

// AttrError is a topic attribute this package refuses. It unwraps to
// brokererr.ErrInvalidArgument.
type AttrError struct {
	Key, Value string
	Want       string
}

func (e *AttrError) Error() string {
	return fmt.Sprintf("topic attribute %s=%q: %s", e.Key, e.Value, e.Want)
}

// Unwrap returns brokererr.ErrInvalidArgument.
func (e *AttrError) Unwrap() error { return brokererr.ErrInvalidArgument }

// Owns reports whether key is in one of this package's namespaces
// (retention.*, queue.max.*, ttl.*).
func Owns(key string) bool {
	for _, p := range ownedPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// ParsePolicy reads the attributes of this package's namespaces and
// ignores the others. Every bad one is reported (joined *AttrErrors, in
// key order); the policy returned holds the good ones.
func ParsePolicy(attrs map[string]string) (Policy, error) {
	var p Policy
	var errs []error
	bad := func(k, want string) { errs = append(errs, &AttrError{Key: k, Value: attrs[k], Want: want}) }
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		if !Owns(k) {
			continue
		}
		v := attrs[k]
		switch k {
		case AttrRetentionHours:
			if n, ok := wholeIn(v, 1, int64(MaxSpan/time.Hour)); ok {
				p.Retention = time.Duration(n) * time.Hour
			} else {
				bad(k, fmt.Sprintf("want a whole number of hours from 1 to %d", MaxSpan/time.Hour))
			}
		case AttrRetentionMs, AttrDefaultTTL:
			n, ok := wholeIn(v, 1, MaxSpan.Milliseconds())
			if !ok {
				bad(k, fmt.Sprintf("want a whole number of milliseconds from 1 to %d", MaxSpan.Milliseconds()))
				continue
			}
			if k == AttrDefaultTTL {
				p.DefaultTTL = time.Duration(n) * time.Millisecond
			} else {
				p.Retention = time.Duration(n) * time.Millisecond
			}
		case AttrMaxBacklog:
			if n, ok := wholeIn(v, 1, 1<<62); ok {
				p.MaxBacklog = n
			} else {
				bad(k, "want a whole number of messages from 1")
			}
		case AttrBacklogPolicy:
			switch v {
			case PolicyDropOldest:
			case PolicyRefuse:
				p.Refuse = true
			default:
				bad(k, fmt.Sprintf("want %s or %s", PolicyDropOldest, PolicyRefuse))
			}
		default:
			bad(k, "unknown attribute; known: "+strings.Join(knownKeys, ", "))
		}
	}
	if _, h := attrs[AttrRetentionHours]; h {
		if _, ms := attrs[AttrRetentionMs]; ms {
			bad(AttrRetentionMs, "set either "+AttrRetentionHours+" or "+AttrRetentionMs+", not both")
		}
	}
	if _, pol := attrs[AttrBacklogPolicy]; pol {
		if _, lim := attrs[AttrMaxBacklog]; !lim {
			bad(AttrBacklogPolicy, "needs "+AttrMaxBacklog)
		}
	}
	return p, errors.Join(errs...)
}

// wholeIn parses a decimal whole number (digits only) within [lo, hi].
func wholeIn(s string, lo, hi int64) (int64, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= lo && n <= hi
}
