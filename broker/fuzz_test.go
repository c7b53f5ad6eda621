package broker_test

import (
	"strings"
	"testing"

	"github.com/gantrymq/gantry/broker"
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
