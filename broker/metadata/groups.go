package metadata

import (
	"maps"
	"slices"
)

// SubscriptionGroup is one consumer group's entry in subscriptionGroup.json.
type SubscriptionGroup struct {
	GroupName                      string `json:"groupName"`
	ConsumeEnable                  bool   `json:"consumeEnable"`
	ConsumeFromMinEnable           bool   `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool   `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          bool   `json:"consumeMessageOrderly"`
	RetryQueueNums                 int32  `json:"retryQueueNums"`
	RetryMaxTimes                  int32  `json:"retryMaxTimes"` // -1: RocketMQ's "use the client's setting"
	BrokerID                       int64  `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64  `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool   `json:"notifyConsumerIdsChangedEnable"`
	// GroupRetryPolicy (RocketMQ 5's field) chooses the retry delays; nil
	// is the delay-level ladder.
	GroupRetryPolicy *RetryPolicy `json:"groupRetryPolicy,omitempty"`
}

// Retry policy types.
const (
	// RetryCustomized is the delay-level ladder: retry n waits level 2+n
	// of messageDelayLevel (10 s, 30 s, 1 m ... 2 h).
	RetryCustomized = "CUSTOMIZED"
	// RetryExponential waits Initial * Multiplier^(n-1), capped at Max,
	// spread by Jitter.
	RetryExponential = "EXPONENTIAL"
)

// RetryPolicy is a group's retry policy.
type RetryPolicy struct {
	Type        string                  `json:"type"`
	Exponential *ExponentialRetryPolicy `json:"exponentialRetryPolicy,omitempty"`
}

// ExponentialRetryPolicy is RocketMQ 5's exponential policy, in
// milliseconds, with Gantry's jitter.
type ExponentialRetryPolicy struct {
	Initial    int64 `json:"initial"`
	Max        int64 `json:"max"`
	Multiplier int64 `json:"multiplier"`
	// Jitter spreads each delay uniformly by up to this fraction either
	// way (0 to 1; 0.2: ±20 %).
	Jitter float64 `json:"jitter,omitempty"`
}

func (p *RetryPolicy) validate(group string) error {
	if p == nil {
		return nil
	}
	switch p.Type {
	case RetryCustomized:
		return nil
	case RetryExponential:
	default:
		return invalidf("groupRetryPolicy of group %q: type %q, want %s or %s", group, p.Type, RetryCustomized, RetryExponential)
	}
	e := p.Exponential
	switch {
	case e == nil:
		return invalidf("groupRetryPolicy of group %q: %s without exponentialRetryPolicy", group, RetryExponential)
	case e.Initial <= 0 || e.Max < e.Initial:
		return invalidf("groupRetryPolicy of group %q: initial %d ms and max %d ms: want 0 < initial <= max", group, e.Initial, e.Max)
	case e.Multiplier < 1:
		return invalidf("groupRetryPolicy of group %q: multiplier %d: want >= 1", group, e.Multiplier)
	case e.Jitter < 0 || e.Jitter > 1:
		return invalidf("groupRetryPolicy of group %q: jitter %g: want 0..1", group, e.Jitter)
	}
	return nil
}

// MaxRetryTimes bounds SubscriptionGroup.RetryMaxTimes.
const MaxRetryTimes = 1000

// DefaultSubscriptionGroup returns a group with RocketMQ's defaults.
func DefaultSubscriptionGroup(name string) SubscriptionGroup {
	return SubscriptionGroup{
		GroupName:                      name,
		ConsumeEnable:                  true,
		RetryQueueNums:                 1,
		RetryMaxTimes:                  16,
		WhichBrokerWhenConsumeSlowly:   1,
		NotifyConsumerIdsChangedEnable: true,
	}
}

// UnmarshalJSON fills fields missing from the JSON with the defaults, so
// that a hand-written entry does not silently disable consumption. Unknown
// fields are rejected, as in the rest of the file.
func (g *SubscriptionGroup) UnmarshalJSON(b []byte) error {
	type plain SubscriptionGroup // no methods: no recursion
	p := plain(DefaultSubscriptionGroup(""))
	if err := decodeStrict(b, &p); err != nil {
		return err
	}
	*g = SubscriptionGroup(p)
	return nil
}

