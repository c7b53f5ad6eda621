package commitlog

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
	"golang.org/x/sys/unix"
)

// The staging buffers of writeBuffered, and direct writes.
//
// Appends under writeBuffered are copied into a staging buffer (l.pend);
// the flusher takes it whole, writes it into the segment file and
// fdatasyncs. Where the file system takes them (and Config.noDirectWrites
// is not set), large flushes are written with O_DIRECT (fsx.DirectWriter):
// from the staging buffer straight to the disk, without the page cache's
// copy, page allocation and writeback, most of what a sync-flush broker's
// flusher cost (docs/decisions/0023-commit-log-chooses-how-it-writes.md).
//
// A direct write must never cover a range that is in the page cache (see
// fsx.DirectWriter), and readers bring into it what they read. So a
// direct write only ever covers whole file blocks past everything written
// before: it starts at an aligned offset, and the flusher pads the staged
// bytes to the next one with a filler (magicPad) that readers step over.
// A flush that does not start aligned (the first after Open or after a
// small flush, which is written through the page cache unpadded, as
// padding would waste most of a block on a lone message) is written the
// usual way and padded, so that the next one can go direct. Read-ahead is
// off for segments written directly (fsx.DirectWriter.PrepareDirect, and
// the readers' mapping is marked random), so that no read brings in
// blocks past the end either.
//
// The last buffers written stay readable (l.staged, within stageKeep and
// stageKeepBytes): the store's dispatcher, which reads every record right
// behind the flusher, copies from there instead of reading the disk, even
// when it falls many flushes behind (a direct write leaves nothing in the
// page cache, and a dispatcher that had to read the disk would fall
// further behind).

// directMinBytes is the smallest flush written directly: smaller ones go
// through the page cache, which costs them little, where padding would
// cost up to a block. A variable for the crash tests' small flushes.
var directMinBytes = 64 << 10

// magicPad starts a filler that pads a flush to a block boundary before a
// direct write: [size int32][magicPad], then size-8 zero bytes. Readers
// step over it as over a hole.
const magicPad int32 = 0x50414421 // "PAD!"

// minStage is the smallest staging buffer allocated.
const minStage = 256 << 10

// stageKeep is how many written staging buffers stay readable at most,
// and stageKeepBytes how large they may be in all, the newest aside: how
// far behind the flusher the dispatcher was seen to fall under a sync
// produce, in flushes of a few hundred KiB (reading the disk instead slows
// it down, and so it falls further; docs/decisions/0024-reading-the-commit-log.md).
const (
	stageKeep      = 128
	stageKeepBytes = 24 << 20
)

// stagedBytes is a written staging buffer mem, which holds log bytes
// [off, off+len(b)) in b.
type stagedBytes struct {
	b, mem []byte
	off    int64
}

// newStage returns an empty staging buffer of capacity n (rounded up to
// whole pages): anonymous memory mapped on its own, so page-aligned, and
// outside the Go heap, where a sync-flush broker's few staging buffers of
// several MiB each would count towards the soft memory limit (`gantry`
// sets 40 MiB) and have the garbage collector run all the time.
// freeStage returns it.
func newStage(n int) []byte {
	n = alignUp(n)
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		// Out of address space or memory: what make would have died of.
		panic(fmt.Sprintf("commitlog: map a %d-byte staging buffer: %v", n, err))
	}
	return b[:0]
}

// freeStage unmaps a buffer of newStage; b and every slice of it must not
// be used afterwards. A nil b is ignored.
func freeStage(b []byte) {
	if cap(b) > 0 {
		_ = unix.Munmap(b[:cap(b)])
	}
}

func alignUp(n int) int { return (n + fsx.DirectAlign - 1) &^ (fsx.DirectAlign - 1) }

// stageSpares and stageSpareBytes bound the emptied staging buffers a
// log keeps to reuse: the one written last becomes the next pending
// buffer, and a pending buffer that grows moves into a larger one. Mapping
// a fresh buffer each time instead faulted every page of it in, for every
// flush (docs/decisions/0023-commit-log-chooses-how-it-writes.md). One spare may be larger,
// up to twice MaxPendingBytes, as one always could.
const (
	stageSpares     = 4
	stageSpareBytes = 16 << 20
)

