package commitlog

import (
	"encoding/binary"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gantrymq/gantry/internal/writemode"
)

// Abandon simulates the death of the process: the loops stop, nothing is
// flushed, the abort marker stays, the files are released.
func (l *Log) Abandon() {
	l.closeOnce.Do(func() {
		l.stopLoops()
		l.failWaiters(ErrClosed)
		l.closeSegments()
		l.closeErr = ErrClosed
	})
}

// SetDirectMinBytes sets the smallest flush WriteBuffered writes directly
// until the test ends.
func SetDirectMinBytes(t interface{ Cleanup(func()) }, n int) {
	old := directMinBytes
	directMinBytes = n
	t.Cleanup(func() { directMinBytes = old })
}

// CheckpointNow writes the checkpoint.
func (l *Log) CheckpointNow() error { return l.writeCheckpoint() }

// SettleAlloc waits until the background segment allocation, if any, is done.
func (l *Log) SettleAlloc() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.allocPending {
		r := <-l.allocRes
		l.allocRes <- r
	}
}

// MappedPages counts the pages of [off, off+n) (page-aligned, within one
// segment) that are mapped into the appends' mapping of this process
// (/proc/self/pagemap's present bit): pre-faulted or written, not merely
// read ahead into the page cache.
func (l *Log) MappedPages(off, n int64) (int, error) {
	seg := l.segs.Load().find(off)
	if seg == nil {
		return 0, ErrClosed
	}
	return presentPages(l.writer(seg).Bytes()[off-seg.base:], n)
}

// Mappings returns the readers' mapping of the segment holding off and
// the appends' own mapping (nil when the appends use the readers').
func (l *Log) Mappings(off int64) (readers, appends []byte) {
	seg := l.segs.Load().find(off)
	if seg == nil {
		return nil, nil
	}
	if w := seg.ownWriter(); w != nil {
		appends = w.Bytes()
	}
	return seg.b, appends
}

// ReaderMappedPages is MappedPages of the readers' mapping.
func (l *Log) ReaderMappedPages(off, n int64) (int, error) {
	seg := l.segs.Load().find(off)
	if seg == nil {
		return 0, ErrClosed
	}
	return presentPages(seg.b[off-seg.base:], n)
}

// presentPages counts the pages of the n bytes from b[0] (page-aligned)
// that /proc/self/pagemap says are present.
func presentPages(b []byte, n int64) (int, error) {
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	addr := uintptr(unsafe.Pointer(&b[0]))
	buf := make([]byte, 8*((n+4095)/4096))
	if _, err := f.ReadAt(buf, int64(addr/4096*8)); err != nil {
		return 0, err
	}
	mapped := 0
	for i := 0; i < len(buf); i += 8 {
		if binary.LittleEndian.Uint64(buf[i:])>>63 == 1 {
			mapped++
		}
	}
	return mapped, nil
}

// ResidentPages counts the pages of [off, off+n) (page-aligned, within one
// segment) that are in the page cache (mincore), mapped or not.
func (l *Log) ResidentPages(off, n int64) (int, error) {
	seg := l.segs.Load().find(off)
	if seg == nil {
		return 0, ErrClosed
	}
	vec := make([]byte, (n+4095)/4096)
	b := seg.b[off-seg.base : off-seg.base+n]
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, errno
	}
	resident := 0
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, nil
}

// IdleMark is what TrimIdle compares with.
type IdleMark = idleMark

// TrimIdle runs one pass of the idle trim (trimIdle).
func (l *Log) TrimIdle(m *IdleMark) { l.trimIdle(m) }

// MappedStages returns how many bytes the staging buffers (pending,
// spare and written) and the block cache have mapped.
func (l *Log) MappedStages() (staged, blocks int) {
	l.stageMu.RLock()
	for _, s := range l.staged {
		staged += cap(s.mem)
	}
	l.stageMu.RUnlock()
	l.mu.Lock()
	staged += cap(l.pend)
	for _, b := range l.spares {
		staged += cap(b)
	}
	l.mu.Unlock()
	l.blocks.mu.Lock()
	blocks = len(l.blocks.arenaMap)
	l.blocks.mu.Unlock()
	return staged, blocks
}

// WriteMode is how a log writes its appends, chosen by the log outside
// tests (writeAuto).
type WriteMode = writemode.Mode

// The write modes a test may choose.
const (
	WriteAuto     = writeAuto
	WriteMapped   = writeMapped
	WriteBuffered = writeBuffered
	WriteDirect   = writeDirect
	WriteHybrid   = writeHybrid
)

// Mode returns c set to write in m.
func (c Config) Mode(m WriteMode) Config { c.writeMode = m; return c }

// NoDirect returns c set to write through the page cache (on) or not.
func (c Config) NoDirect(on bool) Config { c.noDirectWrites = on; return c }

// WriteMode is how the log writes its appends, writeAuto resolved.
func (l *Log) WriteMode() WriteMode { return l.cfg.writeMode }
