package gantryv1

import (
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// UnmarshalOwned is proto.Unmarshal of a SendResponse that takes b: the
// results are made in one allocation and their strings are views of b, so
// that a producer receiving the answer to a request of many messages does
// not allocate per message. The caller must not modify or reuse b
// afterwards. A response this decoder does not read (an error, unknown
// fields) or malformed goes through proto.Unmarshal, with its errors.
func (x *SendResponse) UnmarshalOwned(b []byte) error {
	return unmarshalOwned(x, b, x.unmarshalResults)
}

// UnmarshalOwned is proto.Unmarshal of a PullResponse that takes b: the
// records are a sub-slice of b instead of a copy, so that a consumer
// decodes a pull of many messages without copying their bytes again (the
// messages it decodes from the records alias them in turn). The caller
// must not modify or reuse b afterwards. A response with fields this
// decoder does not read, or malformed, goes through proto.Unmarshal, with
// its errors.
func (x *PullResponse) UnmarshalOwned(b []byte) error {
	return unmarshalOwned(x, b, x.unmarshalView)
}

// UnmarshalOwned is proto.Unmarshal of a SendBackBatchRequest that takes
// b: the requests are made in one allocation and their strings are views
// of b, so that a broker taking back the failures of a retry storm, a few
// hundred a call, does not allocate per message. The caller must not
// modify or reuse b afterwards. A request with fields this decoder does
// not read, or malformed, goes through proto.Unmarshal, with its errors.
func (x *SendBackBatchRequest) UnmarshalOwned(b []byte) error {
	return unmarshalOwned(x, b, x.unmarshalRequests)
}

// unmarshalOwned resets m and decodes b with fast, or, when fast reports
// false, resets m again and leaves b to proto.Unmarshal.
func unmarshalOwned(m proto.Message, b []byte, fast func([]byte) bool) error {
	proto.Reset(m)
	if fast(b) {
		return nil
	}
	proto.Reset(m)
	return proto.Unmarshal(b, m)
}

// eachField calls f with every field of b: its number, its wire type and
// its value (a length-delimited field's bytes, a varint's value). It
// reports false when b is malformed, holds a field of another wire type,
// or f returned false.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, u uint64) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		var v []byte
		var u uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			u, n = protowire.ConsumeVarint(b)
		default:
			return false
		}
		if n < 0 || !f(num, typ, v, u) {
			return false
		}
		b = b[n:]
	}
	return true
}

// countField counts b's length-delimited fields numbered num (-1 if
// eachField would stop before the end), so that a slice is made once.
func countField(b []byte, num protowire.Number) int {
	n := 0
	if !eachField(b, func(got protowire.Number, typ protowire.Type, _ []byte, _ uint64) bool {
		if got == num && typ == protowire.BytesType {
			n++
		}
		return true
	}) {
		return -1
	}
	return n
}

// SetHeaderField sets x's topic (1), producer_group (3), request_id (4)
// or attempt (6) from one decoded field: its number, its wire type and its
// value (a string's bytes, which it copies, or a varint's value). It
// reports false for any other field, and for a string that is not UTF-8
// (which proto.Unmarshal refuses). The broker's SendRequest decoder, which
// reads the records from gRPC's buffers itself, leaves the rest to it.
func (x *SendRequest) SetHeaderField(num protowire.Number, typ protowire.Type, v []byte, u uint64) bool {
	switch {
	case (num == 1 || num == 3) && typ == protowire.BytesType:
		if !utf8.Valid(v) {
			return false
		}
		if num == 1 {
			x.Topic = string(v)
		} else {
			x.ProducerGroup = string(v)
		}
	case num == 4 && typ == protowire.VarintType:
		x.RequestId = u
	case num == 6 && typ == protowire.VarintType:
		x.Attempt = uint32(u)
	default:
		return false
	}
	return true
}

// unmarshalResults decodes b's results and request_id, and reports false
// at anything else (an error goes through proto.Unmarshal).
func (x *SendResponse) unmarshalResults(b []byte) bool {
	var ok bool
	x.Results, ok = repeatedViews(b, 1, (*SendResult).unmarshalView, func(num protowire.Number, typ protowire.Type, u uint64) bool {
		if num == 2 && typ == protowire.VarintType {
			x.RequestId = u
			return true
		}
		return false
	})
	return ok
}

