package gantryv1

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// MarshalSize returns the length of x's protobuf encoding, as proto.Size
// does, and false when AppendMarshal cannot encode x, which proto.Marshal
// then must: x has unknown fields, or a string that is not UTF-8 (which
// proto.Marshal refuses).
func (x *SendResponse) MarshalSize() (int, bool) {
	if len(x.unknownFields) > 0 ||
		(x.Error != nil && (len(x.Error.unknownFields) > 0 || !utf8.ValidString(x.Error.Message))) {
		return 0, false
	}
	n := 0
	for _, r := range x.Results {
		if r == nil || len(r.unknownFields) > 0 || !utf8.ValidString(r.MsgId) || !utf8.ValidString(r.UniqKey) {
			return 0, false
		}
		n += lenField(r.size())
	}
	if x.RequestId != 0 {
		n += 1 + protowire.SizeVarint(x.RequestId)
	}
	if x.Error != nil {
		n += lenField(x.Error.size())
	}
	return n, true
}

// AppendMarshal appends x's protobuf encoding to b: the bytes proto.Marshal
// writes, fields in number order, without reflection, which costs the
// broker per message since it answers every send with one SendResult per
// message (docs/decisions/0008-hand-written-protobuf-codecs.md). x must be one
// MarshalSize accepted, unchanged since.
func (x *SendResponse) AppendMarshal(b []byte) []byte {
	for _, r := range x.Results {
		b = appendVarint(append(b, tag(1, protowire.BytesType)), uint64(r.size()))
		b = r.appendMarshal(b)
	}
	if x.RequestId != 0 {
		b = appendVarint(append(b, tag(2, protowire.VarintType)), x.RequestId)
	}
	if e := x.Error; e != nil {
		b = appendVarint(append(b, tag(3, protowire.BytesType)), uint64(e.size()))
		b = e.appendMarshal(b)
	}
	return b
}

// tag is the key of a field of number below 16.
func tag(num protowire.Number, typ protowire.Type) byte { return byte(num)<<3 | byte(typ) }

// appendVarint is protowire.AppendVarint in a loop the compiler inlines.
func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	b = appendVarint(append(b, tag(num, protowire.BytesType)), uint64(len(s)))
	return append(b, s...)
}

// lenField is the size of a length-delimited field of number below 16
// whose value is n bytes.
func lenField(n int) int { return 1 + protowire.SizeVarint(uint64(n)) + n }

// An int32 or int64 field is encoded as the varint of its 64-bit two's
// complement, so a negative one takes ten bytes.
func (r *SendResult) size() int {
	n := 0
	if r.MsgId != "" {
		n += lenField(len(r.MsgId))
	}
	if r.UniqKey != "" {
		n += lenField(len(r.UniqKey))
	}
	if r.QueueId != 0 {
		n += 1 + protowire.SizeVarint(uint64(int64(r.QueueId)))
	}
	if r.QueueOffset != 0 {
		n += 1 + protowire.SizeVarint(uint64(r.QueueOffset))
	}
	if r.PhysicalOffset != 0 {
		n += 1 + protowire.SizeVarint(uint64(r.PhysicalOffset))
	}
	if r.StoreTimestampMs != 0 {
		n += 1 + protowire.SizeVarint(uint64(r.StoreTimestampMs))
	}
	if r.Duplicate {
		n += 2
	}
	return n
}

func (r *SendResult) appendMarshal(b []byte) []byte {
	if r.MsgId != "" {
		b = appendString(b, 1, r.MsgId)
	}
	if r.UniqKey != "" {
		b = appendString(b, 2, r.UniqKey)
	}
	if r.QueueId != 0 {
		b = appendVarint(append(b, tag(3, protowire.VarintType)), uint64(int64(r.QueueId)))
	}
	if r.QueueOffset != 0 {
		b = appendVarint(append(b, tag(4, protowire.VarintType)), uint64(r.QueueOffset))
	}
	if r.PhysicalOffset != 0 {
		b = appendVarint(append(b, tag(5, protowire.VarintType)), uint64(r.PhysicalOffset))
	}
	if r.StoreTimestampMs != 0 {
		b = appendVarint(append(b, tag(6, protowire.VarintType)), uint64(r.StoreTimestampMs))
	}
	if r.Duplicate {
		b = append(b, tag(7, protowire.VarintType), 1)
	}
	return b
}

func (e *Error) size() int {
	n := 0
	if e.Code != 0 {
		n += 1 + protowire.SizeVarint(uint64(int64(e.Code)))
	}
	if e.Message != "" {
		n += lenField(len(e.Message))
	}
	if e.Indeterminate {
		n += 2
	}
	return n
}

func (e *Error) appendMarshal(b []byte) []byte {
	if e.Code != 0 {
		b = appendVarint(append(b, tag(1, protowire.VarintType)), uint64(int64(e.Code)))
	}
	if e.Message != "" {
		b = appendString(b, 2, e.Message)
	}
	if e.Indeterminate {
		b = append(b, tag(3, protowire.VarintType), 1)
	}
	return b
}

// MarshalSize is SendResponse's, for a PullResponse: false only when x has
// unknown fields.
func (x *PullResponse) MarshalSize() (int, bool) {
	if len(x.unknownFields) > 0 {
		return 0, false
	}
	return x.SizeWithRecords(len(x.Records)), true
}

// AppendMarshal appends x's protobuf encoding to b, as proto.Marshal
// writes it.
func (x *PullResponse) AppendMarshal(b []byte) []byte {
	return x.AppendMarshalFunc(b, len(x.Records), func(b []byte) []byte { return append(b, x.Records...) })
}

