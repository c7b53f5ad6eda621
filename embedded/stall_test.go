package embedded_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/grpcapi"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
	"github.com/gantrymq/gantry/internal/fsx"
)

// A broker whose dispatcher cannot index (a full disk refusing the index's
// file) says so: /readyz is not ready and names the stall, /metrics has
// the lag and the stalled flag, and past the stall bound a send is refused
// with a definite UNAVAILABLE, which the Go client may retry, instead of
// being acknowledged into a log nobody can read. Once the disk has room
// the broker recovers on its own and every acknowledged message is
// readable.
func TestDispatchStallVisibleAndSendsRefused(t *testing.T) {
	faults := &fsx.Faults{}
	faults.Add(fsx.Fault{Op: fsx.OpAllocate, Path: "index", Err: syscall.ENOSPC})
	c, cl := start(t, embedded.Options{Broker: func(bc *broker.Config) {
		bc.StoreOverride = func(sc *store.Config) {
			sc.FS = fsx.WithFaults(fsx.OS, faults)
			sc.MaxDispatchStall = 300 * time.Millisecond
		}
	}})
	send := func(i int) error {
		_, err := cl.msg.Send(t.Context(), &gantryv1.SendRequest{Topic: "Full", Messages: []*gantryv1.Message{
			{QueueId: 0, Body: []byte("m" + strconv.Itoa(i))}}})
		return err
	}
	_, err := cl.admin.CreateTopic(t.Context(), &gantryv1.CreateTopicRequest{Topic: &gantryv1.TopicConfig{Name: "Full", ReadQueueNums: 1, WriteQueueNums: 1}})
	require.NoError(t, err)
	// The Go client's first attempts: acknowledged until the stall lasted
	// its bound.
	p0, err := client.NewProducer(t.Context(), client.Config{NameServers: []string{c.NameServerAddr()}}, client.WithRetries(0))
	require.NoError(t, err)
	defer p0.Close(context.Background())
	acked := 0
	require.Eventually(t, func() bool {
		_, err := p0.Send(t.Context(), &client.Message{Topic: "Full", Body: []byte("c" + strconv.Itoa(acked))})
		if err == nil {
			acked++
		}
		return err != nil
	}, 30*time.Second, time.Millisecond, "a send is refused once the stall lasted its bound")
	require.Positive(t, acked)
	refused := send(acked)
	st := status.Convert(refused)
	assert.Equal(t, codes.Unavailable, st.Code())
	assert.Contains(t, st.Message(), "dispatch stalled")
	assert.Contains(t, st.Message(), "no space left on device")
	require.Len(t, st.Details(), 1)
	info, ok := st.Details()[0].(*errdetails.ErrorInfo)
	require.True(t, ok)
	assert.Equal(t, grpcapi.ReasonDefinite, info.Reason, "nothing was stored")
	ce := client.IsRetryable(clientError(t, c, "Full"))
	assert.True(t, ce, "the Go client may retry it")

	code, body := get(t, c, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "not ready: dispatch stalled")
	_, metrics := get(t, c, "/metrics")
	assert.Regexp(t, `gantry_store_dispatch_stalled\{[^}]*\} 2\n`, metrics)
	lag := regexp.MustCompile(`gantry_store_dispatch_lag_bytes\{[^}]*\} (\S+)\n`).FindStringSubmatch(metrics)
	require.Len(t, lag, 2, metrics)
	assert.NotEqual(t, "0", lag[1])

	faults.Clear()
	require.Eventually(t, func() bool { code, _ := get(t, c, "/readyz"); return code == http.StatusOK }, 30*time.Second,
		20*time.Millisecond, "ready again once the index has room")
	_, metrics = get(t, c, "/metrics")
	assert.Regexp(t, `gantry_store_dispatch_stalled\{[^}]*\} 0\n`, metrics)
	assert.Regexp(t, `gantry_store_dispatch_lag_bytes\{[^}]*\} 0\n`, metrics)
	require.NoError(t, send(acked), "sends are accepted again")
	assert.Len(t, pullAll(t, cl, "Full", 0, 0, ""), acked+1, "every acknowledged message is readable")
}

// clientError is the error the Go client's producer, retrying as it does
// by default, gets from a send to topic now: a definite one, at once, not
// an indeterminate one after its retries waited in the broker for the
// stalled dispatcher until their deadline.
func clientError(t *testing.T, c *embedded.Cluster, topic string) error {
	t.Helper()
	p, err := client.NewProducer(t.Context(), client.Config{NameServers: []string{c.NameServerAddr()}})
	require.NoError(t, err)
	defer p.Close(context.Background())
	_, err = p.Send(t.Context(), &client.Message{Topic: topic, Body: []byte("x")})
	require.Error(t, err)
	var ind *client.IndeterminateError
	assert.False(t, errors.As(err, &ind), "definite: %v", err)
	assert.Contains(t, err.Error(), "dispatch stalled")
	return err
}

// get fetches a path of the broker's HTTP server.
func get(t *testing.T, c *embedded.Cluster, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + c.HTTPAddr() + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
