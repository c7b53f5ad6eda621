package message_test

import (
	"math"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"

	"github.com/gantrymq/gantry/message"
)

// javaHashRef is String.hashCode written the obvious way, over UTF-16.
func javaHashRef(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

func TestJavaHashCode(t *testing.T) {
	tests := []struct {
		in   string
		want int32
	}{
		{"", 0},
		{"hello", 99162322},
		{"polygenelubricants", math.MinInt32},
		{"标签", 857175},
		{"😀", 1772899},
		{"TagA", 2598919},
		{"\xff", 0xFFFD},                   // an invalid byte counts as U+FFFD
		{"\U0010FFFF", 31*0xDBFF + 0xDFFF}, // last code point: surrogates DBFF DFFF
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			assert.Equal(t, javaHashRef(tt.in), message.JavaHashCode(tt.in))
			assert.Equal(t, tt.want, message.JavaHashCode(tt.in))
			assert.Equal(t, int64(message.JavaHashCode(tt.in)), message.TagsCode(tt.in))
		})
	}
	assert.Equal(t, int64(math.MinInt32), message.TagsCode("polygenelubricants"), "sign-extended")
}

func FuzzJavaHashCode(f *testing.F) {
	for _, s := range []string{"", "TagA", "标签", "😀", "\xff\xfe", "a\U0010FFFFb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := message.JavaHashCode(s), javaHashRef(s); got != want {
			t.Fatalf("JavaHashCode(%q) = %d, want %d", s, got, want)
		}
	})
}
