package remoting_test

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/remoting"
)

// BenchmarkEncodeResponse encodes a SEND_MESSAGE response (six ext fields,
// as a broker sends it) into a reused buffer.
func BenchmarkEncodeResponse(b *testing.B) {
	req := &remoting.Command{Code: 10, Opaque: 12345}
	resp := remoting.NewResponse(req, remoting.ResSuccess, "")
	resp.ExtFields = map[string]string{
		"msgId": "C0A8010A00002A9F0000000000001000", "queueId": "1", "queueOffset": "42",
		"transactionId": "7F0000010D4B0000000005f5e1000001", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true",
	}
	buf := make([]byte, 0, 1024)
	var err error
	b.ReportAllocs()
	for b.Loop() {
		buf, err = resp.AppendFrame(buf[:0])
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkDecodeSendRequest decodes the Go client's SEND_MESSAGE frame
// (fourteen ext fields, properties with \u0001 escapes).
func BenchmarkDecodeSendRequest(b *testing.B) {
	frame := loadGolden(b, "frame_send_request").Bin
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := remoting.DecodeFrame(frame); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadSendRequest reads the same frame from a buffered stream, as
// a connection does (one more allocation: the frame's buffer).
func BenchmarkReadSendRequest(b *testing.B) {
	frame := loadGolden(b, "frame_send_request").Bin
	r := bytes.NewReader(frame)
	br := bufio.NewReader(r)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(frame)
		br.Reset(r)
		if _, err := remoting.ReadFrame(br, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInvoke is one request and response over loopback TCP.
func BenchmarkInvoke(b *testing.B) {
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqHeartBeat, echo)
	s, err := remoting.NewServer(remoting.Config{}, mux)
	require.NoError(b, err)
	lis := listen(b)
	go func() { _ = s.Serve(lis) }()
	defer s.Close()
	cl, err := remoting.Dial(b.Context(), lis.Addr().String(), remoting.DialOptions{})
	require.NoError(b, err)
	defer cl.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cl.Invoke(b.Context(), remoting.NewRequest(remoting.ReqHeartBeat, nil)); err != nil {
			b.Fatal(err)
		}
	}
}
