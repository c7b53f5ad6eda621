package grpcapi_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/grpcapi"
)

// The replication errors' gRPC codes: a slave's refusal says "not master"
// (go to the master), too few in-sync replicas is a definite retry-later,
// a slave timeout is indeterminate as a flush timeout is.
func TestReplicationCodes(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want codes.Code
	}{
		{&broker.NotMasterError{Broker: "b", ID: 1, Master: "10.0.0.1:8081"}, codes.FailedPrecondition},
		{fmt.Errorf("%w: x", broker.ErrSlaveReadDisabled), codes.FailedPrecondition},
		{fmt.Errorf("x: %w", broker.ErrNotEnoughReplicas), codes.Unavailable},
		{fmt.Errorf("x: %w: y", broker.ErrReplicaTimeout), codes.DeadlineExceeded},
	} {
		assert.Equal(t, tt.want, grpcapi.Code(tt.err), "%v", tt.err)
	}
	assert.True(t, broker.IsIndeterminate(fmt.Errorf("x: %w", broker.ErrReplicaTimeout)))
	assert.False(t, broker.IsIndeterminate(fmt.Errorf("x: %w", broker.ErrNotEnoughReplicas)))
	assert.Contains(t, (&broker.NotMasterError{Broker: "b", ID: 1, Master: "10.0.0.1:8081"}).Error(), "not master")
}
