package broker

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/gantrymq/gantry/auth"
)

// AuthConfig holds the authentication and authorization keys
// (docs/SECURITY.md), RocketMQ 5's names where they exist.
type AuthConfig struct {
	// AuthenticationEnabled (authenticationEnabled): every request but
	// the public ones (routes, health, a client's heartbeat) must be
	// signed by a user of ACLFile; the broker refuses to start when the
	// file has no users. Default false.
	AuthenticationEnabled bool
	// SkipAuthorization (authorizationEnabled=false): any authenticated
	// user may run any operation but the cluster's (registration,
	// replication); by default users' roles and rules decide.
	SkipAuthorization bool
	// ACLFile (aclFile): the users and their rules (JSON,
	// docs/SECURITY.md), reloaded when it changes and written by the
	// user and ACL admin commands. Default
	// <storePathRootDir>/config/acl.json.
	ACLFile string
	// InnerAccessKey and InnerSecretKey
	// (innerClientAuthenticationCredentials={"accessKey":"…","secretKey":"…"}):
	// the cluster user (role cluster) the broker signs its own calls
	// with: registrations with nameservers and controllers, and a
	// slave's replication from its master.
	InnerAccessKey, InnerSecretKey string
	// AuthWindow (authWindowMillis, ms): how far a gRPC call's signing
	// time may lie from the broker's clock, either way; a captured call is
	// refused after it. Default 60 s.
	AuthWindow time.Duration
	// AllowRemoteWithoutAuth (allowRemoteWithoutAuth): listen on
	// addresses beyond loopback with authentication off. Without it such
	// a broker refuses to start: anyone reaching its ports could change
	// and read everything. Default false.
	AllowRemoteWithoutAuth bool
}

// DefaultAuthWindow is AuthConfig.AuthWindow's default.
const DefaultAuthWindow = auth.DefaultWindow

func (a *AuthConfig) setDefaults(storeRoot string) {
	if a.ACLFile == "" && storeRoot != "" {
		a.ACLFile = filepath.Join(storeRoot, "config", "acl.json")
	}
	setDefault(&a.AuthWindow, DefaultAuthWindow)
}

// The authentication keys (docs/SECURITY.md, "Broker settings"), in the
// order of AuthConfig.
func init() {
	for _, k := range []struct {
		name string
		set  func(c *Config, v string) error
	}{
		{"authenticationEnabled", func(c *Config, v string) error { return parseBool(v, &c.AuthenticationEnabled) }},
		{"authorizationEnabled", func(c *Config, v string) error {
			var on bool
			err := parseBool(v, &on)
			c.SkipAuthorization = !on
			return err
		}},
		{"aclFile", func(c *Config, v string) error { c.ACLFile = v; return nil }},
		{"innerClientAuthenticationCredentials", parseInnerCredentials},
		{"authWindowMillis", func(c *Config, v string) error { return parseDuration(v, time.Millisecond, &c.AuthWindow) }},
		{"allowRemoteWithoutAuth", func(c *Config, v string) error { return parseBool(v, &c.AllowRemoteWithoutAuth) }},
	} {
		setters[k.name] = k.set
		ConfigKeys = append(ConfigKeys, k.name)
	}
}

func parseInnerCredentials(c *Config, v string) error {
	var cred struct {
		AccessKey string `json:"accessKey"`
		SecretKey string `json:"secretKey"`
	}
	if err := json.Unmarshal([]byte(v), &cred); err != nil {
		return fmt.Errorf(`want {"accessKey":"…","secretKey":"…"}: %w`, err)
	}
	c.InnerAccessKey, c.InnerSecretKey = cred.AccessKey, cred.SecretKey
	return nil
}

func (c Config) validateAuth(bad badFunc) {
	if c.AuthWindow < time.Second {
		bad("authWindowMillis %s: want at least 1s", c.AuthWindow)
	}
	if (c.InnerAccessKey == "") != (c.InnerSecretKey == "") {
		bad("innerClientAuthenticationCredentials: want both accessKey and secretKey")
	}
	if c.InnerAccessKey != "" {
		if _, err := auth.NewSigner(c.InnerAccessKey, c.InnerSecretKey); err != nil {
			bad("innerClientAuthenticationCredentials: %v", err)
		}
	}
	if c.AuthenticationEnabled && c.ACLFile == "" {
		bad("authenticationEnabled: aclFile is empty; want the path of the users' file")
	}
}
