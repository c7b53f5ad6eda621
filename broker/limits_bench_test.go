package broker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/message"
)

// BenchmarkPull32 pulls 32 messages of 1 KiB at a time from a queue of a
// plain topic, and of a topic with a default TTL none has reached: what
// the limits cost a pull.
func BenchmarkPull32(b *testing.B) {
	for _, tc := range []struct {
		name  string
		attrs map[string]string
	}{
		{"plain", nil},
		{"ttl", map[string]string{"ttl.default.ms": "3600000"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := testConfig(&testing.T{})
			cfg.StorePathRootDir = b.TempDir()
			bk, err := broker.Open(b.Context(), cfg)
			require.NoError(b, err)
			defer bk.Close(b.Context())
			require.NoError(b, bk.CreateOrUpdateTopic(broker.TopicConfig{TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1,
				Perm: broker.PermRead | broker.PermWrite, Attributes: tc.attrs}))
			body := []byte(strings.Repeat("x", 1024))
			const n = 1024
			for i := 0; i < n; i += 32 {
				msgs := make([]*message.Message, 32)
				for j := range msgs {
					msgs[j] = &message.Message{Topic: "T", Body: body, BornTimestamp: time.Now().UnixMilli(),
						Properties: message.Properties{{Key: message.PropTags, Value: "a"}, {Key: message.PropKeys, Value: "k"}}}
				}
				_, err := bk.Send(b.Context(), "T", msgs)
				require.NoError(b, err)
			}
			for {
				if _, maxOff := bk.Store().QueueOffsets("T", 0); maxOff == n {
					break
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				res, err := bk.Pull(b.Context(), broker.PullRequest{Topic: "T", Offset: int64(i*32) % n, MaxMsgs: 32})
				if err != nil || len(res.Records) != 32 {
					b.Fatalf("pull: %v, %d records", err, len(res.Records))
				}
				res.Release()
			}
		})
	}
}
