package commitlog

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/writemode"
)

// FlushMode says when an append is acknowledged.
type FlushMode int

const (
	// AsyncFlush acknowledges after the in-memory append; a background
	// flusher makes data durable every FlushInterval (RocketMQ ASYNC_FLUSH).
	AsyncFlush FlushMode = iota
	// SyncFlush acknowledges only after the data is durable (RocketMQ
	// SYNC_FLUSH), flushing many appenders' records at once (group commit).
	SyncFlush
)

func (m FlushMode) String() string {
	if m == SyncFlush {
		return "SYNC_FLUSH"
	}
	return "ASYNC_FLUSH"
}

// ParseFlushMode parses RocketMQ's flushDiskType values.
func ParseFlushMode(s string) (FlushMode, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "ASYNC_FLUSH", "ASYNC", "":
		return AsyncFlush, nil
	case "SYNC_FLUSH", "SYNC":
		return SyncFlush, nil
	}
	return 0, fmt.Errorf("commitlog: unknown flush mode %q (want SYNC_FLUSH or ASYNC_FLUSH)", s)
}

// How appended bytes reach the segment files is the log's own choice
// (withDefaults): staged and written whole, with O_DIRECT where the file
// system takes it (writeBuffered), under either flush mode. The other
// ways are kept for the module's tests (internal/writemode) and for the
// measurements that chose between them:
// docs/decisions/0023-commit-log-chooses-how-it-writes.md.
//
//   - writeMapped copies records straight into the segment's mapping and
//     flushes with msync; the segment is pre-faulted ahead of the writes
//     (PrefaultAhead).
//   - writeBuffered copies records into a staging buffer, which is written
//     into the segment files whole, one write per segment: large writes
//     with O_DIRECT, from the buffer to the disk (stage.go). Readers see
//     data once written. Under SyncFlush the flusher writes and
//     fdatasyncs (one syscall pair per group commit, no write faults).
//     Under AsyncFlush each appender returns once its records are
//     written, writing what is staged itself when no one else is (group
//     writes), and small writes (under DirectBytes) are copied into the
//     mapping instead, a window after them pre-faulted, so that one
//     message at a time takes neither syscall nor fault; the flusher syncs
//     every FlushInterval. Large writes touch no page cache, which on a VM
//     that gives its free memory back to the host costs a page fault on
//     the host for every new page.
//   - writeDirect writes each append into its segment file with one pwrite
//     before the append returns (the records are stamped in a scratch
//     copy); readers read through the mapping, which shares the page
//     cache; the flusher fdatasyncs. No page is faulted in for writing,
//     which costs less CPU than faulting the mapping in, but each append
//     makes a syscall, which one send at a time waits for. Its page cache
//     holds small folios: readers of many records copy them (ReadCopy).
//   - writeHybrid writes an append of DirectBytes or more as writeDirect
//     does and copies a smaller one into the mapping as writeMapped does;
//     the flusher msyncs. A page pwrite fills whole is never zeroed first;
//     but reading pwrite's small folios back through the mapping costs
//     more, so readers of many records copy them too.
const (
	writeAuto     = writemode.Auto
	writeMapped   = writemode.Mapped
	writeBuffered = writemode.Buffered
	writeDirect   = writemode.Direct
	writeHybrid   = writemode.Hybrid
)

