package remotingapi

import (
	"encoding/binary"
	"fmt"
	"math"
)

// batchFixedLen is the size of a batch entry without its body and
// properties: totalSize, magic, bodyCRC, flag, bodyLen (int32 each) and
// propLen (int16).
const batchFixedLen = 5*4 + 2

// batchEntry is one message of a SEND_BATCH_MESSAGE body.
type batchEntry struct {
	Flag       int32
	Body       []byte // aliases the decoded buffer
	Properties []byte // as sent (key 0x01 value 0x02 ...); aliases the buffer
}

// decodeBatch splits a SEND_BATCH_MESSAGE body (Java's
// MessageDecoder.encodeMessages)
// into its messages: each is [totalSize int32][magic int32][bodyCRC int32]
// [flag int32][bodyLen int32][body][propLen int16][properties], totalSize
// counting the whole entry. Magic and bodyCRC are not checked (the Go
// client sends 0 for both). An entry whose lengths disagree, run past the
// end or are negative, and an empty body, are errors wrapping
// errBadHeader. It never panics.
func decodeBatch(b []byte) ([]batchEntry, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: batch body is empty", errBadHeader)
	}
	var out []batchEntry
	for off := 0; off < len(b); {
		e, n, err := decodeBatchEntry(b[off:])
		if err != nil {
			return nil, fmt.Errorf("%w: batch message %d at byte %d: %s", errBadHeader, len(out), off, err)
		}
		out = append(out, e)
		off += n
	}
	return out, nil
}

// decodeBatchEntry decodes the entry at the front of b and returns its size.
func decodeBatchEntry(b []byte) (batchEntry, int, error) {
	if len(b) < batchFixedLen {
		return batchEntry{}, 0, fmt.Errorf("%d bytes left, an entry has at least %d", len(b), batchFixedLen)
	}
	total := int64(int32(binary.BigEndian.Uint32(b)))
	bodyLen := int64(int32(binary.BigEndian.Uint32(b[16:])))
	switch {
	case total < batchFixedLen || total > int64(len(b)):
		return batchEntry{}, 0, fmt.Errorf("totalSize %d: want %d..%d", total, batchFixedLen, len(b))
	case bodyLen < 0 || bodyLen > total-batchFixedLen:
		return batchEntry{}, 0, fmt.Errorf("bodyLen %d does not fit totalSize %d", bodyLen, total)
	}
	propOff := 20 + bodyLen
	propLen := int64(int16(binary.BigEndian.Uint16(b[propOff:])))
	if propLen < 0 || propOff+2+propLen != total {
		return batchEntry{}, 0, fmt.Errorf("totalSize %d, bodyLen %d and propLen %d disagree", total, bodyLen, propLen)
	}
	return batchEntry{
		Flag:       int32(binary.BigEndian.Uint32(b[12:])),
		Body:       b[20:propOff:propOff],
		Properties: b[propOff+2 : total : total],
	}, int(total), nil
}

// appendBatch appends entries in the batch body format, as the Go client
// writes them (magic and bodyCRC 0). Properties longer than an int16 holds
// are an error.
func appendBatch(dst []byte, entries []batchEntry) ([]byte, error) {
	for i, e := range entries {
		if len(e.Properties) > math.MaxInt16 {
			return nil, fmt.Errorf("remotingapi: batch message %d: properties are %d bytes, at most %d", i, len(e.Properties), math.MaxInt16)
		}
		total := batchFixedLen + len(e.Body) + len(e.Properties)
		if total > math.MaxInt32 {
			return nil, fmt.Errorf("remotingapi: batch message %d is %d bytes", i, total)
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(total))
		dst = binary.BigEndian.AppendUint32(dst, 0)
		dst = binary.BigEndian.AppendUint32(dst, 0)
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.Flag))
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.Body)))
		dst = append(dst, e.Body...)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(e.Properties)))
		dst = append(dst, e.Properties...)
	}
	return dst, nil
}
