package message

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"net/netip"
	"slices"
	"strings"
)

// Magic codes and sizes of the stored record (Java's MessageDecoder and
// CommitLog).
const (
	MagicV1    int32 = -626843481 // 0xDAA320A7: 1-byte topic length; the only version written
	MagicV2    int32 = -626843477 // 0xDAA320AB: 2-byte topic length; decoded, never written
	MagicBlank int32 = -875286124 // 0xCBD43194: the end-of-segment filler

	// BlankSize is the size of the end-of-segment filler:
	// [remaining int32][MagicBlank int32].
	BlankSize = 8

	// CRCTailSize is the size of the __CRC32# tail property:
	// "__CRC32#" 0x01, ten decimal digits, 0x02.
	CRCTailSize = len(PropCRC) + 1 + crcDigits + 1

	// MaxTopicLen is the longest topic a V1 record carries, in bytes (Java
	// reads TOPICLEN as a signed byte).
	MaxTopicLen = 127

	// MaxPropertiesLen is the most properties bytes a record carries,
	// including the __CRC32# tail (PROPERTIESLEN is a signed int16).
	MaxPropertiesLen = math.MaxInt16

	// MinRecordSize is the size of a V1 record with IPv4 hosts and an empty
	// body, topic and properties: the fixed part of the layout. Each IPv6
	// host adds 12 bytes.
	MinRecordSize = 91
)

// SYSFLAG bits (§3.2).
const (
	FlagCompressed      = 0x1 // body compressed (zlib for Go clients)
	FlagMultiTags       = 0x2 // the topic's filter type is MULTI_TAG
	TransactionNone     = 0x0 // not transactional
	TransactionPrepared = 0x4 // half message
	TransactionCommit   = 0x8
	TransactionRollback = 0xC
	TransactionMask     = 0xC // SysFlag & TransactionMask is the transaction type
	FlagBornHostV6      = 0x10
	FlagStoreHostV6     = 0x20
)

// Byte offsets of the fixed fields. Fields after BORNHOST move by 12 bytes
// for each IPv6 host before them.
const (
	offTotalSize      = 0
	offMagic          = 4
	offBodyCRC        = 8
	offQueueID        = 12
	offFlag           = 16
	offQueueOffset    = 20
	offPhysicalOffset = 28
	offSysFlag        = 36
	offBornTimestamp  = 40
	offBornHost       = 48

	hostV4Len   = 4 + 4  // address + port
	hostV6Len   = 16 + 4 // address + port
	hostV6Extra = hostV6Len - hostV4Len

	bodyCRCMask = 0x7FFFFFFF // Java's UtilAll.crc32 keeps 31 bits

	magicV1    uint32 = 0xDAA320A7 // MagicV1 as stored
	magicBlank uint32 = 0xCBD43194 // MagicBlank as stored
)

// Message is a decoded record: every field of the stored layout (§3.1)
// except MAGICCODE and the lengths, which the encoder derives.
type Message struct {
	StoreSize                 int32 // TOTALSIZE; computed by Append
	BodyCRC                   int32 // CRC-32/IEEE(Body) & 0x7FFFFFFF; computed by Append
	QueueID                   int32
	Flag                      int32 // user flag
	QueueOffset               int64
	PhysicalOffset            int64
	SysFlag                   int32 // §3.2; Append sets the host bits from the address families
	BornTimestamp             int64 // ms
	BornHost                  netip.AddrPort
	StoreTimestamp            int64 // ms
	StoreHost                 netip.AddrPort
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	Body                      []byte // as stored: still compressed when SysFlag&FlagCompressed != 0
	Topic                     string
	Properties                Properties
}

// Tags returns the TAGS property, or "".
func (m *Message) Tags() string {
	v, _ := m.Properties.Get(PropTags)
	return v
}