// Config configures a Log. The zero value of every field means its default.
type Config struct {
	// Dir holds the segment files. Required.
	Dir string
	// StateDir holds the abort marker, the checkpoint, the recovery report and
	// copies of skipped damaged ranges. Default: Dir.
	StateDir string
	// FS is the filesystem. Default: fsx.OS.
	FS fsx.FS
	// SegmentBytes is the size of each segment file (mappedFileSizeCommitLog).
	// Default 1 GiB. Existing segments keep the size they were created with.
	SegmentBytes int64

	// FlushMode: AsyncFlush (default) or SyncFlush. How appends are
	// written follows from it; see writeBuffered.
	FlushMode FlushMode
	// writeMode is how bytes reach the files (writeAuto: the log's
	// choice); set by the module's tests only (internal/writemode).
	writeMode writemode.Mode
	// SyncFlushTimeout bounds how long a SyncFlush append waits for its
	// flush before answering ErrFlushTimeout (the data stays stored). Default 5 s.
	SyncFlushTimeout time.Duration
	// FlushInterval is the async flusher's period (flushIntervalCommitLog). Default 500 ms.
	FlushInterval time.Duration
	// FlushLeastPages: the async flusher flushes only when at least this many
	// 4 KiB pages are dirty (flushCommitLogLeastPages). Default 4.
	FlushLeastPages int
	// FlushThoroughInterval: the async flusher flushes whatever is dirty at
	// least this often (flushCommitLogThoroughInterval). Default 10 s.
	FlushThoroughInterval time.Duration
	// MaxPendingBytes bounds the staging buffer: appenders wait while
	// this much is not yet written. Default 64 MiB.
	MaxPendingBytes int
	// noDirectWrites has writeBuffered write every flush through the page
	// cache, and writeAuto pick writeMapped for AsyncFlush; set by tests
	// only. By default large flushes are written with O_DIRECT where the
	// file system takes it and SegmentBytes is a multiple of 4 KiB (see
	// stage.go and docs/decisions/0023-commit-log-chooses-how-it-writes.md).
	noDirectWrites bool
	// ZeroFillAhead has the preallocator write zeros over each new segment
	// so that later writes land in already-written extents (RocketMQ's
	// warm-up; on ext4 a write into a fallocated-but-unwritten extent can
	// cost a journal commit per flush). Default off: the extra gigabyte of
	// writes per segment cost more sync-flush throughput than it saved
	// (docs/decisions/0023-commit-log-chooses-how-it-writes.md).
	ZeroFillAhead *bool
	// PrefaultAhead is how many bytes ahead of the append position are kept
	// pre-faulted (MADV_POPULATE_WRITE) in the background with writeMapped,
	// so that appends copy into mapped pages instead of taking page faults
	// under the append lock. The window slides with the writes: an idle log
	// costs nothing and dirties no page it does not need. Default 64 MiB;
	// capped at SegmentBytes; negative turns pre-faulting off. writeBuffered
	// under AsyncFlush keeps at most 4 MiB after its small writes
	// (smallWindow).
	PrefaultAhead int64
	// DirectBytes is the smallest append writeHybrid writes with pwrite,
	// and the smallest write of writeBuffered under AsyncFlush that is not
	// copied into the mapping.
	// Default 16 KiB: four pages, so that pwrite has the kernel zero at most
	// the partial first and last pages.
	DirectBytes int
	// CheckpointInterval is how often the flushed offset is persisted. Default 1 s.
	CheckpointInterval time.Duration

	// SkipCorrupt makes Open keep going past a damaged record that is
	// followed by valid ones: the damaged range is reported, saved to
	// StateDir/corrupt/ and marked as a hole, and every valid record after it
	// is kept. Without it Open fails with a *CorruptError.
	SkipCorrupt bool
	// VerifyAll makes recovery check every segment, not only those after the
	// checkpoint.
	VerifyAll bool

	// Retention (RocketMQ cleanup, every CleanInterval).
	// FileReservedTime: sealed segments whose newest record is older than this
	// may be deleted (fileReservedTime). Default 72 h.
	FileReservedTime time.Duration
	// DeleteWhen: hours of the day (local clock) when expired segments are
	// deleted, ";"-separated (deleteWhen). Default "04".
	DeleteWhen string
	// DiskMaxUsedRatio: above this used fraction expired segments are deleted
	// at any hour (diskMaxUsedSpaceRatio). Default 0.75.
	DiskMaxUsedRatio float64
	// DiskForceCleanRatio: above this the oldest segments are deleted even if
	// not expired (diskSpaceCleanForciblyRatio). Default 0.85.
	DiskForceCleanRatio float64
	// DiskFullRatio: above this appends are refused with ErrDiskFull until
	// usage drops (diskSpaceWarningLevelRatio). Default 0.90.
	DiskFullRatio float64
	// CleanInterval is the retention period. Default 10 s. Negative disables
	// the background loop (Log.Clean can still be called).
	CleanInterval time.Duration
	// DeleteFilesBatchMax bounds deletions per pass. Default 10.
	DeleteFilesBatchMax int
	// KeepFrom, if set, returns the lowest log offset retention must keep:
	// a segment holding any offset at or above it is not deleted for its
	// age (math.MaxInt64 pins nothing). Deletion forced by disk use above
	// DiskForceCleanRatio ignores it. Clean calls it at most once a pass,
	// only when an expired segment is due, under its own lock: it must not
	// call Clean.
	KeepFrom func() int64
	// DeleteFloor, if set, returns an offset no deletion passes: a segment
	// holding any offset at or above it is never deleted, neither for its
	// age nor forced by disk use above DiskForceCleanRatio. The store
	// passes its dispatch position, so that a record is never deleted
	// before its consume-queue entry exists. Clean calls it at most once a
	// pass, only when a segment is due, under its own lock: it must not
	// call Clean.
	DeleteFloor func() int64

	// OnCommit, if set, is called each time MaxOffset grows, with the new
	// value, from the goroutine that made it grow (an appender holding the
	// append lock, or the flusher). It must not block or call into the Log:
	// a dispatcher uses it to wake up.
	OnCommit func(end int64)

	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives lifecycle and anomaly logs. Default: discard.
	Logger *slog.Logger
}

const (
	defaultSegmentBytes = 1 << 30
	// defaultPrefaultAhead: a fraction of a second of a busy broker's
	// appends, which pre-faulting outruns
	// (docs/decisions/0023-commit-log-chooses-how-it-writes.md).
	defaultPrefaultAhead = 64 << 20
	minSegmentBytes      = 4096
)

// WithDefaults returns c with every zero field set to its default, as
// Open uses it.
func (c Config) WithDefaults() Config { return c.withDefaults() }

