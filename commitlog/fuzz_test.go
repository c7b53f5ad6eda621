package commitlog_test

import (
	"errors"
	"os"
	"testing"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

// FuzzRecoverSegment opens a log whose only segment holds arbitrary bytes:
// recovery must never panic, and whatever it keeps must be valid records.
func FuzzRecoverSegment(f *testing.F) {
	var good []byte
	for i := range 8 {
		rec := record(f, i, 40+i*30)
		message.SetPhysicalOffset(rec, int64(len(good)))
		if err := message.SealCRC(rec); err != nil {
			f.Fatal(err)
		}
		good = append(good, rec...)
	}
	f.Add(good, false)
	f.Add(good[:len(good)-7], false)
	flipped := append([]byte(nil), good...)
	flipped[300] ^= 4
	f.Add(flipped, true)
	f.Add(flipped, false)
	f.Add([]byte{0, 0, 0, 8, 0xCB, 0xD4, 0x31, 0x94}, false)
	f.Fuzz(func(t *testing.T, data []byte, skip bool) {
		const segSize = 4096
		mem := fsx.NewMemFS()
		if err := mem.MkdirAll("/d", 0o755); err != nil {
			t.Fatal(err)
		}
		seg := make([]byte, segSize)
		copy(seg, data)
		file, err := mem.OpenFile("/d/00000000000000000000", os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := file.WriteAt(seg, 0); err != nil {
			t.Fatal(err)
		}
		l, err := commitlog.Open(t.Context(), commitlog.Config{FS: mem, Dir: "/d", SegmentBytes: segSize, SkipCorrupt: skip, CleanInterval: -1})
		if err != nil {
			if !errors.Is(err, commitlog.ErrCorrupt) {
				t.Fatalf("open failed with an unexpected error: %v", err)
			}
			return
		}
		defer l.Close()
		for off := l.MinOffset(); ; {
			r, next, err := l.ReadRecord(off)
			if errors.Is(err, commitlog.ErrOffsetTooBig) {
				break
			}
			if err != nil {
				t.Fatalf("read at %d: %v", off, err)
			}
			if err := message.Check(r.B, next-int64(len(r.B)), true); err != nil {
				t.Fatalf("recovered an invalid record at %d: %v", off, err)
			}
			r.Release()
			off = next
		}
		if _, err := l.Append(t.Context(), record(t, 99, 10), nil); err != nil && !errors.Is(err, commitlog.ErrRecordTooLarge) {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}
