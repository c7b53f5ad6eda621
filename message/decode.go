package message

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"unsafe"
)

// Decode decodes the record at the front of b and returns it with the
// number of bytes it takes (TOTALSIZE). The Message owns its memory: Body is
// a copy, so b may be reused. Decode checks the structure as Check does
// (every length against TOTALSIZE and b before it slices) but not the
// checksums; use Check for those. It never panics. Errors are *CheckError
// values that match ErrInvalidRecord, and ErrTruncated when b ends before
// the record does.
//
// Body is stored as is (still compressed when SysFlag&FlagCompressed != 0)
// and is nil when empty. Properties are decoded like DecodeProperties,
// __CRC32# included; it is nil when there are none.
func Decode(b []byte) (*Message, int, error) {
	m := new(Message)
	n, err := DecodeInto(m, b, true)
	if err != nil {
		return nil, 0, err
	}
	return m, n, nil
}

// DecodeInto is Decode into an existing Message, for hot paths. It
// overwrites every field of m and reuses the backing array of m.Properties,
// so do not keep m.Properties from an earlier call. With copyBody false,
// m.Body aliases b (its capacity is clipped to its length): it is valid only
// as long as b is not modified. The topic and the property strings share one
// allocation. On error m is left unchanged.
func DecodeInto(m *Message, b []byte, copyBody bool) (int, error) {
	return decodeInto(m, b, copyBody, nil)
}

// DecodeAliasing is DecodeInto for a buffer that nothing modifies again,
// such as a consumer's pull response: the body, the topic and the
// property strings alias b instead of copying it, and m.Properties is
// carved from *slab (with its capacity clipped to its length; a new slab
// is made when this one is short), so that decoding the many records of
// one buffer allocates per buffer, not per message. The messages keep b
// alive.
func DecodeAliasing(m *Message, b []byte, slab *Properties) (int, error) {
	if slab == nil {
		slab = new(Properties)
	}
	return decodeInto(m, b, false, slab)
}

func decodeInto(m *Message, b []byte, copyBody bool, slab *Properties) (int, error) {
	l, err := parseLayout(b)
	if err != nil {
		return 0, err
	}
	rec := b[:l.size]
	be := binary.BigEndian
	var body []byte
	if l.bodyLen > 0 {
		body = rec[l.bodyOff : l.bodyOff+l.bodyLen : l.bodyOff+l.bodyLen]
		if copyBody {
			body = bytes.Clone(body)
		}
	}
	// Topic, PROPERTIESLEN and properties in one string.
	var s string
	props := m.Properties[:0]
	if slab != nil {
		s = unsafe.String(&rec[l.topicOff], l.size-l.topicOff) // b is never modified: see DecodeAliasing
		props = carve(slab, s[l.topicLen+2:])
	} else {
		s = string(rec[l.topicOff:l.size])
	}
	*m = Message{
		StoreSize:                 int32(l.size),
		BodyCRC:                   int32(be.Uint32(rec[offBodyCRC:])),
		QueueID:                   int32(be.Uint32(rec[offQueueID:])),
		Flag:                      int32(be.Uint32(rec[offFlag:])),
		QueueOffset:               int64(be.Uint64(rec[offQueueOffset:])),
		PhysicalOffset:            int64(be.Uint64(rec[offPhysicalOffset:])),
		SysFlag:                   l.sysFlag,
		BornTimestamp:             int64(be.Uint64(rec[offBornTimestamp:])),
		BornHost:                  readHost(rec[offBornHost:l.storeTsOff]),
		StoreTimestamp:            int64(be.Uint64(rec[l.storeTsOff:])),
		StoreHost:                 readHost(rec[l.storeHostOff:l.reconsumeOff]),
		ReconsumeTimes:            int32(be.Uint32(rec[l.reconsumeOff:])),
		PreparedTransactionOffset: int64(be.Uint64(rec[l.reconsumeOff+4:])),
		Body:                      body,
		Topic:                     s[:l.topicLen],
		Properties:                parseProperties(props, s[l.topicLen+2:]),
	}
	if slab != nil {
		*slab = (*slab)[:len(*slab)+len(m.Properties)]
		if len(m.Properties) == 0 {
			m.Properties = nil
		} else {
			m.Properties = m.Properties[:len(m.Properties):len(m.Properties)]
		}
	}
	return l.size, nil
}

// carve returns an empty slice at the end of *slab with room for the
// properties encoded in props, making *slab a new slab if it is short.
func carve(slab *Properties, props string) Properties {
	n := strings.Count(props, "\x02") + 1
	if cap(*slab)-len(*slab) < n {
		*slab = make(Properties, 0, max(n, 64))
	}
	at := len(*slab)
	return (*slab)[at : at : at+n]
}

// readHost decodes a stored host of hostV4Len or hostV6Len bytes; the port
// was range-checked by parseLayout.
func readHost(b []byte) netip.AddrPort {
	var a netip.Addr
	if len(b) == hostV6Len {
		a = netip.AddrFrom16([16]byte(b[:16]))
	} else {
		a = netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrPortFrom(a, uint16(binary.BigEndian.Uint32(b[len(b)-4:])))
}

// DecodeAll decodes records stored back to back with no padding, such as a
// PULL_MESSAGE response body. It stops at the first record that does not
// decode and returns the records before it together with an error naming
// the record's index and byte offset. An empty b gives no records.
func DecodeAll(b []byte) ([]*Message, error) {
	var msgs []*Message
	for off := 0; off < len(b); {
		m, n, err := Decode(b[off:])
		if err != nil {
			return msgs, fmt.Errorf("message: record %d at byte %d: %w", len(msgs), off, err)
		}
		msgs = append(msgs, m)
		off += n
	}
	return msgs, nil
}
