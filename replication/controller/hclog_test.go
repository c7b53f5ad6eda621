package controller

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
)

func TestHCLogToSlog(t *testing.T) {
	var buf bytes.Buffer
	h := hclogFor(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level:       slog.LevelInfo,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) },
	})))
	assert.False(t, h.IsDebug())
	assert.True(t, h.IsInfo())
	assert.Equal(t, hclog.Info, h.GetLevel())

	h.Debug("dropped")
	h.Warn("heartbeat failed", "peer", "c2")
	h.Named("snapshot").With("id", 7).Error("restore failed")
	h.Log(hclog.Off, "never")
	h.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}).Print("from a std logger")
	assert.Equal(t, `level=WARN msg="heartbeat failed" component=raft peer=c2
level=ERROR msg="restore failed" component=raft.snapshot id=7
level=WARN msg="from a std logger" component=raft
`, buf.String())
}

func dropTime(a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
