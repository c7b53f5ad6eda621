package message

import (
	"bytes"
	"iter"
)

// View reads the fields of an encoded record in place, without copying or
// allocating: the dispatcher and filters use it on log bytes. It is valid
// as long as the bytes are not modified.
type View struct {
	rec []byte
	l   layout
}

// NewView checks the structure of the record at the front of b like Decode
// (not its checksums) and returns a view of it.
func NewView(b []byte) (View, error) {
	l, err := parseLayout(b)
	if err != nil {
		return View{}, err
	}
	return View{rec: b[:l.size:l.size], l: l}, nil
}

// Bytes returns the record's bytes (TOTALSIZE of them).
func (v View) Bytes() []byte { return v.rec }

// Topic returns TOPIC.
func (v View) Topic() []byte { return v.rec[v.l.topicOff : v.l.topicOff+v.l.topicLen] }

// QueueID returns QUEUEID.
func (v View) QueueID() int32 { return QueueIDOf(v.rec) }

// QueueOffset returns QUEUEOFFSET.
func (v View) QueueOffset() int64 { return QueueOffsetOf(v.rec) }

// SysFlag returns SYSFLAG.
func (v View) SysFlag() int32 { return v.l.sysFlag }

// StoreTimestamp returns STORETIMESTAMP.
func (v View) StoreTimestamp() int64 { return StoreTimestampOf(v.rec) }

// Body returns BODY as stored.
func (v View) Body() []byte { return v.rec[v.l.bodyOff : v.l.bodyOff+v.l.bodyLen] }

// PropertiesLen returns the size of the encoded properties (PROPERTIESLEN).
func (v View) PropertiesLen() int { return v.l.propsLen }

// HasCRC reports whether the record ends with a __CRC32# tail.
func (v View) HasCRC() bool { return v.l.hasCRC(v.rec) }

// Property returns the value of the property named key, by the rules of
// Properties.Get on the decoded message (the last pair with that key
// wins; malformed pairs are skipped).
func (v View) Property(key string) (value []byte, ok bool) {
	for k, val := range v.All() {
		if string(k) == key {
			value, ok = val, true
		}
	}
	return value, ok
}

// All yields every well-formed property pair in stored order (a key may
// repeat: the last one is what Property returns).
func (v View) All() iter.Seq2[[]byte, []byte] {
	return func(yield func(k, val []byte) bool) {
		s := v.rec[v.l.propsOff : v.l.propsOff+v.l.propsLen]
		for len(s) > 0 {
			piece, rest, _ := bytes.Cut(s, []byte{propertySeparator})
			s = rest
			k, val, found := bytes.Cut(piece, []byte{nameValueSeparator})
			if !found || bytes.IndexByte(val, nameValueSeparator) >= 0 {
				continue
			}
			if !yield(k, val) {
				return
			}
		}
	}
}
