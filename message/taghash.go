package message

import "unicode/utf8"

// JavaHashCode returns Java's String.hashCode of s: h = 31*h + c over the
// UTF-16 code units of s (a character outside the BMP counts as its two
// surrogates), wrapping in int32; "" hashes to 0. Each invalid UTF-8 byte
// counts as U+FFFD.
//
// This is not the value the Go client sends in a heartbeat's codeSet,
// which hashes UTF-8 bytes: the two agree only for ASCII.
func JavaHashCode(s string) int32 {
	var h int32
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			r = 0xDC00 + r&0x3FF
		}
		h = 31*h + int32(r)
	}
	return h
}

// TagsCode returns the consume-queue tagsCode of a tag: JavaHashCode(tag)
// sign-extended to int64. It is 0 for "" (and a message without TAGS).
func TagsCode(tag string) int64 {
	return int64(JavaHashCode(tag))
}
