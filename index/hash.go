package index

import (
	"math"
	"unicode/utf16"
)

// JavaHashCode returns Java's String.hashCode of s: h = 31*h + c over the
// UTF-16 code units of s, with int32 wrap-around. Invalid UTF-8 bytes count
// as U+FFFD.
func JavaHashCode(s string) int32 { return javaHash(0, s) }

// javaHash continues a Java String.hashCode of a prefix whose hash is h
// over s.
func javaHash(h int32, s string) int32 {
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + int32(hi)
			h = 31*h + int32(lo)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// KeyHash is the hash an index entry stores for key: |JavaHashCode(key)|,
// with math.MinInt32 mapped to 0 (RocketMQ's indexKeyHashMethod).
func KeyHash(key string) int32 { return keyHash(JavaHashCode(key)) }

// TopicKeyHash is KeyHash(topic + "#" + key), without building the string.
func TopicKeyHash(topic, key string) int32 {
	return keyHash(javaHash(31*JavaHashCode(topic)+'#', key))
}

func keyHash(h int32) int32 {
	if h == math.MinInt32 {
		return 0
	}
	if h < 0 {
		return -h
	}
	return h
}