// Keys returns the KEYS property split on spaces, without empty keys; nil if
// there are none.
func (m *Message) Keys() []string {
	v, _ := m.Properties.Get(PropKeys)
	var keys []string
	for k := range strings.SplitSeq(v, " ") {
		if k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// UniqKey returns the UNIQ_KEY property (the client message id), or "".
func (m *Message) UniqKey() string {
	v, _ := m.Properties.Get(PropUniqKey)
	return v
}

// MsgID returns the message id a client sees: UNIQ_KEY when it is present
// and not empty, else OffsetMsgID.
func (m *Message) MsgID() string {
	if v := m.UniqKey(); v != "" {
		return v
	}
	return m.OffsetMsgID()
}

// OffsetMsgID returns the offset message id of the record:
// EncodeOffsetMsgID(m.StoreHost, m.PhysicalOffset).
func (m *Message) OffsetMsgID() string {
	return EncodeOffsetMsgID(m.StoreHost, m.PhysicalOffset)
}

// hostLen is the stored size of a host: IPv4 (also for an invalid AddrPort,
// which is stored as 0.0.0.0:0) or IPv6 (including IPv4-mapped IPv6).
func hostLen(ap netip.AddrPort) int {
	if a := ap.Addr(); a.IsValid() && !a.Is4() {
		return hostV6Len
	}
	return hostV4Len
}

func appendHost(dst []byte, ap netip.AddrPort) []byte {
	a := ap.Addr()
	switch {
	case !a.IsValid():
		return append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	case a.Is4():
		b := a.As4()
		dst = append(dst, b[:]...)
	default:
		b := a.As16()
		dst = append(dst, b[:]...)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(ap.Port()))
}

// EncodedSize returns the size of m's record as Append writes it, or why m
// cannot be encoded: ErrEmptyTopic, ErrTopicTooLong, ErrInvalidProperty,
// ErrPropertiesTooLarge or ErrRecordTooLarge (wrapped with the details).
// A __CRC32# pair in m.Properties is not counted (Append drops it); withCRC
// counts the CRCTailSize bytes of the tail.
func EncodedSize(m *Message, withCRC bool) (int, error) { return encodedSize(m, withCRC, "") }

// encodedSize is EncodedSize with an extra UNIQ_KEY pair when uniqKey is
// not empty.
func encodedSize(m *Message, withCRC bool, uniqKey string) (int, error) {
	switch {
	case len(m.Topic) == 0:
		return 0, ErrEmptyTopic
	case len(m.Topic) > MaxTopicLen:
		return 0, fmt.Errorf("message: topic is %d bytes, at most %d: %w", len(m.Topic), MaxTopicLen, ErrTopicTooLong)
	}
	propsLen, err := encodedPropertiesLen(m.Properties)
	if err != nil {
		return 0, err
	}
	if withCRC {
		propsLen += CRCTailSize
	}
	if uniqKey != "" {
		if hasSeparator(uniqKey) {
			return 0, fmt.Errorf("message: UNIQ_KEY %q contains 0x01 or 0x02: %w", uniqKey, ErrInvalidProperty)
		}
		propsLen += len(PropUniqKey) + len(uniqKey) + 2
	}
	if propsLen > MaxPropertiesLen {
		return 0, fmt.Errorf("message: properties are %d bytes, at most %d: %w", propsLen, MaxPropertiesLen, ErrPropertiesTooLarge)
	}
	size := MinRecordSize - 2*hostV4Len + hostLen(m.BornHost) + hostLen(m.StoreHost) +
		len(m.Body) + len(m.Topic) + propsLen
	if size > math.MaxInt32 || len(m.Body) > math.MaxInt32 {
		return 0, fmt.Errorf("message: record would be %d bytes: %w", size, ErrRecordTooLarge)
	}
	return size, nil
}

// encodedPropertiesLen is the size of p as Append writes it: every pair but
// __CRC32#.
func encodedPropertiesLen(p Properties) (int, error) {
	n := 0
	for _, kv := range p {
		if kv.Key == PropCRC {
			continue
		}
		if hasSeparator(kv.Key) || hasSeparator(kv.Value) {
			// A copy of the key: the error must not keep the properties'
			// backing array reachable, or every caller's would escape.
			return 0, fmt.Errorf("message: property %q: key or value contains 0x01 or 0x02: %w", strings.Clone(kv.Key), ErrInvalidProperty)
		}
		n += len(kv.Key) + len(kv.Value) + 2
	}
	return n, nil
}

func hasSeparator(s string) bool {
	return strings.IndexByte(s, nameValueSeparator) >= 0 || strings.IndexByte(s, propertySeparator) >= 0
}

// Append appends m's record to dst: magic MagicV1, TOTALSIZE and BODYCRC
// computed, SYSFLAG with its host bits (FlagBornHostV6, FlagStoreHostV6) set
// from the address families of BornHost and StoreHost; every other field as
// in m. m.StoreSize and m.BodyCRC are ignored and m is not modified.
//
// An invalid (zero) AddrPort is stored as 0.0.0.0:0; an IPv6 zone is
// dropped. The key __CRC32# is reserved: a pair with that key in
// m.Properties is never written. With withCRC, Append writes the __CRC32#
// tail as the last property and seals it (see SealCRC); stamping fields
// afterwards (SetPhysicalOffset, ...) needs another SealCRC.
//
// Append does not allocate when dst has EncodedSize bytes of spare capacity.
// On error dst is returned unchanged.
func Append(dst []byte, m *Message, withCRC bool) ([]byte, error) {
	return appendRecord(dst, m, withCRC, withCRC, "")
}

// AppendUnsealed is Append with a __CRC32# tail whose digits are not yet
// computed, for a writer that stamps the record's offsets and time and then
// calls SealCRC anyway (the commit log does): it saves one CRC pass over the
// record. The record fails Check until it is sealed. A non-empty uniqKey is
// written as a UNIQ_KEY property after m's (a broker giving an id to a
// message that has none), without copying m.Properties.
func AppendUnsealed(dst []byte, m *Message, uniqKey string) ([]byte, error) {
	return appendRecord(dst, m, true, false, uniqKey)
}

// UnsealedSize returns the size of the record AppendUnsealed writes for m
// and uniqKey, or why it cannot (the errors of EncodedSize).
func UnsealedSize(m *Message, uniqKey string) (int, error) { return encodedSize(m, true, uniqKey) }

func appendRecord(dst []byte, m *Message, withCRC, seal bool, uniqKey string) ([]byte, error) {
	size, err := encodedSize(m, withCRC, uniqKey)
	if err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, size)
	start := len(dst)
	sysFlag := m.SysFlag &^ (FlagBornHostV6 | FlagStoreHostV6)
	if hostLen(m.BornHost) == hostV6Len {
		sysFlag |= FlagBornHostV6
	}
	if hostLen(m.StoreHost) == hostV6Len {
		sysFlag |= FlagStoreHostV6
	}
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(size))
	dst = be.AppendUint32(dst, magicV1)
	bodyCRCAt := len(dst)
	dst = be.AppendUint32(dst, 0) // BODYCRC: computed over the copy below
	dst = be.AppendUint32(dst, uint32(m.QueueID))
	dst = be.AppendUint32(dst, uint32(m.Flag))
	dst = be.AppendUint64(dst, uint64(m.QueueOffset))
	dst = be.AppendUint64(dst, uint64(m.PhysicalOffset))
	dst = be.AppendUint32(dst, uint32(sysFlag))
	dst = be.AppendUint64(dst, uint64(m.BornTimestamp))
	dst = appendHost(dst, m.BornHost)
	dst = be.AppendUint64(dst, uint64(m.StoreTimestamp))
	dst = appendHost(dst, m.StoreHost)
	dst = be.AppendUint32(dst, uint32(m.ReconsumeTimes))
	dst = be.AppendUint64(dst, uint64(m.PreparedTransactionOffset))
	dst = be.AppendUint32(dst, uint32(len(m.Body)))
	bodyAt := len(dst)
	dst = append(dst, m.Body...)
	// Over the copy, not m.Body: crc32 calls through a function variable,
	// so its argument escapes, and with it (to escape analysis) everything
	// m points to, the callers' properties included.
	be.PutUint32(dst[bodyCRCAt:], crc32.ChecksumIEEE(dst[bodyAt:])&bodyCRCMask)
	dst = append(dst, byte(len(m.Topic)))
	dst = append(dst, m.Topic...)
	propsLenAt := len(dst)
	dst = append(dst, 0, 0)
	for _, kv := range m.Properties {
		if kv.Key != PropCRC {
			dst = appendProperty(dst, kv.Key, kv.Value)
		}
	}
	if uniqKey != "" {
		dst = appendProperty(dst, PropUniqKey, uniqKey)
	}
	if withCRC {
		dst = append(dst, crcTailTemplate...)
	}
	be.PutUint16(dst[propsLenAt:], uint16(len(dst)-propsLenAt-2))
	if seal {
		rec := dst[start:]
		writeCRCDigits(rec[len(rec)-CRCTailSize:], recordCRC(rec))
	}
	return dst, nil
}

