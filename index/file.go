package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gantrymq/gantry/internal/fsx"
)

const (
	headerSize = 40
	slotSize   = 4
	entrySize  = 20

	nameLen    = 17
	nameLayout = "20060102150405.000" // the dot is removed: yyyyMMddHHmmssSSS

	// reserveChunk is the unit in which a file's disk blocks are reserved
	// (fallocate), ahead of the entry being written, from offset 0: a
	// multiple of 2 MiB, the largest folio the page cache gives a mapped
	// file (see fsx.Mapping.Huge). A write fault makes the filesystem back
	// the whole folio it falls in, so a folio only partly reserved could
	// still raise SIGBUS on a full disk.
	reserveChunk = 4 << 20
)

// Header field offsets (big-endian, as Java's ByteBuffer writes them).
const (
	offBeginTS   = 0
	offEndTS     = 8
	offBeginPhy  = 16
	offEndPhy    = 24
	offSlotCount = 32
	offCount     = 36
)

var nativeBigEndian = binary.NativeEndian.Uint16([]byte{0, 1}) == 1

// header is the decoded 40-byte file header.
type header struct {
	beginTS, endTS, beginPhy, endPhy int64
	slotCount, count                 int32
}

func decodeHeader(b []byte) header {
	be := binary.BigEndian
	return header{
		beginTS:   int64(be.Uint64(b[offBeginTS:])),
		endTS:     int64(be.Uint64(b[offEndTS:])),
		beginPhy:  int64(be.Uint64(b[offBeginPhy:])),
		endPhy:    int64(be.Uint64(b[offEndPhy:])),
		slotCount: int32(be.Uint32(b[offSlotCount:])),
		count:     int32(be.Uint32(b[offCount:])),
	}
}

// check returns the entry capacity a file of size bytes with header h has,
// or a reason why the header is impossible.
func (h header) check(size int64) (entries int32, reason string) {
	if h.slotCount <= 0 {
		return 0, fmt.Sprintf("hashSlotCount %d <= 0", h.slotCount)
	}
	rest := size - headerSize - int64(h.slotCount)*slotSize
	if rest < 2*entrySize || rest%entrySize != 0 || rest/entrySize > math.MaxInt32 {
		return 0, fmt.Sprintf("size %d does not fit hashSlotCount %d", size, h.slotCount)
	}
	entries = int32(rest / entrySize)
	switch {
	case h.count < 1 || h.count > entries:
		return 0, fmt.Sprintf("indexCount %d out of range 1..%d", h.count, entries)
	case h.count == 1:
		return entries, ""
	case h.beginPhy < 0 || h.endPhy < h.beginPhy:
		return 0, fmt.Sprintf("phyOffset range [%d, %d] impossible", h.beginPhy, h.endPhy)
	case h.endTS < h.beginTS:
		return 0, fmt.Sprintf("timestamp range [%d, %d] impossible", h.beginTS, h.endTS)
	}
	return entries, ""
}

// indexFile is one mapped index file. The mapped bytes are the durable
// format; the atomic fields mirror the header for concurrent readers, which
// never read the header bytes themselves.
type indexFile struct {
	name       string // yyyyMMddHHmmssSSS
	path       string
	file       fsx.File
	m          fsx.Mapping
	b          []byte // m.Bytes()
	slotCount  int32
	entryCount int32 // capacity, including the unused entry 0

	beginTS, endTS, beginPhy, endPhy atomic.Int64
	count                            atomic.Int32 // indexCount: the next entry number

	flushed     int32 // writer only: indexCount at the last Flush
	slotsSynced bool  // writer only: the slots of this full file are durable

	// Disk reservation (writer only; see reserve). [0, reserved) is backed
	// by blocks reserved by this process; [0, inUse) held the header,
	// slots and entries in use when the file was opened, so reserving it
	// again takes no new space (unless a crash lost it: reserveWritten).
	fsys            fsx.FS
	dir             string
	reserved, inUse int64
}

// fileName formats a creation time as yyyyMMddHHmmssSSS.
func fileName(t time.Time) string {
	s := t.Format(nameLayout)
	return s[:14] + s[15:]
}

