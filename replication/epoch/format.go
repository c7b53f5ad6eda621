package epoch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The file format is in the package doc ("On-disk format").
const (
	magic      = 0x4745504F // "GEPO"
	version    = 1
	headerSize = 16
	entrySize  = 16

	// MaxEntries bounds the list (one entry per election this replica
	// saw), so that a file of at most MaxFileSize bytes holds it. Open
	// checks a file's size and its count against it before allocating.
	MaxEntries = 1 << 16
	// MaxFileSize is the size of a file holding MaxEntries entries.
	MaxFileSize = headerSize + MaxEntries*entrySize
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encode returns the file content holding entries.
func encode(entries []Entry) []byte {
	b := make([]byte, headerSize+len(entries)*entrySize)
	binary.BigEndian.PutUint32(b[0:], magic)
	binary.BigEndian.PutUint16(b[4:], version)
	binary.BigEndian.PutUint16(b[6:], 0)
	binary.BigEndian.PutUint32(b[8:], uint32(len(entries)))
	binary.BigEndian.PutUint32(b[12:], crc32.Checksum(b[:12], castagnoli))
	for i, e := range entries {
		s := b[headerSize+i*entrySize:][:entrySize]
		binary.BigEndian.PutUint32(s[0:], uint32(e.Epoch))
		binary.BigEndian.PutUint64(s[4:], uint64(e.StartOffset))
		binary.BigEndian.PutUint32(s[12:], crc32.Checksum(s[:12], castagnoli))
	}
	return b
}

// decode parses a whole file. On a problem it returns a *CorruptError
// without Path (the caller sets it) holding the entries before the problem.
func decode(b []byte) ([]Entry, error) {
	bad := func(off int64, valid []Entry, format string, args ...any) ([]Entry, error) {
		if len(valid) == 0 {
			valid = nil
		}
		return nil, &CorruptError{Offset: off, Reason: fmt.Sprintf(format, args...), Valid: valid}
	}
	switch {
	case len(b) == 0:
		return bad(0, nil, "empty file")
	case len(b) > MaxFileSize:
		return bad(0, nil, "%d bytes, more than the %d of a file of MaxEntries entries", len(b), MaxFileSize)
	case len(b) < headerSize:
		return bad(0, nil, "torn header: %d of %d bytes", len(b), headerSize)
	}
	if m := binary.BigEndian.Uint32(b[0:]); m != magic {
		return bad(0, nil, "magic %#08x, want %#08x: not an epoch file", m, magic)
	}
	if crc := crc32.Checksum(b[:12], castagnoli); binary.BigEndian.Uint32(b[12:]) != crc {
		return bad(12, nil, "header checksum mismatch")
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != version {
		return bad(4, nil, "format version %d, this build reads %d", v, version)
	}
	if f := binary.BigEndian.Uint16(b[6:]); f != 0 {
		return bad(6, nil, "unknown flags %#04x", f)
	}
	count := binary.BigEndian.Uint32(b[8:])
	if count > MaxEntries {
		return bad(8, nil, "count %d exceeds MaxEntries (%d)", count, MaxEntries)
	}
	// Allocate only what the bytes present can hold.
	entries := make([]Entry, 0, min(int(count), (len(b)-headerSize)/entrySize))
	for i := range int(count) {
		off := headerSize + i*entrySize
		if off+entrySize > len(b) {
			if off == len(b) {
				return bad(int64(off), entries, "file ends after %d of %d entries", i, count)
			}
			return bad(int64(off), entries, "torn entry %d of %d: %d of %d bytes", i, count, len(b)-off, entrySize)
		}
		s := b[off : off+entrySize]
		if crc := crc32.Checksum(s[:12], castagnoli); binary.BigEndian.Uint32(s[12:]) != crc {
			return bad(int64(off), entries, "entry %d: checksum mismatch", i)
		}
		e := Entry{Epoch: int32(binary.BigEndian.Uint32(s[0:])), StartOffset: int64(binary.BigEndian.Uint64(s[4:]))}
		if err := checkNext(entries, e); err != nil {
			return bad(int64(off), entries, "entry %d: %v", i, err)
		}
		entries = append(entries, e)
	}
	if end := headerSize + int(count)*entrySize; len(b) > end {
		return bad(int64(end), entries, "%d bytes of trailing data after %d entries", len(b)-end, count)
	}
	return entries, nil
}
