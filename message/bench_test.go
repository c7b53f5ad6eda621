package message_test

import (
	"net/netip"
	"testing"

	"github.com/gantrymq/gantry/message"
)

// bench1KiB returns a CRC-sealed record with a 1 KiB body and its message.
func bench1KiB(b *testing.B) (*message.Message, []byte) {
	b.Helper()
	m := sampleMessage(1024)
	return m, encode(b, m, true)
}

func BenchmarkAppend1KiB(b *testing.B) {
	m, rec := bench1KiB(b)
	dst := make([]byte, 0, len(rec))
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, err = message.Append(dst[:0], m, true); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheck1KiB(b *testing.B) {
	m, rec := bench1KiB(b)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := message.Check(rec, m.PhysicalOffset, true); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode1KiB(b *testing.B) {
	_, rec := bench1KiB(b)
	b.Run("Decode", func(b *testing.B) {
		b.SetBytes(int64(len(rec)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := message.Decode(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeInto-alias", func(b *testing.B) {
		var m message.Message
		b.SetBytes(int64(len(rec)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := message.DecodeInto(&m, rec, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkSealCRC1KiB(b *testing.B) {
	_, rec := bench1KiB(b)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := message.SealCRC(rec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTagsCode(b *testing.B) {
	for _, tag := range []string{"TagA", "polygenelubricants", "标签😀"} {
		b.Run(tag, func(b *testing.B) {
			b.SetBytes(int64(len(tag)))
			b.ReportAllocs()
			for b.Loop() {
				_ = message.TagsCode(tag)
			}
		})
	}
}

func BenchmarkUniqID(b *testing.B) {
	g := message.NewUniqIDGenerator(netip.MustParseAddr("10.0.0.5"))
	b.Run("Next", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = g.Next()
		}
	})
	b.Run("AppendNext", func(b *testing.B) {
		buf := make([]byte, 0, 32)
		b.ReportAllocs()
		for b.Loop() {
			buf = g.AppendNext(buf[:0])
		}
	})
	b.Run("AppendNext-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			buf := make([]byte, 0, 32)
			for pb.Next() {
				buf = g.AppendNext(buf[:0])
			}
		})
	})
}