// parseFileName parses a yyyyMMddHHmmssSSS name (as UTC wall-clock fields).
func parseFileName(name string) (time.Time, bool) {
	if len(name) != nameLen {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation(nameLayout, name[:14]+"."+name[14:], time.UTC)
	return t, err == nil
}

func fileSize(slots, entries int32) int64 {
	return headerSize + int64(slots)*slotSize + int64(entries)*entrySize
}

// createFile creates and maps a new empty file. The file has its full
// size but is sparse: only its header, its slots (written at random, so
// reserved whole) and the first entries are reserved now; Put reserves
// the rest as the entries reach it (reserve).
func createFile(fsys fsx.FS, dir, name string, slots, entries int32) (*indexFile, error) {
	path := filepath.Join(dir, name)
	size := fileSize(slots, entries)
	first := min(size, roundUp(headerSize+int64(slots)*slotSize+2*entrySize, reserveChunk))
	if err := fsx.CheckRoom(fsys, dir, first); err != nil { // before taking the space
		return nil, fmt.Errorf("index: create %s: %w", path, err)
	}
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("index: create %s: %w", path, err)
	}
	fail := func(what string, err error) (*indexFile, error) {
		f.Close()
		fsys.Remove(path)
		return nil, fmt.Errorf("index: %s %s: %w", what, path, err)
	}
	if err := f.Truncate(size); err != nil {
		return fail("size", err)
	}
	if err := f.Allocate(0, first); err != nil {
		return fail("allocate", err)
	}
	if err := f.Sync(); err != nil { // make the size and the reservation durable
		return fail("sync", err)
	}
	m, err := f.Map(int(size))
	if err != nil {
		return fail("map", err)
	}
	// A new file takes every key stored until it is full: its slots are
	// all touched soon and its entries fill in order, so huge pages
	// (fsx.Mapping.Huge; advisory). Files reopened at startup are not
	// asked: a query's cold fault would read 2-4 MiB.
	_ = m.Huge(0, int(size))
	x := &indexFile{name: name, path: path, file: f, m: m, b: m.Bytes(), slotCount: slots, entryCount: entries,
		fsys: fsys, dir: dir, reserved: first}
	if err := x.checkAlign(); err != nil {
		x.unmap()
		fsys.Remove(path)
		return nil, err
	}
	binary.BigEndian.PutUint32(x.b[offSlotCount:], uint32(slots))
	binary.BigEndian.PutUint32(x.b[offCount:], 1)
	x.count.Store(1)
	return x, nil
}

func roundUp(n, unit int64) int64 { return (n + unit - 1) / unit * unit }

// reserve makes sure the blocks of [0, end) and of the rest of its
// reserveChunk are allocated (fallocate), so that no write below end can
// fault in a page the filesystem has no room for: that is SIGBUS, where a
// failed reservation is a clean ENOSPC before anything is written. Like
// file creation, it first checks that the filesystem has room for what
// it may newly take (fsx.CheckRoom). Writer only.
func (x *indexFile) reserve(end int64) error {
	if end <= x.reserved {
		return nil
	}
	lo, hi := x.reserved, min(int64(len(x.b)), roundUp(end, reserveChunk))
	if need := hi - max(lo, x.inUse); need > 0 {
		if err := fsx.CheckRoom(x.fsys, x.dir, need); err != nil {
			return fmt.Errorf("index: reserve %s: %w", x.path, err)
		}
	}
	if err := x.file.Allocate(lo, hi-lo); err != nil {
		return fmt.Errorf("index: reserve %s: %w", x.path, err)
	}
	x.reserved = hi
	return nil
}

// reserveWritten reserves again the chunks holding the entries in use of a
// file opened by this process, before rebuild or cutAt write into them.
// They were reserved before they were written, but a crash may have lost a
// reservation no sync had made durable while the header counting those
// entries reached the disk; writing into such a hole on a full disk would
// be SIGBUS. Otherwise it takes no new space, so there is no
// fsx.CheckRoom, which would refuse on a full disk. Writer only.
func (x *indexFile) reserveWritten() error {
	hi := min(int64(len(x.b)), roundUp(x.inUse, reserveChunk))
	if hi <= x.reserved {
		return nil
	}
	if err := x.file.Allocate(x.reserved, hi-x.reserved); err != nil {
		return fmt.Errorf("index: reserve the entries in use of %s again: %w", x.path, err)
	}
	x.reserved = hi
	return nil
}

