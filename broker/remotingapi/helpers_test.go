package remotingapi_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/remotingapi"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

// env is a broker served by the remoting front end on loopback.
type env struct {
	b    *broker.Broker
	h    *remotingapi.Handler
	rs   *remoting.Server
	addr string // the remoting address, also the records' store host
}

type envOption func(*broker.Config, *remotingapi.Config)

// newEnv opens a broker (small store files, topics not auto-created) and
// serves its remoting front end; the test's cleanup stops both.
func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	bc := broker.Config{
		StorePathRootDir: filepath.Join(t.TempDir(), "store"),
		ListenPort:       lis.Addr().(*net.TCPAddr).Port,
		Logger:           slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		StoreOverride: func(sc *store.Config) {
			sc.QueueEntriesPerFile, sc.IndexSlots, sc.IndexEntries = 64, 101, 400
			sc.Log.SegmentBytes, sc.Log.CleanInterval = 1<<20, -1
		},
	}
	var rc remotingapi.Config
	for _, o := range opts {
		o(&bc, &rc)
	}
	b, err := broker.Open(t.Context(), bc)
	if err != nil {
		lis.Close()
		require.NoError(t, err)
	}
	h := remotingapi.New(b, rc)
	rs, err := remoting.NewServer(remoting.Config{Logger: bc.Logger}, h)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- rs.Serve(lis) }()
	t.Cleanup(func() {
		require.NoError(t, rs.Close())
		require.NoError(t, <-done)
		require.NoError(t, h.Close())
		if err := b.Close(context.Background()); err != nil && !errors.Is(err, broker.ErrShuttingDown) {
			t.Errorf("close broker: %v", err)
		}
	})
	return &env{b: b, h: h, rs: rs, addr: lis.Addr().String()}
}

// dial connects a remoting client, closed by the test's cleanup; h, if
// set, answers the requests the broker sends.
func (e *env) dial(t testing.TB, h remoting.Handler) *remoting.Client {
	t.Helper()
	cl, err := remoting.Dial(t.Context(), e.addr, remoting.DialOptions{Handler: h})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func (e *env) createTopic(t testing.TB, name string, queues int32) {
	t.Helper()
	require.NoError(t, e.b.CreateOrUpdateTopic(broker.TopicConfig{
		TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: broker.PermRead | broker.PermWrite,
	}))
}

// waitHeld waits until n requests are being handled (held pulls).
func (e *env) waitHeld(t *testing.T, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return e.rs.Stats().InFlight == n }, 5*time.Second, time.Millisecond)
}

// waitVisible waits until a queue holds n messages.
func (e *env) waitVisible(t *testing.T, topic string, qid int32, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, maxOff := e.b.QueueOffsets(topic, qid)
		return maxOff >= n
	}, 5*time.Second, time.Millisecond)
}

// record returns the stored record at a commit-log offset.
func (e *env) record(t *testing.T, phys int64) []byte {
	t.Helper()
	rec, err := e.b.AppendRecordAt(nil, phys)
	require.NoError(t, err)
	return rec
}

// golden returns the request of a golden frame (testdata/NAME.bin) with
// the ext fields in set changed ("" deletes one).
func golden(t *testing.T, name string, set map[string]string) *remoting.Command {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".bin"))
	require.NoError(t, err)
	cmd, err := remoting.DecodeFrame(b)
	require.NoError(t, err)
	require.False(t, cmd.IsResponse())
	for k, v := range set {
		if v == "" {
			delete(cmd.ExtFields, k)
			continue
		}
		cmd.SetExt(k, v)
	}
	return cmd
}

// request builds a request the way the Go client does (language GO,
// version 317, flag 0).
func request(code remoting.RequestCode, ext map[string]string, body []byte) *remoting.Command {
	if ext == nil {
		ext = map[string]string{}
	}
	return &remoting.Command{Code: int16(code), Language: "GO", Version: remoting.VersionV4_5_2, ExtFields: ext, Body: body}
}

// invoke sends req and returns the response, failing after 30 s (the Go
// client's pull timeout, the longest it waits).
func invoke(t testing.TB, cl *remoting.Client, req *remoting.Command) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, req)
	require.NoError(t, err)
	require.True(t, resp.IsResponse())
	return resp
}

// requireCode fails unless resp has code want.
func requireCode(t testing.TB, want remoting.ResponseCode, resp *remoting.Command) {
	t.Helper()
	require.Equal(t, want, resp.ResponseCode(), "remark: %s", resp.Remark)
}

func extInt(t *testing.T, resp *remoting.Command, key string) int64 {
	t.Helper()
	v, ok := resp.ExtFields[key]
	require.True(t, ok, "ext %s missing from %v", key, resp.ExtFields)
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err)
	return n
}

// sendOne sends one message with SEND_MESSAGE's long names and returns
// the response.
func sendOne(t testing.TB, cl *remoting.Client, topic string, qid int32, body string, props message.Properties) *remoting.Command {
	t.Helper()
	return invoke(t, cl, request(remoting.ReqSendMessage, map[string]string{
		"producerGroup": "PG", "topic": topic, "queueId": strconv.Itoa(int(qid)), "sysFlag": "0",
		"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties": string(message.AppendProperties(nil, props)), "reconsumeTimes": "0", "unitMode": "false",
		"maxReconsumeTimes": "0", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "batch": "false", "bname": "broker-a",
	}, []byte(body)))
}

// pullReq is a push consumer's PULL_MESSAGE (frame_pull_request) for a
// queue from an offset.
func pullReq(t *testing.T, topic string, qid int32, offset int64, set map[string]string) *remoting.Command {
	t.Helper()
	ext := map[string]string{"topic": topic, "queueId": strconv.Itoa(int(qid)), "queueOffset": strconv.FormatInt(offset, 10)}
	for k, v := range set {
		ext[k] = v
	}
	return golden(t, "frame_pull_request", ext)
}

// decodeAll decodes a pull or query body.
func decodeAll(t *testing.T, body []byte) []*message.Message {
	t.Helper()
	ms, err := message.DecodeAll(body)
	require.NoError(t, err)
	return ms
}
