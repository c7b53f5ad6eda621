package message

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
)

const (
	upperHex = "0123456789ABCDEF"

	msgIDV4Len = 2 * (4 + 4 + 8)  // hex digits of an IPv4 offset message id
	msgIDV6Len = 2 * (16 + 4 + 8) // hex digits of an IPv6 offset message id
)

// EncodeOffsetMsgID returns the offset message id of a record (§3.5): the
// store host's address (4 bytes for IPv4, 16 for IPv6 and IPv4-mapped
// IPv6), its port as an int32 and the physical offset as an int64, in
// uppercase hex: 32 or 56 characters. An invalid AddrPort counts as
// 0.0.0.0:0, as in a record.
func EncodeOffsetMsgID(storeHost netip.AddrPort, physOff int64) string {
	var buf [msgIDV6Len]byte
	return string(AppendOffsetMsgID(buf[:0], storeHost, physOff))
}

// AppendOffsetMsgID appends the offset message id to dst (see
// EncodeOffsetMsgID). It does not allocate when dst has 56 bytes to spare.
func AppendOffsetMsgID(dst []byte, storeHost netip.AddrPort, physOff int64) []byte {
	var raw [16 + 4 + 8]byte
	b := appendHost(raw[:0], storeHost)
	b = binary.BigEndian.AppendUint64(b, uint64(physOff))
	return appendUpperHex(dst, b)
}

func appendUpperHex(dst, b []byte) []byte {
	dst = slices.Grow(dst, 2*len(b))
	for _, c := range b {
		dst = append(dst, upperHex[c>>4], upperHex[c&0xF])
	}
	return dst
}

// DecodeOffsetMsgID parses an offset message id: 32 hex digits for an IPv4
// store host or 56 for IPv6, in either case. The address comes back as
// stored: 16 bytes give an IPv6 address (IPv4-mapped stays mapped). Errors
// match ErrInvalidMsgID and say what is wrong: the length, a non-hex
// character, or a port outside 0..65535.
func DecodeOffsetMsgID(id string) (netip.AddrPort, int64, error) {
	if len(id) != msgIDV4Len && len(id) != msgIDV6Len {
		return netip.AddrPort{}, 0, fmt.Errorf("message: offset message id has %d characters, want %d (IPv4) or %d (IPv6): %w",
			len(id), msgIDV4Len, msgIDV6Len, ErrInvalidMsgID)
	}
	var raw [msgIDV6Len / 2]byte
	for i := 0; i < len(id); i += 2 {
		hi, lo := unhex(id[i]), unhex(id[i+1])
		if hi > 0xF || lo > 0xF {
			bad := i
			if hi <= 0xF {
				bad = i + 1
			}
			return netip.AddrPort{}, 0, fmt.Errorf("message: offset message id has non-hex character %q at %d: %w", id[bad], bad, ErrInvalidMsgID)
		}
		raw[i/2] = hi<<4 | lo
	}
	b := raw[:len(id)/2]
	addrLen := len(b) - 12
	var addr netip.Addr
	if addrLen == 4 {
		addr = netip.AddrFrom4([4]byte(b[:4]))
	} else {
		addr = netip.AddrFrom16([16]byte(b[:16]))
	}
	port := int32(binary.BigEndian.Uint32(b[addrLen:]))
	if port < 0 || port > 0xFFFF {
		return netip.AddrPort{}, 0, fmt.Errorf("message: offset message id has port %d, outside 0..65535: %w", port, ErrInvalidMsgID)
	}
	off := int64(binary.BigEndian.Uint64(b[addrLen+4:]))
	return netip.AddrPortFrom(addr, uint16(port)), off, nil
}

// unhex returns the value of a hex digit, or 0xFF.
func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return 0xFF
}