// errImpossible marks a file whose header cannot have been written by us.
var errImpossible = errors.New("index: impossible header")

// openFile opens and maps an existing file after checking its header. A
// file that is too short or has an impossible header yields an error
// wrapping errImpossible.
func openFile(fsys fsx.FS, dir, name string) (*indexFile, error) {
	path := filepath.Join(dir, name)
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", path, err)
	}
	x, err := mapFile(f, path, name)
	if err != nil {
		f.Close()
		return nil, err
	}
	x.fsys, x.dir = fsys, dir
	return x, nil
}

func mapFile(f fsx.File, path, name string) (*indexFile, error) {
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("index: size of %s: %w", path, err)
	}
	if size < headerSize {
		return nil, fmt.Errorf("%w: %s is %d bytes", errImpossible, path, size)
	}
	var hb [headerSize]byte
	if _, err := f.ReadAt(hb[:], 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("index: read header of %s: %w", path, err)
	}
	h := decodeHeader(hb[:])
	entries, reason := h.check(size)
	if reason != "" {
		return nil, fmt.Errorf("%w: %s: %s", errImpossible, path, reason)
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("%w: %s is too large to map", errImpossible, path)
	}
	m, err := f.Map(int(size))
	if err != nil {
		return nil, fmt.Errorf("index: map %s: %w", path, err)
	}
	x := &indexFile{name: name, path: path, file: f, m: m, b: m.Bytes(), slotCount: h.slotCount, entryCount: entries}
	if err := x.checkAlign(); err != nil {
		m.Unmap()
		return nil, err
	}
	x.beginTS.Store(h.beginTS)
	x.endTS.Store(h.endTS)
	x.beginPhy.Store(h.beginPhy)
	x.endPhy.Store(h.endPhy)
	x.count.Store(h.count)
	x.flushed = h.count
	x.inUse = int64(x.entryOff(h.count))
	return x, nil
}

func (x *indexFile) checkAlign() error {
	if uintptr(unsafe.Pointer(unsafe.SliceData(x.b)))%8 != 0 {
		return fmt.Errorf("index: mapping of %s is not 8-byte aligned", x.path)
	}
	return nil
}

func (x *indexFile) unmap() {
	if x.m != nil {
		x.m.Unmap()
		x.m, x.b = nil, nil
	}
	if x.file != nil {
		x.file.Close()
		x.file = nil
	}
}

func (x *indexFile) empty() bool { return x.count.Load() <= 1 }
func (x *indexFile) full() bool  { return x.count.Load() >= x.entryCount }

func (x *indexFile) entryOff(n int32) int {
	return headerSize + int(x.slotCount)*slotSize + int(n)*entrySize
}

func (x *indexFile) slotPtr(s int32) *uint32 {
	return (*uint32)(unsafe.Pointer(&x.b[headerSize+int(s)*slotSize]))
}

// toBE converts between a big-endian value and the native word holding it.
func toBE(v uint32) uint32 {
	if nativeBigEndian {
		return v
	}
	return bits.ReverseBytes32(v)
}

// loadSlot atomically reads slot s (stored big-endian).
func (x *indexFile) loadSlot(s int32) int32 {
	return int32(toBE(atomic.LoadUint32(x.slotPtr(s))))
}

func (x *indexFile) storeSlot(s, v int32) {
	atomic.StoreUint32(x.slotPtr(s), toBE(uint32(v)))
}

// reserveNext reserves the disk under the next entry (reserve).
func (x *indexFile) reserveNext() error {
	return x.reserve(int64(x.entryOff(x.count.Load()) + entrySize))
}