// repeatedViews decodes b's repeated message field num into one slab of
// T, each element with decode, and hands every other field to other (nil:
// none is allowed). It reports false when b is malformed or decode or
// other did.
func repeatedViews[T any](b []byte, num protowire.Number, decode func(*T, []byte) bool,
	other func(num protowire.Number, typ protowire.Type, u uint64) bool) ([]*T, bool) {
	n := countField(b, num)
	if n < 0 {
		return nil, false
	}
	slab := make([]T, n)
	var out []*T
	if n > 0 {
		out = make([]*T, 0, n)
	}
	ok := eachField(b, func(got protowire.Number, typ protowire.Type, v []byte, u uint64) bool {
		if got == num && typ == protowire.BytesType {
			e := &slab[len(out)]
			if !decode(e, v) {
				return false
			}
			out = append(out, e)
			return true
		}
		return other != nil && other(got, typ, u)
	})
	return out, ok
}

// unmarshalView decodes a SendResult whose strings are views of b.
func (x *SendResult) unmarshalView(b []byte) bool {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) bool {
		switch {
		case (num == 1 || num == 2) && typ == protowire.BytesType:
			s, ok := stringView(v)
			if !ok {
				return false
			}
			if num == 1 {
				x.MsgId = s
			} else {
				x.UniqKey = s
			}
		case num == 3 && typ == protowire.VarintType:
			x.QueueId = int32(u)
		case num == 4 && typ == protowire.VarintType:
			x.QueueOffset = int64(u)
		case num == 5 && typ == protowire.VarintType:
			x.PhysicalOffset = int64(u)
		case num == 6 && typ == protowire.VarintType:
			x.StoreTimestampMs = int64(u)
		case num == 7 && typ == protowire.VarintType:
			x.Duplicate = protowire.DecodeBool(u)
		default:
			return false
		}
		return true
	})
}

// unmarshalView decodes b's fields, the records as a view of b, and
// reports false at anything else.
func (x *PullResponse) unmarshalView(b []byte) bool {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) bool {
		switch {
		case num == 1 && typ == protowire.VarintType:
			x.Status = PullStatus(int32(u))
		case num == 2 && typ == protowire.BytesType:
			x.Records = v[:len(v):len(v)]
		case num == 3 && typ == protowire.VarintType:
			x.RecordCount = int32(u)
		case num == 4 && typ == protowire.VarintType:
			x.NextOffset = int64(u)
		case num == 5 && typ == protowire.VarintType:
			x.MinOffset = int64(u)
		case num == 6 && typ == protowire.VarintType:
			x.MaxOffset = int64(u)
		default:
			return false
		}
		return true
	})
}

// unmarshalRequests decodes b's requests, and reports false at anything
// else.
func (x *SendBackBatchRequest) unmarshalRequests(b []byte) bool {
	var ok bool
	x.Requests, ok = repeatedViews(b, 1, (*SendBackRequest).unmarshalView, nil)
	return ok
}

// unmarshalView decodes a SendBackRequest whose strings are views of b.
func (x *SendBackRequest) unmarshalView(b []byte) bool {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) bool {
		switch {
		case (num == 1 || num == 2 || num == 6) && typ == protowire.BytesType:
			s, ok := stringView(v)
			if !ok {
				return false
			}
			switch num {
			case 1:
				x.Group = s
			case 2:
				x.MsgId = s
			default:
				x.Reason = s
			}
		case num == 3 && typ == protowire.VarintType:
			x.PhysicalOffset = int64(u)
		case num == 4 && typ == protowire.VarintType:
			x.DelayLevel = int32(u)
		case num == 5 && typ == protowire.VarintType:
			x.MaxReconsumeTimes = int32(u)
		default:
			return false
		}
		return true
	})
}

// stringView returns v as a string that shares its bytes (v must never
// change again), and false when v is not UTF-8, which proto.Unmarshal
// refuses in a string field.
func stringView(v []byte) (string, bool) {
	if !utf8.Valid(v) {
		return "", false
	}
	return unsafe.String(unsafe.SliceData(v), len(v)), true
}
