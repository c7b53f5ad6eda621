package message_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gantrymq/gantry/message"
)

func TestOffsetMsgIDRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		host netip.AddrPort
		off  int64
		want string
	}{
		{"protocol example", storeV4, 1000, "C0A8010A00002A9F00000000000003E8"},
		{"zero host", netip.AddrPort{}, 0, "00000000000000000000000000000000"},
		{"max port and offset", netip.MustParseAddrPort("255.255.255.255:65535"), 1<<63 - 1, "FFFFFFFF0000FFFF7FFFFFFFFFFFFFFF"},
		{"ipv6", storeV6, 8192, "20010DB800000000000000000000000100002A9F0000000000002000"},
		{"ipv4-mapped ipv6", netip.MustParseAddrPort("[::ffff:192.168.1.10]:10911"), 1,
			"00000000000000000000FFFFC0A8010A00002A9F0000000000000001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := message.EncodeOffsetMsgID(tt.host, tt.off)
			assert.Equal(t, tt.want, id)
			host, off, err := message.DecodeOffsetMsgID(strings.ToLower(id))
			require.NoError(t, err)
			want := tt.host
			if !want.IsValid() {
				want = netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
			}
			assert.Equal(t, want, host)
			assert.Equal(t, tt.off, off)
		})
	}
}

func TestDecodeOffsetMsgIDErrors(t *testing.T) {
	tests := []struct {
		name, id, reason string
	}{
		{"empty", "", "has 0 characters, want 32 (IPv4) or 56 (IPv6)"},
		{"31 characters", strings.Repeat("0", 31), "has 31 characters"},
		{"uniq key length but not hex", "0A0000051F9018B4AAC20012D687000G", `non-hex character 'G' at 31`},
		{"high nibble bad", "X0000000000000000000000000000000", `non-hex character 'X' at 0`},
		{"port out of range", "C0A8010A0001000000000000000003E8", "port 65536, outside 0..65535"},
		{"negative port", "C0A8010AFFFFFFFF00000000000003E8", "port -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := message.DecodeOffsetMsgID(tt.id)
			require.ErrorIs(t, err, message.ErrInvalidMsgID)
			assert.Contains(t, err.Error(), tt.reason)
			assert.True(t, strings.HasPrefix(err.Error(), "message: "))
		})
	}
}
