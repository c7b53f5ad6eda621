package grpcapi_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/grpcapi"
)

type fakeHA grpcapi.HAReport

func (f fakeHA) HAReport() grpcapi.HAReport { return grpcapi.HAReport(f) }

func openBroker(t *testing.T, role broker.BrokerRole) *broker.Broker {
	t.Helper()
	id := int64(0)
	if role == broker.Slave {
		id = 1
	}
	b, err := broker.Open(t.Context(), broker.Config{StorePathRootDir: filepath.Join(t.TempDir(), "store"), BrokerRole: role, BrokerID: id})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	return b
}

// HAStatus turns the server's report into the answer: a master's slaves
// with their lag behind its log end, a slave's follower with its lag
// (never negative) and its last error.
func TestHAStatusAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		role broker.BrokerRole
		ha   grpcapi.HAReporter
		want *gantryv1.HAStatusResponse
	}{
		{"master", broker.SyncMaster, fakeHA{LogEnd: 1000, Slaves: []grpcapi.HASlave{
			{ID: 1, Addr: "127.0.0.1:1", Connected: true, Acked: 1000},
			{ID: 2, Addr: "127.0.0.1:2", Acked: 400},
		}}, &gantryv1.HAStatusResponse{Role: "SYNC_MASTER", LogEnd: 1000, Slaves: []*gantryv1.HASlave{
			{BrokerId: 1, Address: "127.0.0.1:1", Connected: true, AckedOffset: 1000},
			{BrokerId: 2, Address: "127.0.0.1:2", AckedOffset: 400, LagBytes: 600},
		}}},
		{"master without slaves", broker.AsyncMaster, fakeHA{LogEnd: 7}, &gantryv1.HAStatusResponse{Role: "ASYNC_MASTER", LogEnd: 7}},
		{"slave behind", broker.Slave, fakeHA{LogEnd: 300, Following: true, Follower: grpcapi.HAFollower{
			MasterAddr: "10.0.0.1:10912", Connected: true, End: 300, MasterEnd: 1000, MetaSnapshots: 3,
		}}, &gantryv1.HAStatusResponse{Role: "SLAVE", LogEnd: 300, Following: true, MasterHaAddress: "10.0.0.1:10912",
			Connected: true, MasterLogEnd: 1000, LagBytes: 700, MetaSnapshots: 3}},
		{"slave stopped, ahead of what it last heard", broker.Slave, fakeHA{LogEnd: 500, Following: true, Follower: grpcapi.HAFollower{
			MasterAddr: "10.0.0.1:10912", End: 500, MasterEnd: 400, LastErr: errors.New("diverged"), Stopped: true,
		}}, &gantryv1.HAStatusResponse{Role: "SLAVE", LogEnd: 500, Following: true, MasterHaAddress: "10.0.0.1:10912",
			MasterLogEnd: 400, LastError: "diverged", Stopped: true}},
		{"slave that does not know its master", broker.Slave, fakeHA{LogEnd: 0}, &gantryv1.HAStatusResponse{Role: "SLAVE"}},
		{"no reporter", broker.AsyncMaster, nil, &gantryv1.HAStatusResponse{Role: "ASYNC_MASTER"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := grpcapi.NewAdmin(openBroker(t, tc.role), tc.ha)
			got, err := a.HAStatus(t.Context(), &gantryv1.HAStatusRequest{})
			require.NoError(t, err)
			assert.True(t, proto.Equal(tc.want, got), "got %v\nwant %v", got, tc.want)
		})
	}
}
