package commitlog

import (
	"errors"
	"sync"
	"unsafe"

	"github.com/gantrymq/gantry/internal/fsx"
	"golang.org/x/sys/unix"
)

// The block cache: reads of segments written directly (stage.go).
//
// A direct write leaves nothing in the page cache, so the log's older
// bytes, past what the last flushes keep in memory (l.staged), are read
// from the disk. Through the page cache that read allocates a page for
// every 4 KiB of the log, most of its cost where memory given back to a
// VM's host is faulted in again (docs/decisions/0024-reading-the-commit-log.md).
// So these reads go around the page cache: blockBytes at a time with O_DIRECT
// (fsx.DirectWriter.ReadAtDirect) into a few buffers of the log's own,
// reused, which readers copy from. A consumer going through a backlog
// reads each block from the disk once; several going through the same
// stretch of the log together share the blocks; one reading far from the
// others has blocks of its own, within cacheBlocks in all.

// blockBytes is the size of a cached block: large enough that a reader
// going through the log waits for the disk once a MiB, small enough that
// the cache stays a few MiB.
const blockBytes = 1 << 20

// cacheBlocks is how many blocks the cache holds at most.
const cacheBlocks = 16

// block is a cached stretch of a segment: the log bytes [base, base+n) in
// mem. An empty one (n 0, not loading) holds nothing.
type block struct {
	mem     []byte // blockBytes of the cache's arena; nil while it has none
	base    int64  // log offset of mem[0]
	n       int
	refs    int    // readers copying from it, and its loader
	used    uint64 // the cache's clock when it was last handed out
	loading bool
}

// blockCache is the log's block cache; init readies it.
type blockCache struct {
	mu      sync.Mutex
	changed sync.Cond // a block finished loading or became idle; L is mu
	blocks  [cacheBlocks]block
	clock   uint64
	off     bool // closed, or a direct read was refused: not used any more
	// arena holds the blocks' memory, one blockBytes after the other,
	// mapped when a block is first loaded (arenaMap is the whole mapping)
	// and unmapped at Close or when the log is idle (trim). It is aligned
	// to a huge page and advised huge: an O_DIRECT read pins every page of
	// its buffer, and pinning 256 small pages a block was a visible share
	// of a consuming broker's CPU (docs/decisions/0024-reading-the-commit-log.md).
	arena, arenaMap []byte
}

func (c *blockCache) init() { c.changed.L = &c.mu }

// free turns the cache off and unmaps its memory (at Close), or, if a
// reader still copies from a block, has release unmap it.
func (c *blockCache) free() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = true
	c.changed.Broadcast() // waiters give up
	c.trimLocked()
}

// trim unmaps the cache's memory, emptying every block, unless a block is
// in use (an idle log's, see trimIdle); it is mapped again when needed.
func (c *blockCache) trim() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trimLocked()
}

func (c *blockCache) trimLocked() {
	if c.arenaMap == nil {
		return
	}
	for i := range c.blocks {
		if b := &c.blocks[i]; b.refs > 0 || b.loading {
			return
		}
	}
	freeStage(c.arenaMap)
	c.arena, c.arenaMap = nil, nil
	c.blocks = [cacheBlocks]block{}
}

// mapArena maps the blocks' memory (newStage's, a huge page more, so that
// it can start on one) and hands it out. c.mu is held.
func (c *blockCache) mapArena() {
	const huge = 2 << 20
	size := cacheBlocks * blockBytes
	m := newStage(size + huge)
	m = m[:cap(m)]
	at := int(-uintptr(unsafe.Pointer(&m[0])) & (huge - 1))
	c.arena, c.arenaMap = m[at:at+size:at+size], m
	_ = unix.Madvise(c.arena, unix.MADV_HUGEPAGE) // advisory
	for i := range c.blocks {
		c.blocks[i].mem = c.arena[i*blockBytes : (i+1)*blockBytes]
	}
}

// drop empties b, which no one holds, and unmaps the cache's memory if it
// is off and no block is in use any more. c.mu is held.
func (c *blockCache) drop(b *block) {
	*b = block{mem: b.mem}
	if c.off {
		c.trimLocked()
	}
}

