package broker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/message"
)

// FuzzParseConfig: any broker.conf text parses or fails with an error;
// it never panics.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"brokerName=broker-b\nflushDiskType=SYNC_FLUSH\n# comment\n",
		"namesrvAddr=a:1;b:2\nlongPollingMaxHold=15s\nfileReservedTime=48",
		"unknownKey=1", "=", "brokerId=-1\nautoCreateTopicEnable=maybe", "\x00=\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var cfg broker.Config
		if err := broker.ParseConfig(strings.NewReader(s), &cfg); err == nil {
			_ = cfg.Validate()
		}
	})
}

// FuzzParseFilter: any subscription expression parses or fails; a parsed
// filter matches each of its tags.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"*", "", "A || B", "A||", "||", " a  ||b ", "Aa || BB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		flt, err := broker.ParseFilter(s)
		if err != nil {
			return
		}
		for _, tag := range flt.Tags() {
			if !flt.Match(tag) {
				t.Fatalf("filter %q does not match its own tag %q", s, tag)
			}
		}
	})
}

// FuzzSendRecords: records from the network are checked in place; any
// bytes are refused with an error or stored readably, never a panic.
func FuzzSendRecords(f *testing.F) {
	good, err := message.AppendUnsealed(nil, &message.Message{Topic: "Orders", QueueID: -1, Body: []byte("body"),
		Properties: message.Properties{{Key: message.PropTags, Value: "T"}}}, "UNIQ")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(append(append([]byte(nil), good...), good...))
	f.Add(good[:len(good)-3])
	f.Add([]byte{0, 0, 0, 8, 1, 2, 3, 4})
	cfg := broker.Config{StorePathRootDir: f.TempDir(), StoreOverride: smallStore}
	b, err := broker.Open(f.Context(), cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = b.Close(context.Background()) })
	if err := b.CreateOrUpdateTopic(metadata.TopicConfig{TopicName: "Orders", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		res, err := b.SendRecords(t.Context(), "Orders", [][]byte{rec})
		if err != nil {
			return
		}
		for _, r := range res {
			if _, err := b.Store().MessageAt(r.PhysicalOffset); err != nil {
				t.Fatalf("stored record at %d unreadable: %v", r.PhysicalOffset, err)
			}
		}
	})
}
