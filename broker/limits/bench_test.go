package limits

import (
	"strings"
	"testing"
	"time"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/message"
)

// BenchmarkAfterRead is what the limits add to a pull of 32 records of
// 1 KiB: nothing to check (a topic without attributes, records without
// TTL_MS), and a topic with a default TTL none has reached.
func BenchmarkAfterRead(b *testing.B) {
	now := time.Now()
	m := &message.Message{Topic: "T", Body: []byte(strings.Repeat("x", 1024)), BornTimestamp: now.UnixMilli(), StoreTimestamp: now.UnixMilli(),
		Properties: message.Properties{{Key: message.PropTags, Value: "a"}, {Key: message.PropKeys, Value: "k"}, {Key: message.PropUniqKey, Value: "0A00000100002A9F0000000000000001"}}}
	rec := sealed(b, m)
	for _, tc := range []struct {
		name   string
		policy Policy
	}{
		{"plain", Policy{}},
		{"ttl", Policy{DefaultTTL: time.Hour}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := &Service{cfg: Config{Now: func() time.Time { return now }}, topics: map[string]*topicState{}}
			pt := &policyTable{byTopic: map[string]topicPolicy{}}
			if !tc.policy.IsZero() {
				pt.byTopic["T"] = topicPolicy{Policy: tc.policy, queues: 1}
			}
			s.policies.Store(pt)
			recs := make([]commitlog.Region, 32)
			b.ReportAllocs()
			for b.Loop() {
				for i := range recs {
					recs[i] = commitlog.Region{B: rec}
				}
				if kept := s.AfterRead("T", 0, recs); len(kept) != 32 {
					b.Fatalf("%d kept", len(kept))
				}
			}
		})
	}
}
