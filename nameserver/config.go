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
	if c.RequireTLS && c.TLS == nil {
		errs = append(errs, errors.New("nameserver: RequireTLS needs TLS"))
	}
	return errors.Join(errs...)
}