// AppendBlank appends the BlankSize-byte end-of-segment filler: remaining
// as an int32, then MagicBlank. remaining is the number of bytes left in the
// segment at the filler's position, the filler included.
func AppendBlank(dst []byte, remaining int32) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(remaining))
	return binary.BigEndian.AppendUint32(dst, magicBlank)
}

// The fixed-offset accessors and setters below work on an encoded record
// (one that Append wrote or that passed Check) and do not allocate. They do
// not verify the record: given fewer bytes than the field's end they panic
// with an index-out-of-range error, as a slice expression would. The setters
// do not reseal the __CRC32# tail: call SealCRC after the last of them, or
// use Stamp.

// RecordSize reads TOTALSIZE and MAGICCODE from the first 8 bytes of b. ok
// is false when b is shorter than 8 bytes. For the filler, magic is
// MagicBlank and size the bytes left in the segment.
func RecordSize(b []byte) (size int32, magic int32, ok bool) {
	if len(b) < 8 {
		return 0, 0, false
	}
	return int32(binary.BigEndian.Uint32(b[offTotalSize:])), int32(binary.BigEndian.Uint32(b[offMagic:])), true
}

// storeTimestampOff returns the offset of STORETIMESTAMP, which follows the
// born host.
func storeTimestampOff(rec []byte) int {
	if sysFlagOf(rec)&FlagBornHostV6 != 0 {
		return offBornHost + hostV6Len
	}
	return offBornHost + hostV4Len
}

