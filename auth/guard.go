package auth

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"
)

// GuardConfig configures a Guard.
type GuardConfig struct {
	// Users returns the current users (Store.Users). Required.
	Users func() *Users
	// Window is how far a gRPC call's signing date may lie from now.
	// Default DefaultWindow.
	Window time.Duration
	// NoAuthorization lets every authenticated user run every operation
	// but ClassCluster ones (authorizationEnabled=false): credentials are
	// still checked.
	NoAuthorization bool
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives refusals, at most logsPerSecond a second (Warn),
	// never a secret. Default: discard.
	Logger *slog.Logger
}

// logsPerSecond bounds the refusals a Guard logs, so that a client
// retrying with a wrong key does not flood the log; the counters count
// them all.
const logsPerSecond = 10

// Guard authenticates requests and authorizes their operations, counting
// and logging refusals. A nil *Guard is authentication off: every request
// is anonymous and every operation allowed. Safe for concurrent use.
type Guard struct {
	cfg     GuardConfig
	refused [NumReasons]atomic.Uint64
	logSec  atomic.Int64 // the second logged in
	logged  atomic.Int32 // refusals logged in it
}

// NewGuard returns a Guard.
func NewGuard(cfg GuardConfig) *Guard {
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Guard{cfg: cfg}
}

// Enabled reports whether g checks anything.
func (g *Guard) Enabled() bool { return g != nil }

// Remoting authenticates a remoting request (Users.VerifyRemoting); from
// names the peer in the log.
func (g *Guard) Remoting(ext map[string]string, body []byte, from string) (*Principal, error) {
	if g == nil {
		return nil, nil
	}
	p, err := g.cfg.Users().VerifyRemoting(ext, body)
	if err != nil {
		g.refuse(err, from, "")
	}
	return p, err
}

// GRPC authenticates a gRPC call of method by its metadata values
// (Users.VerifyGRPC).
func (g *Guard) GRPC(method, date, authorization, from string) (*Principal, error) {
	if g == nil {
		return nil, nil
	}
	p, err := g.cfg.Users().VerifyGRPC(method, date, authorization, g.cfg.Now(), g.cfg.Window)
	if err != nil {
		g.refuse(err, from, method)
	}
	return p, err
}

// Authorize decides an operation (the package's Authorize); op names it
// in the log.
func (g *Guard) Authorize(p *Principal, c Class, op, from string, rs ...Resource) error {
	if g == nil {
		return nil
	}
	if g.cfg.NoAuthorization && p != nil && c != ClassCluster {
		return nil
	}
	err := Authorize(p, c, rs...)
	if err != nil {
		g.refuse(err, from, op)
	}
	return err
}

// Refused returns how many requests were refused, by reason.
func (g *Guard) Refused() [NumReasons]uint64 {
	var out [NumReasons]uint64
	if g == nil {
		return out
	}
	for i := range out {
		out[i] = g.refused[i].Load()
	}
	return out
}

func (g *Guard) refuse(err error, from, op string) {
	var e *Error
	if !errors.As(err, &e) {
		return
	}
	g.refused[e.Reason].Add(1)
	sec := g.cfg.Now().Unix()
	if old := g.logSec.Load(); old != sec && g.logSec.CompareAndSwap(old, sec) {
		g.logged.Store(0)
	}
	if g.logged.Add(1) > logsPerSecond {
		return
	}
	g.cfg.Logger.Warn("request refused", "reason", e.Reason.String(), "accessKey", e.AccessKey, "op", op, "from", from, "err", err)
}

type principalKey struct{}

// NewContext returns ctx carrying p, as a gRPC server's authentication
// hands it to its handlers.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the Principal of NewContext, or nil.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