// growPend makes room in the pending staging buffer for more bytes,
// moving what it holds into a spare or a new buffer of at least twice its
// capacity when it is full. l.mu is held.
func (l *Log) growPend(more int) {
	b := l.pend
	if len(b)+more <= cap(b) {
		return
	}
	need := max(len(b)+more, 2*cap(b), minStage)
	nb := l.spareStage(need)
	if nb == nil {
		nb = newStage(need)
	}
	l.pend = append(nb, b...)
	if !l.keepSpare(b) {
		freeStage(b)
	}
}

// spareStage takes the largest spare staging buffer, emptied, if its
// capacity is at least need; else it returns nil. l.mu is held.
func (l *Log) spareStage(need int) []byte {
	best := -1
	for i, b := range l.spares {
		if cap(b) >= need && (best < 0 || cap(b) > cap(l.spares[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := l.spares[best]
	last := len(l.spares) - 1
	l.spares[best], l.spares[last] = l.spares[last], nil
	l.spares = l.spares[:last]
	return b[:0]
}

// keepSpare keeps b, a staging buffer no one uses any more, to reuse, and
// reports whether it did: not when it is empty or the spares are at their
// bounds. l.mu is held.
func (l *Log) keepSpare(b []byte) bool {
	if cap(b) == 0 || len(l.spares) >= stageSpares || cap(b) > 2*l.cfg.MaxPendingBytes {
		return false
	}
	kept := cap(b)
	for _, s := range l.spares {
		kept += cap(s)
	}
	if len(l.spares) > 0 && kept > stageSpareBytes {
		return false
	}
	l.spares = append(l.spares, b[:0])
	return true
}

// takeSpares removes the spare staging buffers and returns them, for the
// caller to unmap. l.mu is held.
func (l *Log) takeSpares() [][]byte {
	s := l.spares
	l.spares = nil
	return s
}

// padSize is the size of the filler that takes log offset end to a block
// boundary: 0 if it is on one, else at least a filler's 8 bytes.
func padSize(end int64) int64 {
	pad := -end & (fsx.DirectAlign - 1)
	if pad > 0 && pad < message.BlankSize {
		pad += fsx.DirectAlign
	}
	return pad
}

// appendPad appends a filler of n bytes (padSize) to b, which has room
// for it.
func appendPad(b []byte, n int64) []byte {
	at := len(b)
	b = b[:at+int(n)]
	clear(b[at:])
	binary.BigEndian.PutUint32(b[at:], uint32(n))
	binary.BigEndian.PutUint32(b[at+4:], uint32(magicPad))
	return b
}

// writeDirect writes b, aligned, at log offset off with O_DIRECT. If the
// segment's file cannot be written so, it turns direct writes off for the
// log and returns an error matching errors.ErrUnsupported, having written
// nothing.
func (l *Log) writeDirect(b []byte, off int64) error {
	seg := l.segs.Load().find(off)
	if seg == nil || !seg.acquire() {
		return fmt.Errorf("commitlog: no segment for offset %d", off)
	}
	defer seg.release()
	d, ok := seg.file.(fsx.DirectWriter)
	if !ok {
		l.directOff(seg.path, errors.ErrUnsupported)
		return errors.ErrUnsupported
	}
	inline := l.inlineFile(seg.file) != nil
	t0 := l.cfg.Now()
	_, err := d.WriteAtDirect(b, off-seg.base, inline)
	if inline {
		l.inlineTook("pwrite", seg.path, l.cfg.Now().Sub(t0))
	}
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		l.directOff(seg.path, err)
		return err
	case err != nil:
		return fmt.Errorf("direct write %s at %d: %w", seg.path, off-seg.base, err)
	}
	l.stats.direct.Add(1)
	return nil
}

// prepareDirect readies seg for direct writes (fsx.DirectWriter), or turns
// them off for the log if its file cannot take them.
func (l *Log) prepareDirect(seg *segment) {
	if !l.directOn.Load() {
		return
	}
	d, ok := seg.file.(fsx.DirectWriter)
	var err error
	if !ok {
		err = errors.ErrUnsupported
	} else {
		err = d.PrepareDirect()
	}
	if err != nil {
		l.directOff(seg.path, err)
		return
	}
	if err := seg.m.Random(0, int(seg.size)); err != nil {
		l.log.Debug("random-access advice failed", "segment", seg.path, "err", err)
	}
}

// directOff turns direct writes off for good.
func (l *Log) directOff(path string, err error) {
	if l.directOn.Swap(false) {
		l.log.Info("writing the commit log through the page cache: the file system does not take direct writes", "segment", path, "err", err)
	}
}

// pushStaged makes s the newest readable staging buffer and returns the
// buffers no longer readable, appended to gone: the oldest while there
// are more than stageKeep or the others' capacity passes stageKeepBytes.
func (l *Log) pushStaged(gone [][]byte, s stagedBytes) [][]byte {
	l.stageMu.Lock()
	defer l.stageMu.Unlock()
	l.staged = append(l.staged, s)
	kept := 0
	for _, o := range l.staged[:len(l.staged)-1] {
		kept += cap(o.mem)
	}
	drop := 0
	for len(l.staged)-drop > stageKeep || drop < len(l.staged)-1 && kept > stageKeepBytes {
		gone = append(gone, l.staged[drop].mem)
		kept -= cap(l.staged[drop].mem)
		drop++
	}
	l.staged = append(l.staged[:0], l.staged[drop:]...)
	return gone
}

// dropStaged makes every staging buffer unreadable and returns them (at
// Close).
func (l *Log) dropStaged() (gone [][]byte) {
	l.stageMu.Lock()
	defer l.stageMu.Unlock()
	for _, o := range l.staged {
		gone = append(gone, o.mem)
	}
	l.staged = l.staged[:0]
	return gone
}

// copyStaged copies into dst what the written staging buffers hold of
// the log from off on, and returns how many bytes it copied: 0 if off is
// not in one of them. They hold ranges in log order up to the readable
// end, one after the other but where a flush went across a roll, so what
// it copies goes on to the end of dst, of the log or of such a range.
func (l *Log) copyStaged(dst []byte, off int64) int {
	l.stageMu.RLock()
	defer l.stageMu.RUnlock()
	i, _ := slices.BinarySearchFunc(l.staged, off, func(s stagedBytes, off int64) int {
		return cmp.Compare(s.off+int64(len(s.b)), off+1) // the first ending past off
	})
	n := 0
	for _, s := range l.staged[i:] {
		if off < s.off || off >= s.off+int64(len(s.b)) || n == len(dst) {
			break // before the oldest, in a roll's gap, past the end, or done
		}
		k := copy(dst[n:], s.b[off-s.off:])
		n += k
		off += int64(k)
	}
	return n
}

// idleMark is what trimIdle saw at its last call: the appends and block
// reads counted so far. Only the goroutine calling trimIdle uses it.
type idleMark struct{ appends, blockReads int64 }

// trimIdle lets go of memory an idle log does not need: the staging
// buffers once no append came since the last call, the block cache's
// blocks once no block was read since. They are mapped again when work
// comes back. Called every CheckpointInterval, from one goroutine.
func (l *Log) trimIdle(last *idleMark) {
	now := idleMark{appends: l.stats.appends.Load(), blockReads: l.stats.blockReads.Load()}
	if now.appends == last.appends {
		gone := l.dropStaged()
		l.mu.Lock() // taken out under the append lock, unmapped after it
		if len(l.pend) == 0 {
			gone = append(gone, l.pend)
			l.pend = nil
		}
		gone = append(gone, l.takeSpares()...)
		l.mu.Unlock()
		for _, b := range gone {
			freeStage(b)
		}
	}
	if now.blockReads == last.blockReads {
		l.blocks.trim()
	}
	*last = now
}