func (c Config) withDefaults() Config {
	if c.StateDir == "" {
		c.StateDir = c.Dir
	}
	if c.FS == nil {
		c.FS = fsx.OS
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = defaultSegmentBytes
	}
	if c.DirectBytes == 0 {
		c.DirectBytes = 16 << 10
	}
	if c.PrefaultAhead == 0 {
		c.PrefaultAhead = defaultPrefaultAhead
	}
	c.PrefaultAhead = min(c.PrefaultAhead, c.SegmentBytes)
	if c.writeMode == writeAuto {
		c.writeMode = writeMapped
		if c.FlushMode == SyncFlush || !c.noDirectWrites {
			c.writeMode = writeBuffered
		}
	}
	if c.SyncFlushTimeout == 0 {
		c.SyncFlushTimeout = 5 * time.Second
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = 500 * time.Millisecond
	}
	if c.FlushLeastPages == 0 {
		c.FlushLeastPages = 4
	}
	if c.FlushThoroughInterval == 0 {
		c.FlushThoroughInterval = 10 * time.Second
	}
	if c.MaxPendingBytes == 0 {
		c.MaxPendingBytes = 64 << 20
	}
	if c.ZeroFillAhead == nil {
		off := false
		c.ZeroFillAhead = &off
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = time.Second
	}
	if c.FileReservedTime == 0 {
		c.FileReservedTime = 72 * time.Hour
	}
	if c.DeleteWhen == "" {
		c.DeleteWhen = "04"
	}
	if c.DiskMaxUsedRatio == 0 {
		c.DiskMaxUsedRatio = 0.75
	}
	if c.DiskForceCleanRatio == 0 {
		c.DiskForceCleanRatio = 0.85
	}
	if c.DiskFullRatio == 0 {
		c.DiskFullRatio = 0.90
	}
	if c.CleanInterval == 0 {
		c.CleanInterval = 10 * time.Second
	}
	if c.DeleteFilesBatchMax == 0 {
		c.DeleteFilesBatchMax = 10
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c (after defaults).
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("commitlog: Dir is required"))
	}
	if c.SegmentBytes < minSegmentBytes || c.SegmentBytes > 1<<31-1 {
		errs = append(errs, fmt.Errorf("commitlog: SegmentBytes %d out of range [%d, %d]", c.SegmentBytes, minSegmentBytes, 1<<31-1))
	}
	if c.FlushMode != AsyncFlush && c.FlushMode != SyncFlush {
		errs = append(errs, fmt.Errorf("commitlog: unknown FlushMode %d", c.FlushMode))
	}
	if c.writeMode != writeMapped && c.writeMode != writeBuffered && c.writeMode != writeDirect && c.writeMode != writeHybrid {
		errs = append(errs, fmt.Errorf("commitlog: unknown write mode %d", c.writeMode))
	}
	for name, d := range map[string]time.Duration{
		"SyncFlushTimeout": c.SyncFlushTimeout, "FlushInterval": c.FlushInterval,
		"FlushThoroughInterval": c.FlushThoroughInterval, "CheckpointInterval": c.CheckpointInterval,
		"FileReservedTime": c.FileReservedTime,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("commitlog: %s must not be negative, got %s", name, d))
		}
	}
	if c.DirectBytes < 0 {
		errs = append(errs, fmt.Errorf("commitlog: DirectBytes must not be negative, got %d", c.DirectBytes))
	}
	if c.FlushLeastPages < 0 {
		errs = append(errs, fmt.Errorf("commitlog: FlushLeastPages must not be negative, got %d", c.FlushLeastPages))
	}
	if c.MaxPendingBytes < 0 {
		errs = append(errs, fmt.Errorf("commitlog: MaxPendingBytes must not be negative, got %d", c.MaxPendingBytes))
	}
	if _, err := parseHours(c.DeleteWhen); err != nil {
		errs = append(errs, err)
	}
	for name, r := range map[string]float64{
		"DiskMaxUsedRatio": c.DiskMaxUsedRatio, "DiskForceCleanRatio": c.DiskForceCleanRatio, "DiskFullRatio": c.DiskFullRatio,
	} {
		if r <= 0 || r > 1 {
			errs = append(errs, fmt.Errorf("commitlog: %s must be in (0, 1], got %g", name, r))
		}
	}
	if c.DeleteFilesBatchMax < 0 {
		errs = append(errs, fmt.Errorf("commitlog: DeleteFilesBatchMax must not be negative, got %d", c.DeleteFilesBatchMax))
	}
	return errors.Join(errs...)
}

// parseHours parses deleteWhen: hours 0..23 separated by ';'.
func parseHours(s string) ([24]bool, error) {
	var hours [24]bool
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		h, err := strconv.Atoi(part)
		if err != nil || h < 0 || h > 23 {
			return hours, fmt.Errorf("commitlog: DeleteWhen %q: %q is not an hour 0..23", s, part)
		}
		hours[h] = true
	}
	return hours, nil
}
