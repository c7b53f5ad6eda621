package broker_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/internal/tlsx"
)

func TestTLSKeys(t *testing.T) {
	f, err := tlsx.WriteDevCerts(t.TempDir(), []string{"127.0.0.1"})
	require.NoError(t, err)
	missing := filepath.Join(t.TempDir(), "nope.pem")
	tests := []struct {
		name string
		conf string
		want []string // in the error of ParseConfig or Validate; none: valid
	}{
		{"enforcing", "tls.server.mode=enforcing\ntls.server.certPath=" + f.ServerCert + "\ntls.server.keyPath=" + f.ServerKey, nil},
		{"mutual, both ways", "tls.server.mode=permissive\ntls.server.certPath=" + f.ServerCert + "\ntls.server.keyPath=" + f.ServerKey +
			"\ntls.server.trustCertPath=" + f.CA + "\ntls.server.need.client.auth=require\ntls.enable=true\ntls.client.trustCertPath=" + f.CA +
			"\ntls.client.certPath=" + f.ClientCert + "\ntls.client.keyPath=" + f.ClientKey, nil},
		{"bad mode", "tls.server.mode=on", []string{`tls.server.mode: bad value "on": want disabled, permissive or enforcing`}},
		{"bad client auth", "tls.server.need.client.auth=true", []string{`tls.server.need.client.auth: bad value "true": want none, optional or require`}},
		{"bad authServer", "tls.client.authServer=no", []string{`tls.client.authServer: bad value "no": want true or false`}},
		{"mode without certificate", "tls.server.mode=enforcing", []string{"tls.server.mode=enforcing needs tls.server.certPath",
			"needs tls.server.keyPath"}},
		{"missing certificate", "tls.server.mode=enforcing\ntls.server.certPath=" + missing + "\ntls.server.keyPath=" + f.ServerKey,
			[]string{"tls.server.certPath " + missing}},
		{"key of another certificate", "tls.server.mode=enforcing\ntls.server.certPath=" + f.ServerCert + "\ntls.server.keyPath=" + f.ClientKey,
			[]string{"tls.server.keyPath " + f.ClientKey + ": not the private key of tls.server.certPath " + f.ServerCert}},
		{"client auth without CA", "tls.server.mode=enforcing\ntls.server.certPath=" + f.ServerCert + "\ntls.server.keyPath=" + f.ServerKey +
			"\ntls.server.need.client.auth=require", []string{"tls.server.need.client.auth=require needs tls.server.trustCertPath"}},
		{"missing client CA", "tls.enable=true\ntls.client.trustCertPath=" + missing, []string{"tls.client.trustCertPath " + missing}},
		{"client certificate without key", "tls.enable=true\ntls.client.certPath=" + f.ClientCert,
			[]string{"tls.client.certPath is set without tls.client.keyPath"}},
		{"client files unused without tls.enable", "tls.client.trustCertPath=" + missing, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c broker.Config
			err := broker.ParseConfig(strings.NewReader(tt.conf), &c)
			if err == nil {
				err = c.Validate()
			}
			if len(tt.want) == 0 {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, broker.ErrInvalidConfig)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
	var c broker.Config
	require.NoError(t, broker.ParseConfig(strings.NewReader("tls.server.mode=Enforcing\ntls.client.authServer=true"), &c))
	assert.Equal(t, broker.TLSEnforcing, c.TLSServerMode)
	assert.False(t, c.TLSClientSkipVerify)
}
