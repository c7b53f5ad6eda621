package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/internal/writemode"
	"github.com/gantrymq/gantry/message"
)

// Get returns the same records however the log writes: when the log is
// written with pwrite (commitlog.CopyReads) it copies runs of records that lie close
// together with pread (commitlog.ReadCopy) and reads the rest, and runs
// that cross a segment's end, from the mapping.
func TestGetReadsTheSameInEveryWriteMode(t *testing.T) {
	type key struct {
		topic string
		queue int32
	}
	read := func(t *testing.T, s *store.Store, k key, batch int, filter store.Filter) []string {
		var got []string
		for off := int64(0); ; {
			g, err := s.Get(k.topic, k.queue, off, batch, 1<<20, filter)
			require.NoError(t, err)
			switch g.Status {
			case store.OffsetOverflowOne:
				return got
			case store.Found, store.NoMatchedMessage:
			default:
				t.Fatalf("%v at %d", g.Status, off)
			}
			for _, rec := range g.Records {
				m, _, err := message.Decode(rec.B)
				require.NoError(t, err)
				got = append(got, fmt.Sprintf("%.20s/%d/%s", m.Body, len(m.Body), m.Tags()))
			}
			g.Release()
			off = g.NextOffset
		}
	}
	var want map[string][]string
	for _, mode := range []writemode.Mode{writemode.Mapped, writemode.Direct, writemode.Hybrid} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := testConfig(t, t.TempDir(), nil)
			cfg.Log.DirectBytes = 2000
			s, err := store.Open(writemode.With(t.Context(), mode), cfg)
			require.NoError(t, err)
			defer s.Close()
			putAll(t, s, 0, 200) // queues interleaved in the log, batches of up to 5
			for b := range 12 {  // then runs of one queue: records close together
				batch := make([]*message.Message, 40)
				for j := range batch {
					m := msg(1000 + b*40 + j)
					m.Topic, m.QueueID = "Orders", int32(b%2)
					batch[j] = m
				}
				_, err := putMsgs(t.Context(), s, batch)
				require.NoError(t, err)
				big := msg(2000 + b) // another queue's record too big to read along
				big.Topic, big.QueueID, big.Body = "Audit", 3, make([]byte, 20<<10)
				_, err = putMsgs(t.Context(), s, []*message.Message{big})
				require.NoError(t, err)
			}
			waitDispatched(t, s)
			require.Positive(t, s.CommitLog().Stats().SegmentsRolled, "runs cross segments' ends")
			tagB := message.TagsCode("TagB")
			got := map[string][]string{}
			for _, topic := range topics {
				for q := range int32(4) {
					k := key{topic, q}
					for _, batch := range []int{1, 7, 32, 500} {
						name := fmt.Sprintf("%s/%d batch %d", topic, q, batch)
						got[name] = read(t, s, k, batch, nil)
						got[name+" TagB"] = read(t, s, k, batch, func(c int64) bool { return c == tagB })
						assert.Equal(t, got[fmt.Sprintf("%s/%d batch 1", topic, q)], got[name], name)
					}
				}
			}
			require.NotEmpty(t, got["Orders/0 batch 32"])
			if want == nil {
				want = got
				return
			}
			assert.Equal(t, want, got)
		})
	}
}
