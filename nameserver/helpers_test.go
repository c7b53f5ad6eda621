package nameserver_test

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gantrymq/gantry/internal/testutil"
	"github.com/gantrymq/gantry/nameserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable clock, safe for concurrent use.
type clock = testutil.Clock

func newClock() *clock { return testutil.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) }

func newRegistry(t *testing.T, clk *clock, cfg nameserver.Config) *nameserver.Registry {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	if clk != nil {
		cfg.Now = clk.Now
	}
	r, err := nameserver.NewRegistry(cfg)
	require.NoError(t, err)
	return r
}

var topic8 = nameserver.TopicInfo{ReadQueueNums: 8, WriteQueueNums: 8, Perm: nameserver.PermRead | nameserver.PermWrite}

// reg is a registration of broker name/id in cluster "c" at addr (gRPC)
// with the given topics, each with 8 queues and perm 6.
func reg(name string, id int64, addr string, topics ...string) nameserver.Registration {
	r := nameserver.Registration{
		Cluster:    "c",
		BrokerName: name,
		BrokerID:   id,
		Addr:       addr,
		Topics:     make(map[string]nameserver.TopicInfo, len(topics)),
	}
	for _, t := range topics {
		r.Topics[t] = topic8
	}
	return r
}

func mustRegister(t *testing.T, r *nameserver.Registry, rg nameserver.Registration) nameserver.RegisterResult {
	t.Helper()
	res, err := r.Register(rg)
	require.NoError(t, err)
	return res
}

func mustRoute(t *testing.T, r *nameserver.Registry, topic string) nameserver.TopicRoute {
	t.Helper()
	route, err := r.Route(topic)
	require.NoError(t, err, "route of %q", topic)
	return route
}

// brokerIDs lists the live brokers as "name/id".
func brokerIDs(r *nameserver.Registry) []string {
	var out []string
	for _, b := range r.Brokers() {
		out = append(out, b.BrokerName+"/"+strconv.FormatInt(b.BrokerID, 10))
	}
	return out
}