// readBlocks copies into dst the log bytes from off on, within seg and
// below the readable end, from cached blocks, reading missing ones from
// the disk with O_DIRECT; it returns how many bytes it copied, which is
// short where the cache cannot serve the rest (the caller reads it from
// the file the usual way). The caller holds a reader reference to seg and
// has checked that [off, off+len(dst)) is readable.
//
// Only whole blocks are cached, below the readable end: the block the
// appends are still filling is read from the file, since a direct read,
// which has to end on a 4 KiB boundary, would also read the bytes being
// written past that end (through the mapping, under AsyncFlush), and a
// block cached short would be read again anyway.
func (l *Log) readBlocks(seg *segment, dst []byte, off int64) int {
	d, ok := seg.file.(fsx.DirectWriter)
	if !ok || seg.size%fsx.DirectAlign != 0 {
		return 0
	}
	n := 0
	for n < len(dst) {
		at := off + int64(n)
		if blockEnd(seg, at) > l.committed.Load() {
			break
		}
		b := l.blocks.get(l, seg, d, at)
		if b == nil {
			break
		}
		k := copy(dst[n:], b.mem[at-b.base:b.n])
		l.blocks.release(b)
		if k == 0 {
			break
		}
		n += k
	}
	return n
}

// blockEnd is the end of the block of seg that holds log offset at.
func blockEnd(seg *segment, at int64) int64 {
	return min(seg.base+(at-seg.base)&^(blockBytes-1)+blockBytes, seg.end())
}

// get returns the block holding log offset at, with a reference the caller
// releases, reading it from the disk if no block holds it; it waits while
// another reader loads that block. It returns nil if the cache is off, the
// read fails, or every block is in use: the caller then reads through the
// page cache rather than wait, so that more readers than blocks (a larger
// machine's) are never held back by the cache's size.
func (c *blockCache) get(l *Log, seg *segment, d fsx.DirectWriter, at int64) *block {
	fileOff := (at - seg.base) &^ (blockBytes - 1)
	base := seg.base + fileOff
	c.mu.Lock()
	for !c.off {
		var hit, idle *block
		for i := range c.blocks {
			x := &c.blocks[i]
			if x.base == base && (x.loading || at < x.base+int64(x.n)) {
				hit = x
				break
			}
			if x.refs == 0 && !x.loading && (idle == nil || x.used < idle.used) {
				idle = x // the least recently used idle block (an empty one has used 0)
			}
		}
		switch {
		case hit != nil && !hit.loading:
			hit.refs++
			c.clock++
			hit.used = c.clock
			c.mu.Unlock()
			return hit
		case hit == nil && idle != nil:
			return c.load(l, seg, d, idle, base, at)
		case hit == nil:
			c.mu.Unlock()
			return nil // every block in use
		}
		c.changed.Wait() // another reader is loading this block
	}
	c.mu.Unlock()
	return nil
}

// load reads into b, which no one holds, the whole block of seg at log
// offset base (blockEnd; readable, see readBlocks), and returns it with a
// reference, or nil if the read fails or comes short of log offset at.
// c.mu is held on entry and released on return; not during the read.
func (c *blockCache) load(l *Log, seg *segment, d fsx.DirectWriter, b *block, base, at int64) *block {
	if b.mem == nil {
		c.mapArena()
	}
	b.base, b.n, b.loading, b.refs = base, 0, true, 1
	c.clock++
	b.used = c.clock
	c.mu.Unlock()
	l.stats.blockReads.Add(1)

	fileOff := base - seg.base
	size := blockEnd(seg, base) - base
	n, err := d.ReadAtDirect(b.mem[:size], fileOff)

	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.changed.Broadcast()
	b.loading = false
	if c.off || err != nil || int64(n) <= at-base {
		if errors.Is(err, errors.ErrUnsupported) {
			c.off = true
			l.log.Info("reading the commit log through the page cache: the file system does not take direct reads", "segment", seg.path, "err", err)
		} else if err != nil {
			l.log.Debug("direct read failed; reading through the page cache", "segment", seg.path, "offset", fileOff, "err", err)
		}
		c.drop(b)
		return nil
	}
	b.n = int(min(int64(n), size))
	return b
}

// release drops a reference get returned b with.
func (c *blockCache) release(b *block) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.refs--; b.refs == 0 {
		if c.off {
			c.drop(b)
		}
		c.changed.Broadcast()
	}
}
