package nameserver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/nameserver"
)

func TestConfigValidate(t *testing.T) {
	require.NoError(t, nameserver.Config{}.Validate(), "zero means defaults")
	err := nameserver.Config{BrokerExpiry: -time.Second, ScanInterval: -time.Second}.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "BrokerExpiry")
	assert.Contains(t, err.Error(), "ScanInterval")

	_, err = nameserver.NewRegistry(nameserver.Config{ScanInterval: -1})
	require.ErrorContains(t, err, "nameserver: ScanInterval must not be negative")
}