// SizeWithRecords is the encoding's length when its records are n bytes
// (x.Records is not read).
func (x *PullResponse) SizeWithRecords(n int) int {
	size := 0
	if x.Status != 0 {
		size += 1 + protowire.SizeVarint(uint64(int64(x.Status)))
	}
	if n > 0 {
		size += lenField(n)
	}
	if x.RecordCount != 0 {
		size += 1 + protowire.SizeVarint(uint64(int64(x.RecordCount)))
	}
	for _, v := range [...]int64{x.NextOffset, x.MinOffset, x.MaxOffset} {
		if v != 0 {
			size += 1 + protowire.SizeVarint(uint64(v))
		}
	}
	return size
}

// AppendMarshalFunc appends x's encoding with n bytes of records that
// appendRecords appends (exactly n), instead of x.Records: a broker writes
// what it read from its log straight into the response, without gathering
// it in one slice first. x's unknown fields are not written.
func (x *PullResponse) AppendMarshalFunc(b []byte, n int, appendRecords func([]byte) []byte) []byte {
	if x.Status != 0 {
		b = appendVarint(append(b, tag(1, protowire.VarintType)), uint64(int64(x.Status)))
	}
	if n > 0 {
		b = appendVarint(append(b, tag(2, protowire.BytesType)), uint64(n))
		b = appendRecords(b)
	}
	if x.RecordCount != 0 {
		b = appendVarint(append(b, tag(3, protowire.VarintType)), uint64(int64(x.RecordCount)))
	}
	for i, v := range [...]int64{x.NextOffset, x.MinOffset, x.MaxOffset} {
		if v != 0 {
			b = appendVarint(append(b, tag(protowire.Number(4+i), protowire.VarintType)), uint64(v))
		}
	}
	return b
}

// AppendRecordsKey appends the key and length of a SendRequest's records
// field holding n bytes of records in one element: a producer that hands
// gRPC its records where it encoded them sends this, then the records,
// then AppendFieldsAfterRecords, instead of copying them into a
// proto.Marshal of the request.
func AppendRecordsKey(b []byte, n int) []byte {
	return appendVarint(append(b, tag(5, protowire.BytesType)), uint64(n))
}

// AppendFieldsAfterRecords appends x's topic, producer_group, request_id
// and attempt as proto.Marshal writes them (x.Messages, x.Records and
// unknown fields are not written). After AppendRecordsKey and the records
// they make a SendRequest's encoding with its fields out of number order,
// which protobuf decoders accept.
func (x *SendRequest) AppendFieldsAfterRecords(b []byte) []byte {
	if x.Topic != "" {
		b = appendString(b, 1, x.Topic)
	}
	if x.ProducerGroup != "" {
		b = appendString(b, 3, x.ProducerGroup)
	}
	if x.RequestId != 0 {
		b = appendVarint(append(b, tag(4, protowire.VarintType)), x.RequestId)
	}
	if x.Attempt != 0 {
		b = appendVarint(append(b, tag(6, protowire.VarintType)), uint64(x.Attempt))
	}
	return b
}

// MarshalSize is SendResponse.MarshalSize for a consumer's send-back call:
// in a retry storm a push consumer sends hundreds of requests per call,
// and proto.Marshal's reflection costs per request
// (docs/decisions/0008-hand-written-protobuf-codecs.md).
func (x *SendBackBatchRequest) MarshalSize() (int, bool) {
	if len(x.unknownFields) > 0 {
		return 0, false
	}
	n := 0
	for _, r := range x.Requests {
		if r == nil || len(r.unknownFields) > 0 || !utf8.ValidString(r.Group) || !utf8.ValidString(r.MsgId) || !utf8.ValidString(r.Reason) {
			return 0, false
		}
		n += lenField(r.size())
	}
	return n, true
}

// AppendMarshal is SendResponse.AppendMarshal for a send-back call. x must
// be one MarshalSize accepted, unchanged since.
func (x *SendBackBatchRequest) AppendMarshal(b []byte) []byte {
	for _, r := range x.Requests {
		b = appendVarint(append(b, tag(1, protowire.BytesType)), uint64(r.size()))
		b = r.appendMarshal(b)
	}
	return b
}

func (r *SendBackRequest) size() int {
	n := 0
	if r.Group != "" {
		n += lenField(len(r.Group))
	}
	if r.MsgId != "" {
		n += lenField(len(r.MsgId))
	}
	if r.PhysicalOffset != 0 {
		n += 1 + protowire.SizeVarint(uint64(r.PhysicalOffset))
	}
	if r.DelayLevel != 0 {
		n += 1 + protowire.SizeVarint(uint64(int64(r.DelayLevel)))
	}
	if r.MaxReconsumeTimes != 0 {
		n += 1 + protowire.SizeVarint(uint64(int64(r.MaxReconsumeTimes)))
	}
	if r.Reason != "" {
		n += lenField(len(r.Reason))
	}
	return n
}

func (r *SendBackRequest) appendMarshal(b []byte) []byte {
	if r.Group != "" {
		b = appendString(b, 1, r.Group)
	}
	if r.MsgId != "" {
		b = appendString(b, 2, r.MsgId)
	}
	if r.PhysicalOffset != 0 {
		b = appendVarint(append(b, tag(3, protowire.VarintType)), uint64(r.PhysicalOffset))
	}
	if r.DelayLevel != 0 {
		b = appendVarint(append(b, tag(4, protowire.VarintType)), uint64(int64(r.DelayLevel)))
	}
	if r.MaxReconsumeTimes != 0 {
		b = appendVarint(append(b, tag(5, protowire.VarintType)), uint64(int64(r.MaxReconsumeTimes)))
	}
	if r.Reason != "" {
		b = appendString(b, 6, r.Reason)
	}
	return b
}
