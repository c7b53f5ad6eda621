package controller

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogHCLog is the hclog.Logger raft and its transport write to, turned
// into slog records at the matching level (trace and debug both at Debug),
// with the logger's name as the "component" attribute.
type slogHCLog struct {
	base *slog.Logger // with the implied args
	l    *slog.Logger // base with the component
	name string
	args []any
}

var _ hclog.Logger = slogHCLog{}

// hclogFor returns raft's logger writing to l.
func hclogFor(l *slog.Logger) hclog.Logger {
	return slogHCLog{base: l, l: l.With("component", "raft"), name: "raft"}
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (h slogHCLog) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	h.l.Log(context.Background(), slogLevel(level), msg, args...)
}

func (h slogHCLog) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h slogHCLog) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h slogHCLog) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h slogHCLog) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h slogHCLog) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h slogHCLog) enabled(level slog.Level) bool {
	return h.l.Enabled(context.Background(), level)
}

func (h slogHCLog) IsTrace() bool { return h.enabled(slog.LevelDebug) }
func (h slogHCLog) IsDebug() bool { return h.enabled(slog.LevelDebug) }
func (h slogHCLog) IsInfo() bool  { return h.enabled(slog.LevelInfo) }
func (h slogHCLog) IsWarn() bool  { return h.enabled(slog.LevelWarn) }
func (h slogHCLog) IsError() bool { return h.enabled(slog.LevelError) }

func (h slogHCLog) ImpliedArgs() []any { return h.args }

func (h slogHCLog) With(args ...any) hclog.Logger {
	h.args = append(append([]any(nil), h.args...), args...)
	h.base = h.base.With(args...)
	h.l = h.l.With(args...)
	return h
}

func (h slogHCLog) Name() string { return h.name }

func (h slogHCLog) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return h.ResetNamed(name)
}

func (h slogHCLog) ResetNamed(name string) hclog.Logger {
	h.name = name
	h.l = h.base.With("component", name)
	return h
}

// SetLevel does nothing: the slog handler decides what is kept.
func (h slogHCLog) SetLevel(hclog.Level) {}

func (h slogHCLog) GetLevel() hclog.Level {
	for _, lv := range []hclog.Level{hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if h.enabled(slogLevel(lv)) {
			return lv
		}
	}
	return hclog.Off
}

func (h slogHCLog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(h.l.Handler(), h.standardLevel(opts))
}

func (h slogHCLog) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return slog.NewLogLogger(h.l.Handler(), h.standardLevel(opts)).Writer()
}

func (h slogHCLog) standardLevel(opts *hclog.StandardLoggerOptions) slog.Level {
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		return slogLevel(opts.ForceLevel)
	}
	return slog.LevelInfo
}
