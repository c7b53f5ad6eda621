package message

import (
	"encoding/binary"
	"hash/crc32"
)

const (
	crcDigits = 10
	// crcTailTemplate is an unsealed __CRC32# tail: Append writes it, then
	// fills in the digits.
	crcTailTemplate = PropCRC + "\x01" + "0000000000" + "\x02"
)

// layout holds the positions of a record's variable fields, found by
// parseLayout after it has checked every length against TOTALSIZE and the
// buffer.
type layout struct {
	size         int // TOTALSIZE
	magic        int32
	sysFlag      int32
	storeTsOff   int
	storeHostOff int
	reconsumeOff int
	bodyOff      int
	bodyLen      int
	topicOff     int
	topicLen     int
	propsOff     int
	propsLen     int
}

// parseLayout checks the structure of the record at the front of b and
// returns where its fields are: TOTALSIZE at least the minimum and within
// b, magic V1 or V2, each length field non-negative and all of them adding
// up exactly to TOTALSIZE, V1 TOPICLEN at most MaxTopicLen, host ports in
// 0..65535. It reads no byte outside b and does not allocate unless it
// fails. It does not check checksums.
func parseLayout(b []byte) (layout, error) {
	var l layout
	be := binary.BigEndian
	if len(b) < 8 {
		return l, truncated("TOTALSIZE", "%d bytes, need 8 to read TOTALSIZE and MAGICCODE", len(b))
	}
	size := int32(be.Uint32(b[offTotalSize:]))
	l.magic = int32(be.Uint32(b[offMagic:]))
	switch {
	case l.magic == MagicBlank:
		return l, &CheckError{Field: "MAGICCODE", Reason: "end-of-segment filler (BLANK magic 0xCBD43194)", kind: ErrBlank}
	case l.magic != MagicV1 && l.magic != MagicV2:
		return l, invalid("MAGICCODE", "0x%08X is not a record magic code", uint32(l.magic))
	case size < MinRecordSize:
		return l, invalid("TOTALSIZE", "%d is below the minimum record size %d", size, MinRecordSize)
	case int64(size) > int64(len(b)):
		return l, truncated("TOTALSIZE", "record of %d bytes, only %d available", size, len(b))
	}
	l.size = int(size)
	rec := b[:l.size]

	l.sysFlag = int32(be.Uint32(rec[offSysFlag:]))
	l.storeTsOff = offBornHost + hostV4Len
	if l.sysFlag&FlagBornHostV6 != 0 {
		l.storeTsOff += hostV6Extra
	}
	l.storeHostOff = l.storeTsOff + 8
	l.reconsumeOff = l.storeHostOff + hostV4Len
	if l.sysFlag&FlagStoreHostV6 != 0 {
		l.reconsumeOff += hostV6Extra
	}
	bodyLenOff := l.reconsumeOff + 4 + 8
	l.bodyOff = bodyLenOff + 4
	topicLenSize := 1
	if l.magic == MagicV2 {
		topicLenSize = 2
	}
	fixed := l.bodyOff + topicLenSize + 2 // everything but body, topic and properties
	if fixed > l.size {
		return l, invalid("TOTALSIZE", "%d is below the %d bytes of fixed fields for SYSFLAG 0x%X", l.size, fixed, l.sysFlag)
	}

	bodyLen := int32(be.Uint32(rec[bodyLenOff:]))
	if bodyLen < 0 || int(bodyLen) > l.size-fixed {
		return l, invalid("BODYLEN", "%d does not fit TOTALSIZE %d", bodyLen, l.size)
	}
	l.bodyLen = int(bodyLen)

	topicLenOff := l.bodyOff + l.bodyLen
	if topicLenSize == 1 {
		l.topicLen = int(rec[topicLenOff])
		if l.topicLen > MaxTopicLen {
			return l, invalid("TOPICLEN", "%d exceeds %d (Java reads a V1 TOPICLEN as a signed byte)", l.topicLen, MaxTopicLen)
		}
	} else {
		t := int16(be.Uint16(rec[topicLenOff:]))
		if t < 0 {
			return l, invalid("TOPICLEN", "negative V2 topic length %d", t)
		}
		l.topicLen = int(t)
	}
	l.topicOff = topicLenOff + topicLenSize
	propsLenOff := l.topicOff + l.topicLen
	if propsLenOff+2 > l.size {
		return l, invalid("TOPICLEN", "%d does not fit TOTALSIZE %d", l.topicLen, l.size)
	}
	propsLen := int16(be.Uint16(rec[propsLenOff:]))
	l.propsOff = propsLenOff + 2
	if propsLen < 0 || l.propsOff+int(propsLen) != l.size {
		return l, invalid("PROPERTIESLEN", "%d: the fields add up to %d bytes, TOTALSIZE is %d",
			propsLen, l.propsOff+int(propsLen), l.size)
	}
	l.propsLen = int(propsLen)

	if p := int32(be.Uint32(rec[l.storeTsOff-4:])); p < 0 || p > 0xFFFF {
		return l, invalid("BORNHOST", "port %d out of range", p)
	}
	if p := int32(be.Uint32(rec[l.reconsumeOff-4:])); p < 0 || p > 0xFFFF {
		return l, invalid("STOREHOST", "port %d out of range", p)
	}
	return l, nil
}

