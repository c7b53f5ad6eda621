package index

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
)

// recover opens the files of cfg.Dir in name order. It deletes empty files
// that are not the newest, and, from the first file whose header is
// impossible (or whose phyOffsets overlap its predecessor's), that file and
// every newer one.
func (s *Store) recover(ctx context.Context) error {
	fsys, dir := s.cfg.FS, s.cfg.Dir
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("index: create %s: %w", dir, err)
	}
	all, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("index: list %s: %w", dir, err)
	}
	var names []string
	for _, n := range all {
		if _, ok := parseFileName(n); ok {
			names = append(names, n)
		}
	}
	for i, name := range names {
		if err := ctx.Err(); err != nil {
			s.closeAll()
			return err
		}
		f, err := openFile(fsys, dir, name)
		if err == nil {
			err = s.checkOrder(f)
			if err != nil {
				f.unmap()
			}
		}
		if errors.Is(err, errImpossible) {
			return s.dropFrom(names[i:], err)
		}
		if err != nil {
			s.closeAll()
			return err
		}
		s.files = append(s.files, f)
	}
	if err := s.dropEmpty(); err != nil {
		return err
	}
	// Only the newest file can hold entries written since the last sync
	// (a full file is synced before the next one starts), and the newest
	// may be empty: rebuild the two newest files' chains so that a
	// crash-torn entry cannot hide older ones.
	for _, f := range s.files[max(0, len(s.files)-rebuildFiles):] {
		n, err := f.rebuild()
		if err != nil {
			s.closeAll()
			return err
		}
		if n > 0 {
			s.log.Warn("skipped torn index entries", "file", f.path, "entries", n)
		}
	}
	return nil
}

// rebuildFiles is how many of the newest files Open rebuilds.
const rebuildFiles = 2

// checkOrder rejects a file whose entries start below its predecessor's.
func (s *Store) checkOrder(f *indexFile) error {
	if f.empty() {
		return nil
	}
	prev := s.endPhy()
	if b := f.beginPhy.Load(); b < prev {
		return fmt.Errorf("%w: %s: beginPhyOffset %d below the previous file's endPhyOffset %d", errImpossible, f.path, b, prev)
	}
	return nil
}

// dropFrom deletes the files named names (the first one is damaged).
func (s *Store) dropFrom(names []string, cause error) error {
	s.log.Warn("index file has an impossible header; deleting it and every newer file, indexing must restart from the previous file's endPhyOffset",
		"err", cause, "files", len(names), "resumeFrom", s.endPhy())
	var errs []error
	for _, n := range names {
		if err := s.cfg.FS.Remove(filepath.Join(s.cfg.Dir, n)); err != nil {
			errs = append(errs, fmt.Errorf("index: remove %s: %w", n, err))
		}
	}
	if err := s.cfg.FS.SyncDir(s.cfg.Dir); err != nil {
		errs = append(errs, fmt.Errorf("index: sync dir %s: %w", s.cfg.Dir, err))
	}
	if err := errors.Join(errs...); err != nil {
		s.closeAll()
		return err
	}
	return s.dropEmpty()
}

// dropEmpty deletes empty files other than the newest (left by a crash
// right after a roll); they would break the phyOffset order of the list.
func (s *Store) dropEmpty() error {
	var keep, rm []*indexFile
	for i, f := range s.files {
		if f.empty() && i < len(s.files)-1 {
			rm = append(rm, f)
		} else {
			keep = append(keep, f)
		}
	}
	if len(rm) == 0 {
		return nil
	}
	s.files = keep
	if err := s.removeFiles(rm); err != nil {
		s.closeAll()
		return err
	}
	return nil
}

func (s *Store) closeAll() {
	for _, f := range s.files {
		f.unmap()
	}
	s.files = nil
}
