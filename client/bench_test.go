package client

import (
	"bytes"
	"sync"
	"testing"
)

// BenchmarkSendAsync sends 1 KiB messages with SendAsync, 1,024 in flight,
// to an in-process fake broker: allocs/op is per message, the fake
// broker's included.
//
//	go test -run=^$ -bench=SendAsync -benchmem ./client
func BenchmarkSendAsync(b *testing.B) {
	br := startBroker(b, "a", 4, "T")
	p := newTestProducer(b, testConfig(b, startNameServer(b, br)))
	body := bytes.Repeat([]byte{'x'}, 1024)
	window := make(chan struct{}, 1024)
	var wg sync.WaitGroup
	done := func(_ *Message, _ SendResult, err error) {
		if err != nil {
			b.Error(err)
		}
		<-window
		wg.Done()
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		window <- struct{}{}
		wg.Add(1)
		p.SendAsync(b.Context(), &Message{Topic: "T", Body: body}, done)
	}
	wg.Wait()
}

// BenchmarkPrepareOne validates and encodes one 1 KiB message with a tag
// and a key, as every send does before it is queued.
//
//	go test -run=^$ -bench=PrepareOne -benchmem ./client
func BenchmarkPrepareOne(b *testing.B) {
	m := &Message{Topic: "T", Tags: "TagA", Keys: []string{"k1"}, Body: bytes.Repeat([]byte{'x'}, 1024)}
	b.SetBytes(int64(len(m.Body)))
	b.ReportAllocs()
	for b.Loop() {
		bt, err := prepareOne(m)
		if err != nil {
			b.Fatal(err)
		}
		bt.release()
	}
}
