package consumequeue

// Read-only helpers for tools that inspect queue files without opening a
// Queue (which recovers, and so may write): an offline checker reads a
// file's bytes itself and decodes them here.

// DecodeEntry decodes the entry at the front of b, which must hold at least
// EntrySize bytes (it panics otherwise, like a slice expression). It does
// not judge the entry: see Entry.Valid, Entry.IsPlaceholder and
// IsUnusedEntry.
func DecodeEntry(b []byte) Entry { return decodeEntry(b) }

// IsPlaceholder reports whether e is Java's placeholder {0, MaxInt32, 0},
// which fills the slots before a queue's first entry when the queue starts
// at a non-zero offset. A placeholder is Valid but points at no record.
func (e Entry) IsPlaceholder() bool { return e.isPlaceholder() }

// IsUnusedEntry reports whether the EntrySize bytes at the front of b are
// all zero: a slot never written (the tail of a queue's last file).
func IsUnusedEntry(b []byte) bool { return isZero(b[:EntrySize]) }
