package index

import (
	"math"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
)

func TestJavaHashCode(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		hash    int32
		keyHash int32
	}{
		{"empty", "", 0, 0},
		{"hello", "hello", 99162322, 99162322},
		{"min int32", "polygenelubricants", math.MinInt32, 0},
		{"collision FB", "FB", 2236, 2236},
		{"collision Ea", "Ea", 2236, 2236},
		{"surrogate pair", "😀", 1772899, 1772899}, // U+1F600 = D83D DE00
		{"bmp non-ascii", "é", 233, 233},
		{"negative", "TopicTest#order-12345", -2001722958, 2001722958},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.hash, JavaHashCode(tt.in))
			assert.Equal(t, tt.keyHash, KeyHash(tt.in))
		})
	}
}

func TestTopicKeyHash(t *testing.T) {
	for _, tk := range [][2]string{{"T", "k"}, {"Orders", "order-42"}, {"", ""}, {"主题", "键🙂"}, {"%RETRY%g", "C0A80001"}} {
		assert.Equal(t, KeyHash(tk[0]+"#"+tk[1]), TopicKeyHash(tk[0], tk[1]), "%q", tk)
	}
	assert.Zero(t, testing.AllocsPerRun(10, func() { TopicKeyHash("Orders", "order-42") }))
}

// javaHashRef is String.hashCode written the obvious way, over UTF-16.
func javaHashRef(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

func FuzzJavaHashCode(f *testing.F) {
	for _, s := range []string{"", "abc", "abcd", "TopicTest#C0A8000100002A9F0000000000000A76", "ab\xffcdefgh", "键🙂abcdefgh", "abcdefg😀hijk"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := JavaHashCode(s), javaHashRef(s); got != want {
			t.Fatalf("JavaHashCode(%q) = %d, want %d", s, got, want)
		}
	})
}

// BenchmarkTopicKeyHash hashes a topic and a UNIQ_KEY, as the dispatcher
// does for every message it indexes.
//
//	go test -run=^$ -bench=TopicKeyHash ./index
func BenchmarkTopicKeyHash(b *testing.B) {
	for b.Loop() {
		TopicKeyHash("BenchTopic", "C0A8000100002A9F0000000000000A76")
	}
}
