package epoch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// wireEntrySize is an entry's size on the wire: [epoch i32][startOffset i64].
const wireEntrySize = 12

// AppendWire appends entries in the encoding a replication handshake sends
// them in: [count u32] then count times [epoch i32][startOffset i64],
// big-endian. It has no checksums: the connection is checked elsewhere.
func AppendWire(b []byte, entries []Entry) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(entries)))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint32(b, uint32(e.Epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.StartOffset))
	}
	return b
}

// ReadWire reads a list AppendWire wrote. The announced count is checked
// against MaxEntries before anything is allocated, and the list grows only
// as entries arrive, so a peer cannot make it allocate more than it sends.
// A list that Validate refuses is refused (ErrInvalidEntry); a stream that
// ends early gives io.ErrUnexpectedEOF (io.EOF before the count).
func ReadWire(r io.Reader) ([]Entry, error) {
	var buf [256 * wireEntrySize]byte
	if _, err := io.ReadFull(r, buf[:4]); err != nil {
		return nil, fmt.Errorf("epoch: read list count: %w", err)
	}
	count := binary.BigEndian.Uint32(buf[:4])
	if count > MaxEntries {
		return nil, fmt.Errorf("epoch: peer announced %d entries, more than MaxEntries (%d): %w", count, MaxEntries, ErrInvalidEntry)
	}
	var entries []Entry
	for left := int(count); left > 0; {
		n := min(left, len(buf)/wireEntrySize)
		if got, err := io.ReadFull(r, buf[:n*wireEntrySize]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("epoch: read list: entry %d of %d: %w", int(count)-left+got/wireEntrySize, count, err)
		}
		for i := range n {
			s := buf[i*wireEntrySize:]
			e := Entry{Epoch: int32(binary.BigEndian.Uint32(s)), StartOffset: int64(binary.BigEndian.Uint64(s[4:]))}
			if err := checkNext(entries, e); err != nil {
				return nil, fmt.Errorf("epoch: peer's entry %d (%v): %v: %w", len(entries), e, err, ErrInvalidEntry)
			}
			entries = append(entries, e)
		}
		left -= n
	}
	return entries, nil
}
