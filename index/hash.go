package index

import (
	"math"
	"unicode/utf16"
	"unicode/utf8"
)

// JavaHashCode returns Java's String.hashCode of s: h = 31*h + c over the
// UTF-16 code units of s, with int32 wrap-around. Invalid UTF-8 bytes count
// as U+FFFD.
func JavaHashCode(s string) int32 { return javaHash(0, s) }

// javaHash continues a Java String.hashCode of a prefix whose hash is h
// over s. ASCII goes four bytes a step: h*31⁴ + c0*31³ + c1*31² + c2*31 +
// c3 is the same sum (int32 arithmetic wraps alike), without making each
// multiply wait for the one before (a UNIQ_KEY of 32 hex digits is hashed
// for every message the broker stores).
func javaHash(h int32, s string) int32 {
	i := 0
	for ; i+4 <= len(s); i += 4 {
		c0, c1, c2, c3 := s[i], s[i+1], s[i+2], s[i+3]
		if c0|c1|c2|c3 >= utf8.RuneSelf {
			break
		}
		h = h*(31*31*31*31) + int32(c0)*(31*31*31) + int32(c1)*(31*31) + int32(c2)*31 + int32(c3)
	}
	for _, r := range s[i:] {
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
