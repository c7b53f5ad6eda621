package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/gantrymq/gantry/internal/fsx"
)

// ErrBadHeader matches the error ScanFile returns for a file that is too
// short or whose header is impossible (the files Open deletes).
var ErrBadHeader = errImpossible

// ScanHeader is an index file's decoded 40-byte header, with the layout it
// implies.
type ScanHeader struct {
	BeginTimestamp int64 // ms, store time of the first entry
	EndTimestamp   int64 // ms, largest store time
	BeginPhyOffset int64 // phyOffset of the first entry
	EndPhyOffset   int64 // phyOffset of the last entry
	SlotCount      int32 // hashSlotCount
	// Count is indexCount, the next entry number: entries 1..Count-1 are
	// in use (entry 0 never is).
	Count int32
	// EntryCapacity is the number of entries the file has room for,
	// entry 0 included, derived from the file size and SlotCount.
	EntryCapacity int32
}

// SlotOffset is the byte offset of hash slot s in the file.
func (h ScanHeader) SlotOffset(s int32) int64 { return headerSize + int64(s)*slotSize }

// EntryOffset is the byte offset of entry n in the file.
func (h ScanHeader) EntryOffset(n int32) int64 {
	return headerSize + int64(h.SlotCount)*slotSize + int64(n)*entrySize
}

// ScanSlot is one non-empty hash slot.
type ScanSlot struct {
	Slot       int32 // slot number
	FileOffset int64 // byte offset of the slot in the file
	Value      int32 // number of the newest entry of the slot's chain
}

// ScanEntry is one entry in use, as stored.
type ScanEntry struct {
	Number     int32 // entry number, 1..Count-1
	FileOffset int64 // byte offset of the entry in the file
	KeyHash    int32 // KeyHash("topic#key")
	PhyOffset  int64 // commit-log offset of the record
	TimeDiff   int32 // seconds since BeginTimestamp
	PrevIndex  int32 // previous entry of the same slot chain, 0 = end
}

// IsFileName reports whether name is an index file name (yyyyMMddHHmmssSSS).
func IsFileName(name string) bool {
	_, ok := parseFileName(name)
	return ok
}

// scanChunk is how many bytes ScanFile reads at a time.
const scanChunk = 1 << 20

// ScanFile reads the index file at path read-only (it never maps or writes
// it), checks its header as Open does and calls slot for every non-zero
// hash slot, then entry for every entry in use, both in file order and with
// the values as stored: it does not judge them. Either callback may be nil
// to skip that region. It stops at the first error a callback returns and
// returns it. A file whose header is impossible fails with an error
// matching ErrBadHeader before any callback; the header is then returned
// as decoded, with EntryCapacity 0. Memory use is bounded by a read buffer
// of about 1 MiB, whatever the file's size.
func ScanFile(fsys fsx.FS, path string, slot func(ScanSlot) error, entry func(ScanEntry) error) (ScanHeader, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return ScanHeader{}, fmt.Errorf("index: open %s: %w", path, err)
	}
	defer f.Close()
	h, err := readScanHeader(f, path)
	if err != nil {
		return h, err
	}
	if slot != nil {
		if err := scanSlots(f, path, h, slot); err != nil {
			return h, err
		}
	}
	if entry != nil {
		if err := scanEntries(f, path, h, entry); err != nil {
			return h, err
		}
	}
	return h, nil
}

func readScanHeader(f fsx.File, path string) (ScanHeader, error) {
	size, err := f.Size()
	if err != nil {
		return ScanHeader{}, fmt.Errorf("index: size of %s: %w", path, err)
	}
	if size < headerSize {
		return ScanHeader{}, fmt.Errorf("%w: %s is %d bytes", errImpossible, path, size)
	}
	var hb [headerSize]byte
	if err := readFull(f, hb[:], 0, path); err != nil {
		return ScanHeader{}, err
	}
	d := decodeHeader(hb[:])
	h := ScanHeader{
		BeginTimestamp: d.beginTS, EndTimestamp: d.endTS, BeginPhyOffset: d.beginPhy, EndPhyOffset: d.endPhy,
		SlotCount: d.slotCount, Count: d.count,
	}
	entries, reason := d.check(size)
	if reason != "" {
		return h, fmt.Errorf("%w: %s: %s", errImpossible, path, reason)
	}
	h.EntryCapacity = entries
	return h, nil
}

func scanSlots(f fsx.File, path string, h ScanHeader, fn func(ScanSlot) error) error {
	buf := make([]byte, scanChunk) // a multiple of slotSize
	for s := int32(0); s < h.SlotCount; {
		n := min(int64(h.SlotCount-s), scanChunk/slotSize)
		b := buf[:n*slotSize]
		if err := readFull(f, b, h.SlotOffset(s), path); err != nil {
			return err
		}
		for i := range int32(n) {
			v := int32(binary.BigEndian.Uint32(b[i*slotSize:]))
			if v == 0 {
				continue
			}
			if err := fn(ScanSlot{Slot: s + i, FileOffset: h.SlotOffset(s + i), Value: v}); err != nil {
				return err
			}
		}
		s += int32(n)
	}
	return nil
}

func scanEntries(f fsx.File, path string, h ScanHeader, fn func(ScanEntry) error) error {
	buf := make([]byte, scanChunk/entrySize*entrySize)
	be := binary.BigEndian
	for num := int32(1); num < h.Count; {
		n := min(int64(h.Count-num), int64(len(buf)/entrySize))
		b := buf[:n*entrySize]
		if err := readFull(f, b, h.EntryOffset(num), path); err != nil {
			return err
		}
		for i := range int32(n) {
			e := b[i*entrySize:]
			err := fn(ScanEntry{
				Number: num + i, FileOffset: h.EntryOffset(num + i),
				KeyHash:   int32(be.Uint32(e[0:])),
				PhyOffset: int64(be.Uint64(e[4:])),
				TimeDiff:  int32(be.Uint32(e[12:])),
				PrevIndex: int32(be.Uint32(e[16:])),
			})
			if err != nil {
				return err
			}
		}
		num += int32(n)
	}
	return nil
}

// readFull reads len(b) bytes at off; the header check guarantees the file
// is long enough, so a short read means it changed underneath.
func readFull(f fsx.File, b []byte, off int64, path string) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("index: read %s at %d: %w", path, off, err)
}
