package message

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is; the errors this package returns
// wrap them with the details (sizes, offsets, field names).
var (
	// ErrInvalidRecord marks bytes that are not a well-formed record: a bad
	// magic code, lengths that do not add up to TOTALSIZE, a checksum
	// mismatch, and so on. Every *CheckError unwraps to it.
	ErrInvalidRecord = errors.New("message: invalid record")

	// ErrTruncated marks a buffer shorter than a length field says it should
	// be (TOTALSIZE larger than the bytes at hand, or fewer than 8 bytes).
	// A *CheckError for a truncated record unwraps to both ErrTruncated and
	// ErrInvalidRecord.
	ErrTruncated = errors.New("message: truncated record")

	// ErrBlank marks the 8-byte end-of-segment filler (MagicBlank) where a
	// record was expected. A *CheckError for a filler unwraps to both ErrBlank
	// and ErrInvalidRecord.
	ErrBlank = errors.New("message: end-of-segment filler, not a record")

	// ErrEmptyTopic: a record needs a topic.
	ErrEmptyTopic = errors.New("message: empty topic")

	// ErrTopicTooLong: a V1 record's topic is at most MaxTopicLen bytes.
	ErrTopicTooLong = errors.New("message: topic too long")

	// ErrPropertiesTooLarge: the encoded properties, including the
	// __CRC32# tail when there is one, are at most MaxPropertiesLen bytes.
	ErrPropertiesTooLarge = errors.New("message: properties too large")

	// ErrInvalidProperty: a property key or value contains one of the
	// separator bytes 0x01 or 0x02, which cannot be encoded.
	ErrInvalidProperty = errors.New("message: invalid property")

	// ErrRecordTooLarge: the encoded record would not fit TOTALSIZE (int32).
	ErrRecordTooLarge = errors.New("message: record too large")

	// ErrNoCRC: SealCRC was given a record without a __CRC32# tail.
	ErrNoCRC = errors.New("message: record has no __CRC32# tail")

	// ErrInvalidMsgID: a string that is not an offset message id.
	ErrInvalidMsgID = errors.New("message: invalid offset message id")
)

// CheckError describes why bytes are not a valid record. It is returned by
// Check, Decode, DecodeInto, DecodeAll and SealCRC. It unwraps to
// ErrInvalidRecord, and also to ErrTruncated or ErrBlank when that is the
// cause.
type CheckError struct {
	// Field is the §3.1 name of the field at fault: "TOTALSIZE",
	// "MAGICCODE", "BODYCRC", "PHYSICALOFFSET", "BORNHOST", "STOREHOST",
	// "BODYLEN", "TOPICLEN", "PROPERTIESLEN" or "__CRC32#".
	Field string
	// Reason is a human-readable explanation, with the values involved:
	// "body CRC mismatch: stored 0x1A2B3C4D computed 0x0A2B3C4D".
	Reason string

	kind error // ErrTruncated, ErrBlank or nil
}

func (e *CheckError) Error() string {
	return "message: invalid record: " + e.Field + ": " + e.Reason
}

// Unwrap returns ErrInvalidRecord, plus ErrTruncated or ErrBlank when that
// is the cause.
func (e *CheckError) Unwrap() []error {
	if e.kind != nil {
		return []error{ErrInvalidRecord, e.kind}
	}
	return []error{ErrInvalidRecord}
}

func invalid(field, format string, args ...any) error {
	return &CheckError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

func truncated(field, format string, args ...any) error {
	return &CheckError{Field: field, Reason: fmt.Sprintf(format, args...), kind: ErrTruncated}
}
