package delivery

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// noBroker stands for the broker's Topics and Sender in config checks.
type noBroker struct{}

func (noBroker) InternalTopic(string) (metadata.TopicConfig, error) {
	return metadata.TopicConfig{}, nil
}
func (noBroker) EnsureGroupTopic(string) (metadata.TopicConfig, error) {
	return metadata.TopicConfig{}, nil
}
func (noBroker) NextQueue(metadata.TopicConfig) int32 { return 0 }
func (noBroker) EnsureGroup(string) (metadata.SubscriptionGroup, error) {
	return metadata.SubscriptionGroup{}, nil
}
func (noBroker) CheckGroupName(string) error { return nil }
func (noBroker) PutInternal(context.Context, bool, []*message.Message) ([]store.PutResult, error) {
	return nil, nil
}
func (noBroker) Put(context.Context, string, []*message.Message) ([]store.PutResult, error) {
	return nil, nil
}

func TestConfigValidate(t *testing.T) {
	valid := Config{Log: slog.Default(), Now: time.Now, FS: fsx.OS, Dir: t.TempDir(),
		DelayLevels: []time.Duration{time.Second}, Tick: time.Millisecond, SweepInterval: time.Second,
		Store: (*store.Store)(nil), CommitLog: (*commitlog.Log)(nil), Metadata: (*metadata.Metadata)(nil),
		Topics: noBroker{}, Sender: noBroker{}}
	assert.NoError(t, valid.Validate())
	for name, change := range map[string]func(*Config){
		"no clock":        func(c *Config) { c.Now = nil },
		"no store":        func(c *Config) { c.Store = nil },
		"no sender":       func(c *Config) { c.Sender = nil },
		"no delay levels": func(c *Config) { c.DelayLevels = nil },
		"no tick":         func(c *Config) { c.Tick = 0 },
		"no sweep":        func(c *Config) { c.SweepInterval = 0 },
	} {
		c := valid
		change(&c)
		assert.Error(t, c.Validate(), name)
	}
}
