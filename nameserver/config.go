package nameserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Config configures a Registry. The zero value of every field means its default.
type Config struct {
	// BrokerExpiry: a broker not heard from for this long is dropped
	// (RocketMQ's BrokerChannelExpiredTime). Default 120 s.
	BrokerExpiry time.Duration
	// ScanInterval is how often Run looks for expired brokers, so a silent
	// broker is dropped between BrokerExpiry and BrokerExpiry+ScanInterval
	// after it was last heard from. Default 10 s (RocketMQ scans every 5 s).
	ScanInterval time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives registrations, topic changes, expiry and disconnects.
	// Default: discard.
	Logger *slog.Logger

	// AuthenticationEnabled (gantry namesrv --auth): registrations need a
	// cluster user of ACLFile, topic deletions an admin; routes, cluster
	// info and the topic list stay public, but a request signed wrongly is
	// refused (docs/SECURITY.md, "Cluster"). NewServer refuses to start
	// when ACLFile has no users. Default false: anyone who reaches the
	// nameserver may register or unregister any broker.
	AuthenticationEnabled bool
	// ACLFile (--acl-file) is the users' file (JSON, docs/SECURITY.md,
	// "Users and rules"), reloaded when it changes. Required with
	// AuthenticationEnabled, refused without it (it would do nothing).
	ACLFile string
	// AuthWindow is how far a gRPC call's signing time may lie from the
	// nameserver's clock, either way. Default 60 s.
	AuthWindow time.Duration
	// TLS, if set, is the server side of TLS on every port Server serves
	// (docs/SECURITY.md, "TLS"): each protocol is served inside TLS too.
	// A GetConfigForClient in it is kept (certificates reloaded on
	// change: internal/tlsx). Default nil: plaintext only.
	TLS *tls.Config
	// RequireTLS, with TLS, refuses plaintext clients (tls.server.mode
	// enforcing): each is told, in its protocol, that TLS is required.
	// Default false: plaintext and TLS are both served (permissive).
	RequireTLS bool
}

const (
	defaultBrokerExpiry = 120 * time.Second
	defaultScanInterval = 10 * time.Second
)

func (c Config) withDefaults() Config {
	if c.BrokerExpiry == 0 {
		c.BrokerExpiry = defaultBrokerExpiry
	}
	if c.ScanInterval == 0 {
		c.ScanInterval = defaultScanInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if c.BrokerExpiry < 0 {
		errs = append(errs, fmt.Errorf("nameserver: BrokerExpiry must not be negative, got %s", c.BrokerExpiry))
	}
	if c.ScanInterval < 0 {
		errs = append(errs, fmt.Errorf("nameserver: ScanInterval must not be negative, got %s", c.ScanInterval))
	}
	switch {
	case c.AuthenticationEnabled && c.ACLFile == "":
		errs = append(errs, errors.New("nameserver: AuthenticationEnabled without ACLFile: want the path of the users' file"))
	case !c.AuthenticationEnabled && c.ACLFile != "":
		errs = append(errs, fmt.Errorf("nameserver: ACLFile %s without AuthenticationEnabled: the users would check nothing; enable authentication or drop the file", c.ACLFile))
	}
	if c.AuthWindow < 0 || c.AuthWindow > 0 && c.AuthWindow < time.Second {
		errs = append(errs, fmt.Errorf("nameserver: AuthWindow %s: want at least 1s", c.AuthWindow))
	}
	if c.RequireTLS && c.TLS == nil {
		errs = append(errs, errors.New("nameserver: RequireTLS needs TLS"))
	}
	return errors.Join(errs...)
}
