package broker_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
)

func TestAuthenticationNeedsUsers(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"no file", "", "no such file"},
		{"no users", `{"users": []}`, "authenticationEnabled with no users"},
		{"a broken file", `{"users": [{"accessKey": "a"}]}`, "accessKey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.AuthenticationEnabled = true
			cfg.ACLFile = filepath.Join(t.TempDir(), "acl.json")
			if tc.file != "" {
				require.NoError(t, os.WriteFile(cfg.ACLFile, []byte(tc.file), 0o600))
			}
			b, err := broker.Open(context.Background(), cfg)
			if b != nil {
				_ = b.Close(context.Background())
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestAuthenticationOpensUsers(t *testing.T) {
	cfg := testConfig(t)
	b := openBroker(t, cfg)
	assert.Nil(t, b.Guard(), "authentication is off by default")
	assert.Nil(t, b.Users())

	cfg = testConfig(t)
	cfg.AuthenticationEnabled = true
	cfg.ACLFile = filepath.Join(t.TempDir(), "acl.json")
	require.NoError(t, os.WriteFile(cfg.ACLFile, []byte(`{"users": [{"accessKey": "admin1", "secretKey": "adminsecret", "role": "admin"}]}`), 0o600))
	b = openBroker(t, cfg)
	require.NotNil(t, b.Guard())
	p, ok := b.Users().Users().Lookup("admin1")
	require.True(t, ok)
	assert.NoError(t, b.Guard().Authorize(p, auth.ClassAdmin, "deleteTopic", "test"))
}
