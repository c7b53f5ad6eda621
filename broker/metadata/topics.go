package metadata

import (
	"maps"
	"slices"
)

// Permission bits of TopicConfig.Perm, as in RocketMQ.
const (
	PermInherit = 1
	PermWrite   = 2
	PermRead    = 4
)

// Topic filter types.
const (
	FilterSingleTag = "SINGLE_TAG"
	FilterMultiTag  = "MULTI_TAG"
)

// MaxQueueNums bounds a topic's read and write queue counts.
const MaxQueueNums = 1024

// TopicConfig is one topic's entry in topics.json.
type TopicConfig struct {
	TopicName       string            `json:"topicName"`
	ReadQueueNums   int32             `json:"readQueueNums"`
	WriteQueueNums  int32             `json:"writeQueueNums"`
	Perm            int32             `json:"perm"`
	TopicFilterType string            `json:"topicFilterType"` // FilterSingleTag (default) or FilterMultiTag
	TopicSysFlag    int32             `json:"topicSysFlag"`
	Order           bool              `json:"order"`
	Attributes      map[string]string `json:"attributes"`
}

// clone returns tc with its own Attributes, never nil, and the default
// filter type filled in.
func (tc TopicConfig) clone() TopicConfig {
	a := maps.Clone(tc.Attributes)
	if a == nil {
		a = map[string]string{}
	}
	tc.Attributes = a
	if tc.TopicFilterType == "" {
		tc.TopicFilterType = FilterSingleTag
	}
	return tc
}

func (tc TopicConfig) validate() error {
	if err := ValidTopicName(tc.TopicName); err != nil {
		return err
	}
	for _, n := range []struct {
		what string
		v    int32
	}{{"readQueueNums", tc.ReadQueueNums}, {"writeQueueNums", tc.WriteQueueNums}} {
		if n.v < 1 || n.v > MaxQueueNums {
			return invalidf("%s %d of topic %q: want 1..%d", n.what, n.v, tc.TopicName, MaxQueueNums)
		}
	}
	if tc.Perm < 0 || tc.Perm > PermRead|PermWrite|PermInherit {
		return invalidf("perm %d of topic %q: want 0..7", tc.Perm, tc.TopicName)
	}
	if tc.TopicFilterType != FilterSingleTag && tc.TopicFilterType != FilterMultiTag {
		return invalidf("topicFilterType %q of topic %q: want %s or %s",
			tc.TopicFilterType, tc.TopicName, FilterSingleTag, FilterMultiTag)
	}
	return nil
}

// ValidTopicName reports whether name is a legal topic name:
// ^[a-zA-Z0-9_%-]{1,127}$.
func ValidTopicName(name string) error { return validName("topic", name) }

func validName(kind, name string) error {
	ok := len(name) >= 1 && len(name) <= 127
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '%' || c == '-'
	}
	if !ok {
		return invalidf("%s name %q: want 1 to 127 characters from [a-zA-Z0-9_%%-]", kind, name)
	}
	return nil
}

type topicsDoc struct {
	TopicConfigTable map[string]TopicConfig `json:"topicConfigTable"`
	DataVersion      DataVersion            `json:"dataVersion"`
}

func validateTopics(d *topicsDoc) error {
	if d.TopicConfigTable == nil {
		return invalidf("file: no topicConfigTable")
	}
	for name, tc := range d.TopicConfigTable {
		if name != tc.TopicName {
			return invalidf("topic entry %q: its topicName is %q", name, tc.TopicName)
		}
		tc = tc.clone()
		if err := tc.validate(); err != nil {
			return err
		}
		d.TopicConfigTable[name] = tc
	}
	return nil
}

// Topic returns the named topic's configuration.
func (m *Metadata) Topic(name string) (tc TopicConfig, ok bool) {
	m.topics.read(func(d *topicsDoc) { tc, ok = d.TopicConfigTable[name] })
	if ok {
		tc = tc.clone()
	}
	return tc, ok
}

// TopicShared is Topic without the copy of the attributes, for the paths
// that look a topic up for every send: the returned Attributes map (nil
// when there are none) is shared and must not be modified.
func (m *Metadata) TopicShared(name string) (tc TopicConfig, ok bool) {
	m.topics.read(func(d *topicsDoc) { tc, ok = d.TopicConfigTable[name] })
	if ok && tc.TopicFilterType == "" {
		tc.TopicFilterType = FilterSingleTag
	}
	return tc, ok
}

// Topics returns every topic's configuration, sorted by name.
func (m *Metadata) Topics() []TopicConfig {
	var out []TopicConfig
	m.topics.read(func(d *topicsDoc) {
		out = make([]TopicConfig, 0, len(d.TopicConfigTable))
		for _, name := range slices.Sorted(maps.Keys(d.TopicConfigTable)) {
			out = append(out, d.TopicConfigTable[name].clone())
		}
	})
	return out
}

// TopicsVersion returns the topic table's data version, which the broker
// reports to nameservers.
func (m *Metadata) TopicsVersion() (v DataVersion) {
	m.topics.read(func(d *topicsDoc) { v = d.DataVersion })
	return v
}

// PutTopic creates or replaces a topic. An empty TopicFilterType means
// FilterSingleTag.
func (m *Metadata) PutTopic(tc TopicConfig) error { return m.PutTopics([]TopicConfig{tc}) }

// PutTopics creates or replaces topics in one change of the table (one
// data version, one write at the next save): all of them, or none if one
// is invalid.
func (m *Metadata) PutTopics(tcs []TopicConfig) error {
	clones := make([]TopicConfig, len(tcs))
	for i, tc := range tcs {
		clones[i] = tc.clone()
		if err := clones[i].validate(); err != nil {
			return err
		}
	}
	if len(clones) == 0 {
		return nil
	}
	now := m.cfg.Now()
	m.topics.update(func(d *topicsDoc) bool {
		for _, tc := range clones {
			d.TopicConfigTable[tc.TopicName] = tc
		}
		d.DataVersion.next(now)
		return true
	})
	return nil
}

// DeleteTopic removes a topic and reports whether it existed.
func (m *Metadata) DeleteTopic(name string) (ok bool) {
	now := m.cfg.Now()
	m.topics.update(func(d *topicsDoc) bool {
		if _, ok = d.TopicConfigTable[name]; ok {
			delete(d.TopicConfigTable, name)
			d.DataVersion.next(now)
		}
		return ok
	})
	return ok
}
