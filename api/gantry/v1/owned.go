package gantryv1

import (
	"unicode/utf8"
	"unsafe"

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
	if n := countField(b, 5); n > 0 {
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

// countField counts b's fields numbered num (-1 if b is malformed before
// the end), so that a slice is made once.
func countField(b []byte, num protowire.Number) int {
	n := 0
	for len(b) > 0 {
		got, typ, m := protowire.ConsumeTag(b)
		if m < 0 {
			return -1
		}
		b = b[m:]
		m = protowire.ConsumeFieldValue(got, typ, b)
		if m < 0 {
			return -1
		}
		b = b[m:]
		if got == num {
			n++
		}
	}
	return n
}

// UnmarshalOwned is proto.Unmarshal of a SendResponse that takes b: the
// results are made in one allocation and their strings are views of b, so
// that a producer receiving the answer to a request of many messages does
// not allocate per message. The caller must not modify or reuse b
// afterwards. A response this decoder does not read (an error, unknown
// fields) or malformed goes through proto.Unmarshal, with its errors.
func (x *SendResponse) UnmarshalOwned(b []byte) error {
	x.Reset()
	if !x.unmarshalResults(b) {
		x.Reset()
		return proto.Unmarshal(b, x)
	}
	return nil
}

func (x *SendResponse) unmarshalResults(b []byte) bool {
	var slab []SendResult
	if n := countField(b, 1); n > 0 {
		slab = make([]SendResult, n)
		x.Results = make([]*SendResult, 0, n)
	} else if n < 0 {
		return false
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			r := &slab[len(x.Results)]
			if !r.unmarshalView(v) {
				return false
			}
			x.Results = append(x.Results, r)
			b = b[n:]
		case num == 2 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			x.RequestId = v
			b = b[n:]
		default:
			return false
		}
	}
	return true
}

// unmarshalView decodes a SendResult whose strings are views of b.
func (x *SendResult) unmarshalView(b []byte) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case (num == 1 || num == 2) && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !utf8.Valid(v) {
				return false
			}
			s := unsafe.String(unsafe.SliceData(v), len(v))
			if num == 1 {
				x.MsgId = s
			} else {
				x.UniqKey = s
			}
			b = b[n:]
		case num >= 3 && num <= 7 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			switch num {
			case 3:
				x.QueueId = int32(v)
			case 4:
				x.QueueOffset = int64(v)
			case 5:
				x.PhysicalOffset = int64(v)
			case 6:
				x.StoreTimestampMs = int64(v)
			case 7:
				x.Duplicate = protowire.DecodeBool(v)
			}
			b = b[n:]
		default:
			return false
		}
	}
	return true
}
