package gantryv1

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// UnmarshalOwned is proto.Unmarshal of a SendRequest that takes b: the
// records are sub-slices of b instead of a copy each, so that a broker
// receiving a request of many records makes one allocation for it, not one
// per record. The caller must not modify or reuse b afterwards. A request
// with fields this decoder does not read (messages, unknown fields) or
// malformed, goes through proto.Unmarshal, with its errors.
func (x *SendRequest) UnmarshalOwned(b []byte) error {
	x.Reset()
	if !x.unmarshalRecords(b) {
		x.Reset()
		return proto.Unmarshal(b, x)
	}
	return nil
}

// unmarshalRecords decodes b's topic, producer_group, request_id and
// records fields, and reports false at anything else.
func (x *SendRequest) unmarshalRecords(b []byte) bool {
	if n := countRecords(b); n > 0 {
		x.Records = make([][]byte, 0, n)
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType, num == 3 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !utf8.Valid(v) {
				return false
			}
			if num == 1 {
				x.Topic = string(v)
			} else {
				x.ProducerGroup = string(v)
			}
			b = b[n:]
		case num == 4 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			x.RequestId = v
			b = b[n:]
		case num == 5 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			x.Records = append(x.Records, v[:len(v):len(v)])
			b = b[n:]
		default:
			return false
		}
	}
	return true
}

// countRecords counts b's records fields (-1 if b is malformed before the
// end), so that the slice is made once.
func countRecords(b []byte) int {
	n := 0
	for len(b) > 0 {
		num, typ, m := protowire.ConsumeTag(b)
		if m < 0 {
			return -1
		}
		b = b[m:]
		m = protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return -1
		}
		b = b[m:]
		if num == 5 {
			n++
		}
	}
	return n
}
