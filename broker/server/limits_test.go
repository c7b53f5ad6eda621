package server_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"net"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker/grpcapi"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// sendHeader is the start of a SEND_MESSAGE frame whose length prefix
// announces frameBytes (prefix included): the prefix, the header word and
// a header like the official client's (about 420 bytes); no body.
func sendHeader(t *testing.T, opaque int32, frameBytes int) []byte {
	t.Helper()
	req := remoting.NewRequest(remoting.ReqSendMessage, map[string]string{
		"producerGroup": "PG_slow", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": "1765000000000", "flag": "0", "reconsumeTimes": "0",
		"unitMode": "false", "batch": "false", "properties": "UNIQ_KEY\x01AC11000100002A9F0000000000000000\x02WAIT\x01true\x02",
	})
	req.Opaque = opaque
	b, err := req.AppendFrame(nil)
	require.NoError(t, err)
	binary.BigEndian.PutUint32(b, uint32(frameBytes-4))
	return b
}

// Many remoting connections that announce the largest frame and send only
// its header cost the broker a few KiB each, not the 16 MiB announced;
// when they send more, the broker buffers at most its MaxBufferedBytes
// (64 MiB) between them and answers the frames beyond it SYSTEM_BUSY,
// naming the limit.
func TestRemotingSlowFramesBoundHeap(t *testing.T) {
	s := startRemoting(t)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	const conns, frame = 64, remoting.DefaultMaxFrameBytes
	before := liveHeap()
	raws := make([]net.Conn, conns)
	for i := range raws {
		nc, err := net.Dial("tcp", s.RemotingAddr())
		require.NoError(t, err)
		t.Cleanup(func() { nc.Close() })
		_, err = nc.Write(sendHeader(t, int32(i), frame))
		require.NoError(t, err)
		raws[i] = nc
	}
	headerBytes := len(sendHeader(t, 0, frame))
	require.Eventually(t, func() bool { // each frame read as far as it came: its first chunk is 4 KiB
		return s.RemotingStats().BufferedBytes >= conns*4096
	}, 10*time.Second, time.Millisecond)
	grown := int64(liveHeap()) - int64(before)
	t.Logf("%d connections, each announcing a frame of %d bytes and sending its %d-byte header: live heap %+d bytes, %d buffered",
		conns, frame, headerBytes, grown, s.RemotingStats().BufferedBytes)
	assert.Less(t, grown, int64(8<<20), "the broker's heap grew by %d bytes", grown)

	// Now each sends 2 MiB of its body, one after the other: the first
	// ones are held, and once 64 MiB are buffered the others are refused.
	body := make([]byte, 2<<20)
	refused := 0
	for i, nc := range raws {
		st := s.RemotingStats()
		_, err := nc.Write(body)
		require.NoError(t, err)
		held := st.BufferedBytes + int64(headerBytes-8+len(body)-4096) // its buffer holds all that came
		require.Eventually(t, func() bool {
			now := s.RemotingStats()
			return now.Refused > st.Refused || now.BufferedBytes >= held
		}, 10*time.Second, time.Millisecond, "connection %d", i)
		if s.RemotingStats().Refused == st.Refused {
			continue
		}
		refused++
		require.NoError(t, nc.SetReadDeadline(time.Now().Add(10*time.Second)))
		resp, err := remoting.ReadFrame(bufio.NewReader(nc), 0)
		require.NoError(t, err, "connection %d", i)
		assert.Equal(t, remoting.ResSystemBusy, resp.ResponseCode())
		assert.Equal(t, int32(i), resp.Opaque)
		assert.Contains(t, resp.Remark, "its limit (MaxBufferedBytes) is 67108864")
	}
	st := s.RemotingStats()
	grown = int64(liveHeap()) - int64(before)
	t.Logf("then 2 MiB more each: %d connections held, %d refused; %d bytes buffered; live heap %+d bytes",
		conns-refused, refused, st.BufferedBytes, grown)
	assert.LessOrEqual(t, st.BufferedBytes, int64(64<<20+conns*4096))
	assert.Less(t, grown, int64(64<<20+16<<20), "the broker's heap grew by %d bytes", grown)
	assert.GreaterOrEqual(t, refused, conns-64/2, "64 MiB hold at most 32 frames of 2 MiB")
	assert.Equal(t, uint64(refused), st.Refused)
	for _, nc := range raws {
		nc.Close()
	}
	require.Eventually(t, func() bool { return s.RemotingStats().BufferedBytes == 0 }, 10*time.Second, time.Millisecond)
}

// rawMessage is a gRPC message sent as the bytes it holds, uncopied.
type rawMessage []byte

// rawCodec sends rawMessages as they are.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*rawMessage))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*rawMessage) = data.Materialize()
	return nil
}

// heapAllocs is the bytes the process allocated since it started.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A gRPC request beyond the largest valid one (a send of 63 MiB) is
// refused from its length prefix, before the broker reads it: it costs
// the broker at most its flow-control window (16 MiB), not the request.
func TestGRPCRequestOverLimitRefusedUnread(t *testing.T) {
	s := startRemoting(t)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	cc, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	call := func(req rawMessage) error {
		var resp rawMessage
		return cc.Invoke(t.Context(), "/gantry.v1.Messaging/Send", &req, &resp, grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallSendMsgSize(1<<30))
	}
	require.Equal(t, codes.InvalidArgument, status.Code(call(nil)), "an empty send: the connection is up")
	big, err := proto.Marshal(&gantryv1.SendRequest{Topic: "T", Records: [][]byte{make([]byte, 63<<20)}})
	require.NoError(t, err)

	allocs := heapAllocs()
	err = call(rawMessage(big))
	allocated := heapAllocs() - allocs
	t.Logf("a SendRequest of %d bytes: allocated %d bytes while refused", len(big), allocated)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	assert.ErrorContains(t, err, "grpc: received message larger than max (66060296 vs. 4292849)")
	assert.Equal(t, message.MaxEnvelopeBytes, grpcapi.MaxRequestBytes)
	assert.Less(t, allocated, uint64(32<<20), "bytes allocated refusing a 63 MiB request")
}