// reconsumeTimesOff returns the offset of RECONSUMETIMES, which follows the
// store host.
func reconsumeTimesOff(rec []byte) int {
	off := storeTimestampOff(rec) + 8 + hostV4Len
	if sysFlagOf(rec)&FlagStoreHostV6 != 0 {
		off += hostV6Extra
	}
	return off
}

func sysFlagOf(rec []byte) int32 { return int32(binary.BigEndian.Uint32(rec[offSysFlag:])) }

// QueueIDOf returns QUEUEID.
func QueueIDOf(rec []byte) int32 { return int32(binary.BigEndian.Uint32(rec[offQueueID:])) }

// SysFlagOf returns SYSFLAG.
func SysFlagOf(rec []byte) int32 { return sysFlagOf(rec) }

// QueueOffsetOf returns QUEUEOFFSET.
func QueueOffsetOf(rec []byte) int64 { return int64(binary.BigEndian.Uint64(rec[offQueueOffset:])) }

// PhysicalOffsetOf returns PHYSICALOFFSET.
func PhysicalOffsetOf(rec []byte) int64 {
	return int64(binary.BigEndian.Uint64(rec[offPhysicalOffset:]))
}

// BornTimestampOf returns BORNTIMESTAMP.
func BornTimestampOf(rec []byte) int64 {
	return int64(binary.BigEndian.Uint64(rec[offBornTimestamp:]))
}

// StoreTimestampOf returns STORETIMESTAMP, whose offset depends on the born
// host's family (SYSFLAG).
func StoreTimestampOf(rec []byte) int64 {
	return int64(binary.BigEndian.Uint64(rec[storeTimestampOff(rec):]))
}

// ReconsumeTimesOf returns RECONSUMETIMES.
func ReconsumeTimesOf(rec []byte) int32 {
	return int32(binary.BigEndian.Uint32(rec[reconsumeTimesOff(rec):]))
}

// SetQueueID writes QUEUEID.
func SetQueueID(rec []byte, v int32) {
	binary.BigEndian.PutUint32(rec[offQueueID:], uint32(v))
}

// SetStoreHost writes STOREHOST in place when ap has the address family
// the record was encoded with (hostLen(ap) == the field's size) and
// reports whether it did; otherwise the record must be encoded again.
func SetStoreHost(rec []byte, ap netip.AddrPort) bool {
	v6 := sysFlagOf(rec)&FlagStoreHostV6 != 0
	if (hostLen(ap) == hostV6Len) != v6 {
		return false
	}
	off := storeTimestampOff(rec) + 8
	appendHost(rec[off:off], ap) // writes into rec: the field has the room
	return true
}

// SetQueueOffset writes QUEUEOFFSET.
func SetQueueOffset(rec []byte, v int64) {
	binary.BigEndian.PutUint64(rec[offQueueOffset:], uint64(v))
}

// SetPhysicalOffset writes PHYSICALOFFSET.
func SetPhysicalOffset(rec []byte, v int64) {
	binary.BigEndian.PutUint64(rec[offPhysicalOffset:], uint64(v))
}

// SetStoreTimestamp writes STORETIMESTAMP (ms).
func SetStoreTimestamp(rec []byte, ms int64) {
	binary.BigEndian.PutUint64(rec[storeTimestampOff(rec):], uint64(ms))
}

// SetReconsumeTimes writes RECONSUMETIMES.
func SetReconsumeTimes(rec []byte, v int32) {
	binary.BigEndian.PutUint32(rec[reconsumeTimesOff(rec):], uint32(v))
}

// SetPreparedTransactionOffset writes PREPARED TRANSACTION OFFSET.
func SetPreparedTransactionOffset(rec []byte, v int64) {
	binary.BigEndian.PutUint64(rec[reconsumeTimesOff(rec)+4:], uint64(v))
}

// Stamp writes the three fields the commit log assigns at append time,
// PHYSICALOFFSET, QUEUEOFFSET and STORETIMESTAMP, then reseals the __CRC32#
// tail if the record has one. It does not allocate. The error is that of
// SealCRC for a record that is not well formed; the fields are written
// anyway (rec must hold at least the fixed header).
func Stamp(rec []byte, physOff, queueOff, storeMS int64) error {
	SetPhysicalOffset(rec, physOff)
	SetQueueOffset(rec, queueOff)
	SetStoreTimestamp(rec, storeMS)
	l, err := parseLayout(rec)
	if err != nil {
		return err
	}
	if l.hasCRC(rec) {
		l.seal(rec)
	}
	return nil
}
