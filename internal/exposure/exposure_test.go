package exposure_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/internal/exposure"
)

func TestBeyond(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		beyond bool
	}{
		{"127.0.0.1:9876", false},
		{"127.1.2.3:0", false},
		{"[::1]:9876", false},
		{"localhost:9876", false},
		{":9876", true},
		{"0.0.0.0:9876", true},
		{"[::]:9876", true},
		{"10.0.0.5:9876", true},
		{"192.168.1.20:10911", true},
		{"[fe80::1]:9876", true},
		{"no-such-host.invalid:9876", true},
		{"not an address", true},
	} {
		assert.Equal(t, tc.beyond, exposure.Beyond(tc.addr), tc.addr)
	}
}

func TestBeyondAddr(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	assert.False(t, exposure.BeyondAddr(lis.Addr()))
	assert.True(t, exposure.BeyondAddr(&net.TCPAddr{IP: net.IPv4zero, Port: 1}))
	assert.True(t, exposure.BeyondAddr(&net.TCPAddr{IP: net.ParseIP("10.1.1.1"), Port: 1}))
	assert.False(t, exposure.BeyondAddr(&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 1}))
	assert.True(t, exposure.BeyondAddr(&net.UnixAddr{Name: "/tmp/x", Net: "unix"}))
}

func TestName(t *testing.T) {
	assert.Equal(t, ":9876 (every interface)", exposure.Name(":9876"))
	assert.Equal(t, "0.0.0.0:9876 (every interface)", exposure.Name("0.0.0.0:9876"))
	assert.Equal(t, "[::]:9876 (every interface)", exposure.Name("[::]:9876"))
	assert.Equal(t, "10.0.0.5:9876", exposure.Name("10.0.0.5:9876"))
}
