package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/nameserver"
	"github.com/gantrymq/gantry/remoting"
)

func TestZZCeiling(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	route, _ := json.Marshal(nameserver.TopicRoute{
		QueueDatas:  []nameserver.QueueData{{BrokerName: "b", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}},
		BrokerDatas: []nameserver.BrokerData{{Cluster: "c", BrokerName: "b", BrokerAddrs: map[int64]string{0: addr}}},
	})
	var off atomic.Int64
	mux := remoting.NewMux()
	mux.HandleFunc(remoting.ReqGetRouteInfoByTopic, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		r := remoting.NewResponse(req, 0, "")
		r.Body = route
		return r
	})
	ok := func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		return remoting.NewResponse(req, 0, "")
	}
	mux.HandleFunc(remoting.ReqHeartBeat, ok)
	send := func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		r := remoting.NewResponse(req, 0, "")
		o := off.Add(1)
		r.SetExt("msgId", "7F00000100002A9F000000000000"+strconv.FormatInt(1000+o, 16))
		r.SetExt("queueId", "0")
		r.SetExt("queueOffset", strconv.FormatInt(o, 10))
		return r
	}
	mux.HandleFunc(remoting.ReqSendMessage, send)
	mux.HandleFunc(remoting.ReqSendMessageV2, send)
	srv, err := remoting.NewServer(remoting.Config{}, mux)
	require.NoError(t, err)
	go srv.Serve(lis)
	defer srv.Close()

	p, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{addr}), producer.WithGroupName("PG_ceil"), producer.WithRetry(2))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer p.Shutdown()
	body := bytes.Repeat([]byte{'b'}, 1024)
	f := func(ctx context.Context) error {
		_, err := p.SendSync(ctx, primitive.NewMessage("T_ceil", body))
		return err
	}
	load(t.Context(), 64, 2*time.Second, f)
	n, d, fails := load(t.Context(), 64, 5*time.Second, f)
	t.Logf("official client against a responder: %.0f msgs/s (%d errors)", float64(n)/d.Seconds(), fails)
}
