package broker_test

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/message"
)

// BenchmarkSendBackBatch hands back 1 KiB messages (with a tag, a key and
// a UNIQ_KEY, as a client sends them) in batches of 32, as the push
// consumer does in a retry storm: reading each original, building its
// retry message and parking it in the schedule topic. ns/op is per
// message.
//
//	go test -run=^$ -bench=SendBackBatch -benchmem ./broker
func BenchmarkSendBackBatch(b *testing.B) {
	br := openBenchBroker(b, true)
	const originals, batch = 4096, 32
	body := bytes.Repeat([]byte{'x'}, 1024)
	offs := make([]int64, 0, originals)
	for len(offs) < originals {
		msgs := make([]*message.Message, batch)
		for i := range msgs {
			m := &message.Message{Topic: "Bench", QueueID: -1, Body: body}
			m.Properties.Set(message.PropTags, "TagA")
			m.Properties.Set(message.PropKeys, "key-"+strconv.Itoa(len(offs)+i))
			msgs[i] = m
		}
		res, err := br.Send(b.Context(), "Bench", msgs)
		require.NoError(b, err)
		for _, r := range res {
			offs = append(offs, r.PhysicalOffset)
		}
	}
	reqs := make([]broker.SendBackRequest, batch)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		n := min(batch, b.N-i)
		for j := range n {
			reqs[j] = broker.SendBackRequest{Group: "storm", PhysicalOffset: offs[(i+j)%originals], Reason: "failed"}
		}
		_, errs := br.SendBackBatch(b.Context(), reqs[:n])
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
