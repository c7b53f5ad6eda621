package message_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
)

func TestDecodeProperties(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want message.Properties
	}{
		{"empty", "", nil},
		{"one pair", "TAGS\x01TagA\x02", message.Properties{{Key: "TAGS", Value: "TagA"}}},
		{"order kept", "B\x01b\x02A\x01a\x02", message.Properties{{Key: "B", Value: "b"}, {Key: "A", Value: "a"}}},
		{"duplicates kept", "A\x011\x02A\x012\x02", message.Properties{{Key: "A", Value: "1"}, {Key: "A", Value: "2"}}},
		// The corrections found by the golden vectors: the Go client's decoder keeps
		// empty values and empty keys.
		{"empty value kept", "A\x01\x02B\x01b\x02", message.Properties{{Key: "A", Value: ""}, {Key: "B", Value: "b"}}},
		{"empty key kept", "\x01v\x02K\x01k\x02", message.Properties{{Key: "", Value: "v"}, {Key: "K", Value: "k"}}},
		{"both empty", "\x01\x02", message.Properties{{Key: "", Value: ""}}},
		// §3.3: a piece without exactly one 0x01 is dropped; a missing final 0x02 is tolerated.
		{"value with 0x01 dropped, no final 0x02", "A\x01x\x01y\x02B\x01b", message.Properties{{Key: "B", Value: "b"}}},
		{"piece without 0x01 dropped", "junk\x02B\x01b\x02", message.Properties{{Key: "B", Value: "b"}}},
		{"empty pieces skipped", "\x02\x02A\x01a\x02\x02", message.Properties{{Key: "A", Value: "a"}}},
		{"only separators", "\x02\x02\x02", nil},
		{"no separators", "garbage", nil},
		{"utf-8", "标签\x01😀\x02", message.Properties{{Key: "标签", Value: "😀"}}},
		{"crc tail kept", "A\x01a\x02__CRC32#\x010123456789\x02",
			message.Properties{{Key: "A", Value: "a"}, {Key: message.PropCRC, Value: "0123456789"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := message.DecodeProperties([]byte(tt.in))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			// Whatever decodes re-encodes to something that decodes the same.
			again, err := message.DecodeProperties(message.AppendProperties(nil, got))
			require.NoError(t, err)
			assert.Equal(t, tt.want, again)
		})
	}
}

func TestDecodePropertiesTooLarge(t *testing.T) {
	_, err := message.DecodeProperties([]byte(strings.Repeat("x", message.MaxPropertiesLen)))
	require.NoError(t, err)
	_, err = message.DecodeProperties([]byte(strings.Repeat("x", message.MaxPropertiesLen+1)))
	require.ErrorIs(t, err, message.ErrPropertiesTooLarge)
}

func TestAppendProperties(t *testing.T) {
	p := message.Properties{{Key: "KEYS", Value: "k1 k2"}, {Key: "TAGS", Value: "TagA"}, {Key: "", Value: ""}}
	assert.Equal(t, "x"+"KEYS\x01k1 k2\x02TAGS\x01TagA\x02\x01\x02", string(message.AppendProperties([]byte("x"), p)))
	assert.Empty(t, message.AppendProperties(nil, nil))
}

func TestPropertiesGetSetDel(t *testing.T) {
	tests := []struct {
		name string
		in   message.Properties
		op   func(p *message.Properties)
		want message.Properties
	}{
		{"set appends", nil, func(p *message.Properties) { p.Set("A", "1") }, message.Properties{{Key: "A", Value: "1"}}},
		{"set replaces in place", message.Properties{{Key: "A", Value: "1"}, {Key: "B", Value: "2"}},
			func(p *message.Properties) { p.Set("A", "9") }, message.Properties{{Key: "A", Value: "9"}, {Key: "B", Value: "2"}}},
		{"set removes later duplicates", message.Properties{{Key: "A", Value: "1"}, {Key: "B", Value: "2"}, {Key: "A", Value: "3"}, {Key: "C", Value: "4"}},
			func(p *message.Properties) { p.Set("A", "9") },
			message.Properties{{Key: "A", Value: "9"}, {Key: "B", Value: "2"}, {Key: "C", Value: "4"}}},
		{"del removes all", message.Properties{{Key: "A", Value: "1"}, {Key: "B", Value: "2"}, {Key: "A", Value: "3"}},
			func(p *message.Properties) { p.Del("A") }, message.Properties{{Key: "B", Value: "2"}}},
		{"del missing", message.Properties{{Key: "B", Value: "2"}},
			func(p *message.Properties) { p.Del("A") }, message.Properties{{Key: "B", Value: "2"}}},
		{"del on nil", nil, func(p *message.Properties) { p.Del("A") }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := append(message.Properties(nil), tt.in...)
			tt.op(&p)
			assert.Equal(t, tt.want, p)
		})
	}
}

func TestPropertiesGetReturnsLast(t *testing.T) {
	p := message.Properties{{Key: "A", Value: "1"}, {Key: "B", Value: ""}, {Key: "A", Value: "2"}}
	v, ok := p.Get("A")
	assert.True(t, ok)
	assert.Equal(t, "2", v)
	v, ok = p.Get("B")
	assert.True(t, ok)
	assert.Empty(t, v)
	_, ok = p.Get("C")
	assert.False(t, ok)
	_, ok = message.Properties(nil).Get("A")
	assert.False(t, ok)
}
