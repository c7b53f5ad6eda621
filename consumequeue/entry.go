package consumequeue

import (
	"encoding/binary"
	"math"
)

// EntrySize is the size of one encoded entry in bytes.
const EntrySize = 20

// Entry is one consume-queue entry: where a message of this queue lives in
// the commit log, and its tags hash code.
type Entry struct {
	Offset   int64 // commit-log physical offset of the record
	Size     int32 // record size in bytes
	TagsCode int64 // Java String.hashCode of TAGS, or the delivery time for delay topics
}

// End is the commit-log offset just past the record.
func (e Entry) End() int64 { return e.Offset + int64(e.Size) }

// Valid reports whether e is a real or placeholder entry (offset >= 0,
// size > 0); recovery stops at the first entry that is not.
func (e Entry) Valid() bool { return e.Offset >= 0 && e.Size > 0 }

// placeholder is Java's filler for the space before a queue's first entry
// when the queue starts at a non-zero offset.
var placeholder = Entry{Offset: 0, Size: math.MaxInt32, TagsCode: 0}

func (e Entry) isPlaceholder() bool { return e == placeholder }

// putEntry encodes e into b[:EntrySize], big-endian.
func putEntry(b []byte, e Entry) {
	_ = b[EntrySize-1]
	binary.BigEndian.PutUint64(b[0:], uint64(e.Offset))
	binary.BigEndian.PutUint32(b[8:], uint32(e.Size))
	binary.BigEndian.PutUint64(b[12:], uint64(e.TagsCode))
}

// decodeEntry decodes b[:EntrySize].
func decodeEntry(b []byte) Entry {
	_ = b[EntrySize-1]
	return Entry{
		Offset:   int64(binary.BigEndian.Uint64(b[0:])),
		Size:     int32(binary.BigEndian.Uint32(b[8:])),
		TagsCode: int64(binary.BigEndian.Uint64(b[12:])),
	}
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