// put appends one entry; the file must not be full, and reserveNext must
// have succeeded. Writer only.
// Publication order: entry bytes, header bytes and mirrors, indexCount,
// then the slot; see doc.go.
func (x *indexFile) put(hash int32, phy, ts int64) {
	be := binary.BigEndian
	n := x.count.Load()
	if n == 1 {
		x.beginTS.Store(ts)
		x.endTS.Store(ts)
		x.beginPhy.Store(phy)
		be.PutUint64(x.b[offBeginTS:], uint64(ts))
		be.PutUint64(x.b[offBeginPhy:], uint64(phy))
	}
	diff := (ts - x.beginTS.Load()) / 1000
	diff = max(0, min(diff, math.MaxInt32))
	slot := hash % x.slotCount
	prev := x.loadSlot(slot)
	if prev <= 0 || prev >= n {
		prev = 0
	}
	e := x.b[x.entryOff(n):]
	be.PutUint32(e[0:], uint32(hash))
	be.PutUint64(e[4:], uint64(phy))
	be.PutUint32(e[12:], uint32(diff))
	be.PutUint32(e[16:], uint32(prev))
	if ts > x.endTS.Load() {
		x.endTS.Store(ts)
	}
	x.endPhy.Store(phy)
	be.PutUint64(x.b[offEndTS:], uint64(x.endTS.Load()))
	be.PutUint64(x.b[offEndPhy:], uint64(phy))
	be.PutUint32(x.b[offCount:], uint32(n+1))
	x.count.Store(n + 1)
	x.storeSlot(slot, n)
}

// lookup appends to out the phyOffsets of this file's entries with keyHash
// hash and time in [begin, end], newest first, until len(out) == limit.
// seen reports offsets already in out (duplicates are skipped).
func (x *indexFile) lookup(hash int32, begin, end int64, limit int, out []int64, seen func([]int64, int64) bool) []int64 {
	cur := x.loadSlot(hash % x.slotCount) // before count: see doc.go
	count := x.count.Load()
	if count <= 1 || x.endTS.Load() < begin || x.beginTS.Load() > end {
		return out
	}
	be := binary.BigEndian
	base := x.beginTS.Load()
	// prev must strictly decrease, so the walk ends after < count steps
	// even in a damaged file.
	for cur > 0 && cur < count && len(out) < limit {
		e := x.b[x.entryOff(cur):]
		h := int32(be.Uint32(e[0:]))
		phy := int64(be.Uint64(e[4:]))
		diff := int64(int32(be.Uint32(e[12:])))
		prev := int32(be.Uint32(e[16:]))
		// Entries keep whole seconds since beginTS: the entry's time is in
		// [t, t+999], so it may match while t+999 >= begin.
		t := base + diff*1000
		if diff < 0 || t+999 < begin {
			break
		}
		if h == hash && t <= end && !seen(out, phy) {
			out = append(out, phy)
		}
		if prev >= cur {
			break
		}
		cur = prev
	}
	return out
}

// rebuild recomputes the slots and prevIndex chains of the published
// entries, skipping entries a crash left torn (keyHash < 0, phyOffset
// outside the header's range or going backwards, time outside the header's
// range). Slots past indexCount disappear with it. It returns the number of
// entries skipped. Its work follows the entries in use, not the file's
// size (see clearSlots). Writer only, with readers excluded.
func (x *indexFile) rebuild() (skipped int, err error) {
	be := binary.BigEndian
	count := x.count.Load()
	if err := x.reserveWritten(); err != nil {
		return 0, err
	}
	if err := x.clearSlots(); err != nil {
		return 0, err
	}
	beginTS, endTS := x.beginTS.Load(), x.endTS.Load()
	last, endPhy := x.beginPhy.Load(), x.endPhy.Load()
	for n := int32(1); n < count; n++ {
		e := x.b[x.entryOff(n):]
		h := int32(be.Uint32(e[0:]))
		phy := int64(be.Uint64(e[4:]))
		diff := int64(int32(be.Uint32(e[12:])))
		if h < 0 || phy < last || phy > endPhy || diff < 0 || beginTS+diff*1000 > endTS {
			skipped++
			continue
		}
		last = phy
		s := h % x.slotCount
		be.PutUint32(e[16:], uint32(x.loadSlot(s)))
		x.storeSlot(s, n)
	}
	return skipped, nil
}

