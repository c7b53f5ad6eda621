package store

import (
	"errors"
	"fmt"

	"github.com/gantrymq/gantry/commitlog"
	"github.com/gantrymq/gantry/index"
)

// ErrTooSmall means the store's filesystem cannot hold the files the store
// needs to work: an index file and two commit-log segments (the active one
// and the next, prepared ahead) within the share of the filesystem the log
// may fill (Log.DiskFullRatio). Open refuses such a store rather than
// acknowledge messages it could never index.
var ErrTooSmall = errors.New("store: filesystem too small")

// SpaceError is the ErrTooSmall of a store: what it needs and what the
// filesystem holds.
type SpaceError struct {
	Root string
	// Usable is the filesystem's size times Log.DiskFullRatio: what the
	// store may fill before appends are refused.
	Usable, FilesystemBytes int64
	DiskFullRatio           float64
	// IndexFileBytes is the size of an index file of IndexSlots slots and
	// IndexEntries entries; SegmentBytes a commit-log segment's.
	IndexFileBytes, SegmentBytes int64
	IndexSlots, IndexEntries     int
}

func (e *SpaceError) Error() string {
	return fmt.Sprintf("store: the filesystem of %s holds %s, of which the store may fill %s (%.0f%%, the disk-full ratio); "+
		"it needs at least %s for an index file of %s (%d hash slots, %d entries) and two commit-log segments of %s",
		e.Root, mib(e.FilesystemBytes), mib(e.Usable), e.DiskFullRatio*100, mib(e.IndexFileBytes+2*e.SegmentBytes),
		mib(e.IndexFileBytes), e.IndexSlots, e.IndexEntries, mib(e.SegmentBytes))
}

// Unwrap makes a SpaceError match ErrTooSmall.
func (e *SpaceError) Unwrap() error { return ErrTooSmall }

// mib formats a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// checkSpace refuses a filesystem too small for the store (SpaceError).
// The filesystem's size counts, not its free space: a full disk is what
// the dispatch stall and the commit log's disk-full guard are for.
func (s *Store) checkSpace(lc commitlog.Config, ic index.Config) error {
	u, err := s.cfg.FS.DiskUsage(s.cfg.Root)
	if err != nil || u.Total <= 0 {
		s.log.Warn("cannot tell the store's filesystem size; not checking that it holds an index file", "err", err)
		return nil
	}
	lc, ic = lc.WithDefaults(), ic.WithDefaults()
	e := &SpaceError{Root: s.cfg.Root, FilesystemBytes: u.Total, DiskFullRatio: lc.DiskFullRatio,
		Usable: int64(float64(u.Total) * lc.DiskFullRatio), IndexFileBytes: ic.FileBytes(), SegmentBytes: lc.SegmentBytes,
		IndexSlots: ic.SlotCount, IndexEntries: ic.EntryCount}
	if e.IndexFileBytes+2*e.SegmentBytes > e.Usable {
		return e
	}
	return nil
}
