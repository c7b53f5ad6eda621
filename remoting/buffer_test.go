package remoting_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/remoting"
)

// announced returns the start of a request frame of code with an ext
// header like a send's (about 360 bytes) whose length prefix announces a
// frame of frameBytes (prefix included), and its body's length; the body
// is not included.
func announced(t *testing.T, code remoting.RequestCode, opaque int32, frameBytes int) (head []byte, bodyLen int) {
	t.Helper()
	req := remoting.NewRequest(code, map[string]string{
		"producerGroup": "PG_attack", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": "1765000000000", "flag": "0", "reconsumeTimes": "0",
		"unitMode": "false", "batch": "false", "properties": "UNIQ_KEY\x01AC11000100002A9F0000000000000000\x02WAIT\x01true\x02",
	})
	req.Opaque = opaque
	head, err := req.AppendFrame(nil)
	require.NoError(t, err)
	binary.BigEndian.PutUint32(head, uint32(frameBytes-4))
	return head, frameBytes - len(head)
}

// A frame that announces 16 MiB but delivers only its header costs a few
// KiB, not 16 MiB: the buffer grows as the bytes arrive, to at most twice
// what came.
func TestReadFrameGrowsAsBytesArrive(t *testing.T) {
	head, _ := announced(t, remoting.ReqSendMessage, 1, remoting.DefaultMaxFrameBytes)
	require.Less(t, len(head), 500)
	for _, sent := range []int{0, 100 << 10} {
		frame := append(append([]byte(nil), head...), make([]byte, sent)...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 20 {
			_, err := remoting.ReadFrame(bufio.NewReader(bytes.NewReader(frame)), 0)
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		}
		runtime.ReadMemStats(&after)
		perFrame := (after.TotalAlloc - before.TotalAlloc) / 20
		t.Logf("a 16 MiB frame cut after %d bytes: %d bytes allocated", len(frame), perFrame)
		assert.Less(t, perFrame, uint64(4*sent+32<<10), "bytes allocated reading a frame cut after %d bytes", len(frame))
	}
}

// A frame that arrives whole is read into buffers of about twice its
// size in all, as a doubling buffer costs: its growth ends at the frame's
// size, not just past a doubling that fell short of it (a third time the
// frame's size).
func TestReadFrameGrowthEndsAtTheFrame(t *testing.T) {
	req := remoting.NewRequest(remoting.ReqSendMessage, map[string]string{"topic": "T"})
	req.Body = make([]byte, 1<<20) // the frame is just past 4 KiB doubled 8 times
	frame, err := req.AppendFrame(nil)
	require.NoError(t, err)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		_, err := remoting.ReadFrame(bufio.NewReader(bytes.NewReader(frame)), 0)
		require.NoError(t, err)
	}
	runtime.ReadMemStats(&after)
	perFrame := (after.TotalAlloc - before.TotalAlloc) / 10
	assert.Less(t, perFrame, uint64(len(frame))*9/4, "bytes allocated reading a frame of %d bytes", len(frame))
}

// bufferLimits are small limits for the tests: 1 MiB frames, 2 MiB per
// connection, 4 MiB in all.
var bufferLimits = remoting.Config{MaxFrameBytes: 1 << 20, MaxBufferedBytesPerConn: 2 << 20, MaxBufferedBytes: 4 << 20}

