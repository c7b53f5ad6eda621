package remotingapi_test

import (
	"bytes"
	"testing"
)

// BenchmarkSendMessageParallel sends one 1 KiB message per SEND_MESSAGE
// from many goroutines over one connection, the way the official Go
// client's SendSync does.
func BenchmarkSendMessageParallel(b *testing.B) {
	e := newEnv(b)
	e.createTopic(b, "T", 4)
	cl := e.dial(b, nil)
	body := string(bytes.Repeat([]byte{'x'}, 1024))
	b.SetParallelism(32) // 64 senders on 2 CPUs
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			sendOne(b, cl, "T", 0, body, nil)
		}
	})
}