// clearSlots zeroes the slot table. A file that is not full has its slots
// on disk never synced (see flush), so the filesystem zeroes them
// (fsx.File.ZeroRange: on ext4 and XFS a change of the extents' flags that
// keeps the blocks reserved), without faulting in and dirtying the
// 20 MB of a default table through the mapping. A full file's table,
// synced when it filled, is cleared in memory only: rebuild writes it
// back the same, and it reads all the file's entries anyway.
func (x *indexFile) clearSlots() error {
	lo, n := headerSize, int(x.slotCount)*slotSize
	if !x.full() {
		zerr := x.file.ZeroRange(int64(lo), int64(n))
		if zerr == nil {
			return nil
		}
		// A zero range that failed half-way may leave holes, which
		// clearing through the mapping must not write into (SIGBUS on a
		// full disk).
		if err := x.file.Allocate(int64(lo), int64(n)); err != nil {
			return fmt.Errorf("index: clear the slots of %s: %w", x.path, errors.Join(zerr, err))
		}
	}
	clear(x.b[lo : lo+n])
	return nil
}

// cutAt drops the entries from the first one at or past physEnd (or the
// first out of order: torn) to the end, fixes the header and rebuilds the
// slots. It returns how many entries it dropped. Writer only, with readers
// excluded.
func (x *indexFile) cutAt(physEnd int64) (dropped int32, err error) {
	if err := x.reserveWritten(); err != nil {
		return 0, err
	}
	be := binary.BigEndian
	count := x.count.Load()
	beginTS := x.beginTS.Load()
	last, endTS := x.beginPhy.Load(), beginTS
	n := int32(1)
	for ; n < count; n++ {
		e := x.b[x.entryOff(n):]
		phy := int64(be.Uint64(e[4:]))
		diff := int64(int32(be.Uint32(e[12:])))
		if phy >= physEnd || phy < last || diff < 0 {
			break
		}
		last = phy
		// The entry keeps whole seconds: its time is below the next one.
		endTS = max(endTS, min(x.endTS.Load(), beginTS+diff*1000+999))
	}
	clear(x.b[x.entryOff(n):x.entryOff(count)])
	if n == 1 {
		clear(x.b[:offSlotCount])
		x.beginTS.Store(0)
		x.beginPhy.Store(0)
		last, endTS = 0, 0
	}
	x.endTS.Store(endTS)
	x.endPhy.Store(last)
	be.PutUint64(x.b[offEndTS:], uint64(endTS))
	be.PutUint64(x.b[offEndPhy:], uint64(last))
	be.PutUint32(x.b[offCount:], uint32(n))
	x.count.Store(n)
	x.flushed = 0
	if _, err := x.rebuild(); err != nil {
		return count - n, err
	}
	return count - n, nil
}

// syncAll msyncs the whole file. Writer only.
func (x *indexFile) syncAll() error {
	if err := x.m.Sync(0, len(x.b)); err != nil {
		return fmt.Errorf("index: msync %s: %w", x.path, err)
	}
	x.flushed = x.count.Load()
	return nil
}

// flush msyncs the entries written since the last flush, then the header.
// The slots are synced once, when the file is full (newFile flushes a
// full file before it starts the next): Open rebuilds the slots of the newest
// files from their entries (rebuildFiles), so only a full file needs them
// on disk. Syncing the slot table every Flush wrote most of it (Put
// dirties random slots) under the writer lock, stalling the dispatcher.
// Writer only.
func (x *indexFile) flush() error {
	count := x.count.Load()
	syncSlots := count >= x.entryCount && !x.slotsSynced
	if count == x.flushed && !syncSlots {
		return nil
	}
	lo := x.entryOff(x.flushed)
	if err := x.m.Sync(lo, x.entryOff(count)-lo); err != nil {
		return fmt.Errorf("index: msync %s: %w", x.path, err)
	}
	if syncSlots {
		if err := x.m.Sync(headerSize, int(x.slotCount)*slotSize); err != nil {
			return fmt.Errorf("index: msync %s: %w", x.path, err)
		}
		x.slotsSynced = true
	}
	if err := x.m.Sync(0, headerSize); err != nil {
		return fmt.Errorf("index: msync %s: %w", x.path, err)
	}
	x.flushed = count
	return nil
}