func (g SubscriptionGroup) validate() error {
	if err := validName("group", g.GroupName); err != nil {
		return err
	}
	if g.RetryMaxTimes < -1 || g.RetryMaxTimes > MaxRetryTimes {
		return invalidf("retryMaxTimes %d of group %q: want -1..%d", g.RetryMaxTimes, g.GroupName, MaxRetryTimes)
	}
	if g.RetryQueueNums < 0 || g.RetryQueueNums > MaxQueueNums {
		return invalidf("retryQueueNums %d of group %q: want 0..%d", g.RetryQueueNums, g.GroupName, MaxQueueNums)
	}
	return g.GroupRetryPolicy.validate(g.GroupName)
}

type groupsDoc struct {
	SubscriptionGroupTable map[string]SubscriptionGroup `json:"subscriptionGroupTable"`
	DataVersion            DataVersion                  `json:"dataVersion"`
}

func validateGroups(d *groupsDoc) error {
	if d.SubscriptionGroupTable == nil {
		return invalidf("file: no subscriptionGroupTable")
	}
	for name, g := range d.SubscriptionGroupTable {
		if name != g.GroupName {
			return invalidf("group entry %q: its groupName is %q", name, g.GroupName)
		}
		if err := g.validate(); err != nil {
			return err
		}
	}
	return nil
}

// Group returns the named consumer group.
func (m *Metadata) Group(name string) (g SubscriptionGroup, ok bool) {
	m.groups.read(func(d *groupsDoc) { g, ok = d.SubscriptionGroupTable[name] })
	return g, ok
}

// Groups returns every consumer group, sorted by name.
func (m *Metadata) Groups() []SubscriptionGroup {
	var out []SubscriptionGroup
	m.groups.read(func(d *groupsDoc) {
		out = make([]SubscriptionGroup, 0, len(d.SubscriptionGroupTable))
		for _, name := range slices.Sorted(maps.Keys(d.SubscriptionGroupTable)) {
			out = append(out, d.SubscriptionGroupTable[name])
		}
	})
	return out
}

// GroupsVersion returns the subscription-group table's data version.
func (m *Metadata) GroupsVersion() (v DataVersion) {
	m.groups.read(func(d *groupsDoc) { v = d.DataVersion })
	return v
}

// PutGroup creates or replaces a consumer group. Start from
// DefaultSubscriptionGroup to get RocketMQ's defaults.
func (m *Metadata) PutGroup(g SubscriptionGroup) error { return m.PutGroups([]SubscriptionGroup{g}) }

// PutGroups creates or replaces consumer groups in one change of the
// table (one data version, one write at the next save): all of them, or
// none if one is invalid.
func (m *Metadata) PutGroups(gs []SubscriptionGroup) error {
	for _, g := range gs {
		if err := g.validate(); err != nil {
			return err
		}
	}
	if len(gs) == 0 {
		return nil
	}
	now := m.cfg.Now()
	m.groups.update(func(d *groupsDoc) bool {
		for _, g := range gs {
			d.SubscriptionGroupTable[g.GroupName] = g
		}
		d.DataVersion.next(now)
		return true
	})
	return nil
}

// GroupCount returns the number of consumer groups.
func (m *Metadata) GroupCount() (n int) {
	m.groups.read(func(d *groupsDoc) { n = len(d.SubscriptionGroupTable) })
	return n
}

// DeleteGroup removes a consumer group and reports whether it existed. Its
// committed offsets are kept; see DeleteOffsets.
func (m *Metadata) DeleteGroup(name string) (ok bool) {
	now := m.cfg.Now()
	m.groups.update(func(d *groupsDoc) bool {
		if _, ok = d.SubscriptionGroupTable[name]; ok {
			delete(d.SubscriptionGroupTable, name)
			d.DataVersion.next(now)
		}
		return ok
	})
	return ok
}