// hasCRC reports whether the properties end with a well-formed __CRC32#
// tail: the last CRCTailSize bytes are "__CRC32#" 0x01, ten ASCII digits and
// 0x02, and they start a property (they are the whole properties, or follow
// a 0x02).
func (l *layout) hasCRC(rec []byte) bool {
	if l.propsLen < CRCTailSize {
		return false
	}
	tailOff := l.size - CRCTailSize
	if l.propsLen > CRCTailSize && rec[tailOff-1] != propertySeparator {
		return false
	}
	tail := rec[tailOff:l.size]
	if !tailMarked(tail) {
		return false
	}
	for _, c := range tail[len(PropCRC)+1 : CRCTailSize-1] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// tailMarked reports whether the CRCTailSize bytes of tail are framed as
// a __CRC32# tail: "__CRC32#" 0x01 before the digits, 0x02 after them.
func tailMarked(tail []byte) bool {
	return string(tail[:len(PropCRC)]) == PropCRC && tail[len(PropCRC)] == nameValueSeparator &&
		tail[CRCTailSize-1] == propertySeparator
}

// storedCRC reads the digits of a tail that hasCRC accepted.
func (l *layout) storedCRC(rec []byte) uint64 {
	digits := rec[l.size-1-crcDigits : l.size-1]
	var v uint64
	for i := crcDigits - 1; i >= 0; i-- { // least significant digit first
		v = v*10 + uint64(digits[i]-'0')
	}
	return v
}

// seal writes the CRC of rec[:size-CRCTailSize] into a tail that hasCRC
// accepted.
func (l *layout) seal(rec []byte) {
	rec = rec[:l.size]
	writeCRCDigits(rec[l.size-CRCTailSize:], recordCRC(rec))
}

// recordCRC is the value the __CRC32# tail of rec holds: CRC-32/IEEE of
// every byte before the tail, AND 0x7FFFFFFF like Java's UtilAll.crc32.
func recordCRC(rec []byte) uint32 {
	return crc32.ChecksumIEEE(rec[:len(rec)-CRCTailSize]) & bodyCRCMask
}

// writeCRCDigits writes crc as ten decimal digits, least significant first,
// into a CRCTailSize-byte tail.
func writeCRCDigits(tail []byte, crc uint32) {
	digits := tail[len(PropCRC)+1 : len(PropCRC)+1+crcDigits]
	// Two independent chains of five divisions are faster than one of ten.
	lo, hi := crc%100000, crc/100000
	for i := range 5 {
		digits[i] = byte('0' + lo%10)
		digits[5+i] = byte('0' + hi%10)
		lo /= 10
		hi /= 10
	}
}

// Check validates the record at the front of rec without allocating (unless
// it fails) and returns nil or a *CheckError. Bytes after TOTALSIZE are
// ignored. It verifies:
//
//   - TOTALSIZE is at least MinRecordSize and within rec;
//   - MAGICCODE is MagicV1 or MagicV2 (V2, written by Java brokers for
//     topics over 127 bytes, is accepted so such logs can be read);
//   - BODYLEN, TOPICLEN and PROPERTIESLEN add up exactly to TOTALSIZE, a V1
//     TOPICLEN is at most MaxTopicLen, and both host ports are in 0..65535;
//   - BODYCRC equals CRC-32/IEEE(body) & 0x7FFFFFFF;
//   - PHYSICALOFFSET equals physOff, unless physOff < 0;
//   - the __CRC32# tail, when present, holds the CRC of every byte before
//     it; with requireCRC a record without the tail fails.
//
// A record that passes Check decodes without error. The filler fails with
// an error that matches ErrBlank, a record longer than rec with one that
// matches ErrTruncated; every failure matches ErrInvalidRecord.
func Check(rec []byte, physOff int64, requireCRC bool) error {
	l, err := parseLayout(rec)
	if err != nil {
		return err
	}
	rec = rec[:l.size]
	stored := binary.BigEndian.Uint32(rec[offBodyCRC:])
	if c := crc32.ChecksumIEEE(rec[l.bodyOff:l.bodyOff+l.bodyLen]) & bodyCRCMask; c != stored {
		return invalid("BODYCRC", "body CRC mismatch: stored 0x%08X computed 0x%08X", stored, c)
	}
	if physOff >= 0 {
		if p := PhysicalOffsetOf(rec); p != physOff {
			return invalid("PHYSICALOFFSET", "physical offset %d != position %d", p, physOff)
		}
	}
	if l.hasCRC(rec) {
		if s, c := l.storedCRC(rec), recordCRC(rec); s != uint64(c) {
			return invalid("__CRC32#", "record CRC mismatch: stored %d computed %d", s, c)
		}
	} else if requireCRC {
		return invalid("__CRC32#", "no __CRC32# tail")
	}
	return nil
}

// HasCRC reports whether the record at the front of rec is well formed
// (see Check; checksums are not verified) and its properties end with a
// __CRC32# tail.
func HasCRC(rec []byte) bool {
	l, err := parseLayout(rec)
	return err == nil && l.hasCRC(rec)
}

// SealCRC recomputes the __CRC32# tail of the record at the front of rec
// over the record's bytes before the tail. It does not allocate. It fails
// with a *CheckError if the record is not well formed, and with ErrNoCRC if
// it has no tail.
func SealCRC(rec []byte) error {
	l, err := parseLayout(rec)
	if err != nil {
		return err
	}
	if !l.hasCRC(rec) {
		return ErrNoCRC
	}
	l.seal(rec)
	return nil
}

// SealTail is SealCRC for a record whose tail HasCRC has already accepted,
// such as the commit log's appends, which it checks before it copies them:
// it finds the tail from TOTALSIZE alone, without reading the record's
// other fields again, and fails with ErrNoCRC if the bytes there are not a
// __CRC32# tail (or TOTALSIZE does not fit rec).
func SealTail(rec []byte) error {
	if len(rec) < 4 {
		return ErrNoCRC
	}
	size := uint64(binary.BigEndian.Uint32(rec))
	if size < MinRecordSize || size > uint64(len(rec)) {
		return ErrNoCRC
	}
	rec = rec[:size]
	tail := rec[len(rec)-CRCTailSize:]
	if !tailMarked(tail) {
		return ErrNoCRC
	}
	writeCRCDigits(tail, recordCRC(rec))
	return nil
}