// Connections that send large frames slowly hold at most the server's
// MaxBufferedBytes between them (and a first chunk each); frames beyond
// it are refused with SYSTEM_BUSY naming the limit, and the connections
// refused stay usable. The frames within it complete.
func TestServerRefusesFramesOverTheBufferBound(t *testing.T) {
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqSendMessage, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		resp := remoting.NewResponse(req, remoting.ResSuccess, "")
		resp.SetExt("len", strconv.Itoa(len(req.Body)))
		return resp
	})
	s, addr := startServer(t, bufferLimits, mux)
	const conns, frame = 12, 1 << 20
	raws := make([]*rawConn, conns)
	bodies := make([]int, conns)
	for i := range raws { // all of a frame but its last byte
		raws[i] = dialRaw(t, addr)
		head, bodyLen := announced(t, remoting.ReqSendMessage, int32(i), frame)
		_, err := raws[i].nc.Write(append(head, make([]byte, bodyLen-1)...))
		require.NoError(t, err)
		bodies[i] = bodyLen
	}
	// Each connection ends up holding its frame's whole buffer or refused.
	need := int64(frame - 8)
	waitFor(t, "every frame held or refused", func() bool {
		st := s.Stats()
		return st.BufferedBytes == (conns-int64(st.Refused))*need
	})
	st := s.Stats()
	t.Logf("%d of %d connections refused; %d bytes buffered", st.Refused, conns, st.BufferedBytes)
	assert.GreaterOrEqual(t, st.Refused, uint64(conns-4), "4 MiB hold at most 4 frames of 1 MiB")
	assert.Less(t, st.Refused, uint64(conns))

	// Each connection sends its frame's last byte: a held frame completes
	// and is answered; a refused one was answered SYSTEM_BUSY when it was
	// refused, and its rest is dropped. A refused connection is then
	// served again.
	refused := 0
	for i, r := range raws {
		_, err := r.nc.Write([]byte{0})
		require.NoError(t, err)
		c := r.mustRecv()
		if c.Code == int16(remoting.ResSuccess) { // its frame was held
			assert.Equal(t, strconv.Itoa(bodies[i]), c.Ext("len"))
			continue
		}
		refused++
		assert.Equal(t, int16(remoting.ResSystemBusy), c.Code)
		assert.Equal(t, int32(i), c.Opaque)
		assert.Contains(t, c.Remark, "its limit (MaxBufferedBytes) is 4194304: a frame of 1048576 bytes was refused")
		r.send(&remoting.Command{Code: int16(remoting.ReqSendMessage), Opaque: 100, Body: []byte("again")})
		c = r.mustRecv()
		assert.Equal(t, int16(remoting.ResSuccess), c.Code, c.Remark)
		assert.Equal(t, "5", c.Ext("len"))
	}
	assert.Equal(t, int(st.Refused), refused)
	waitFor(t, "every byte given back", func() bool { return s.Stats().BufferedBytes == 0 })
}

// A connection holds at most MaxBufferedBytesPerConn in frames: the next
// frame is not read until handlers of its requests return.
func TestServerBoundsBytesPerConn(t *testing.T) {
	release := make(chan struct{})
	var running atomic.Int32
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqSendMessage, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		running.Add(1)
		<-release
		return remoting.NewResponse(req, remoting.ResSuccess, "")
	})
	s, addr := startServer(t, bufferLimits, mux)
	raw := dialRaw(t, addr)
	for i := range 4 {
		raw.send(&remoting.Command{Code: int16(remoting.ReqSendMessage), Opaque: int32(i), Body: make([]byte, 700<<10)})
	}
	waitFor(t, "two handlers running", func() bool { return running.Load() == 2 })
	time.Sleep(50 * time.Millisecond) // a third would be read and start now if allowed
	assert.Equal(t, int32(2), running.Load(), "2 × 700 KiB held; a third would take the connection past 2 MiB")
	assert.Equal(t, uint64(2), s.Stats().Requests)
	assert.LessOrEqual(t, s.Stats().BufferedBytes, int64(2<<20))
	close(release)
	for range 4 {
		assert.Equal(t, int16(remoting.ResSuccess), raw.mustRecv().Code)
	}
	assert.Zero(t, s.Stats().Refused, "a connection's own bound makes it wait, never refuses")
}

func TestBufferConfigValidate(t *testing.T) {
	err := remoting.Config{MaxBufferedBytesPerConn: 1 << 20}.Validate()
	assert.ErrorContains(t, err, "MaxBufferedBytesPerConn 1048576 is below MaxFrameBytes 16777216")
	err = remoting.Config{MaxBufferedBytes: 20 << 20}.Validate()
	assert.ErrorContains(t, err, "MaxBufferedBytes 20971520 is below MaxBufferedBytesPerConn 33554432")
	assert.NoError(t, bufferLimits.Validate())
	assert.NoError(t, remoting.Config{MaxFrameBytes: 64 << 20}.Validate(), "the defaults follow MaxFrameBytes")
}
