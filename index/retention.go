package index

import "slices"

// Truncate drops every entry at or past physEnd: the commit log's valid
// end after recovery, or an earlier offset below which the caller knows
// every entry was flushed (entries above it may be torn by a crash). Files
// starting at or past physEnd go whole; the file holding physEnd is cut
// after its last entry below it. Truncate returns the offset to re-index
// from: physEnd when a file was cut, else the endPhyOffset of the newest
// remaining file (its record is indexed again, so its keys may get
// duplicate entries, which Lookup returns once), or 0 when no file
// remains. Call it before the index is shared with readers.
func (s *Store) Truncate(physEnd int64) (reindexFrom int64, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	for {
		keep := len(s.files)
		for keep > 0 {
			f := s.files[keep-1]
			if !f.empty() && f.beginPhy.Load() < physEnd {
				break
			}
			keep--
		}
		rm := s.cut(0, keep)
		if err := s.removeFiles(rm); err != nil {
			return 0, err
		}
		if len(rm) > 0 {
			s.log.Info("truncated index", "physEnd", physEnd, "filesRemoved", len(rm))
		}
		if keep == 0 {
			return 0, nil
		}
		f := s.files[keep-1]
		if f.endPhy.Load() < physEnd {
			return f.endPhy.Load(), nil
		}
		s.mu.Lock()
		dropped, err := f.cutAt(physEnd)
		s.mu.Unlock()
		if err != nil {
			return 0, err
		}
		s.log.Info("truncated index file", "file", f.path, "physEnd", physEnd, "entriesDropped", dropped)
		if f.empty() {
			continue // it goes on the next pass
		}
		if err := f.syncAll(); err != nil {
			return 0, err
		}
		return physEnd, nil
	}
}

// DeleteBelow deletes, oldest first, the files whose endPhyOffset <
// physMin (retention), never the newest file.
func (s *Store) DeleteBelow(physMin int64) (filesRemoved int, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	n := 0
	for n < len(s.files)-1 && s.files[n].endPhy.Load() < physMin {
		n++
	}
	rm := s.cut(n, len(s.files))
	return len(rm), s.removeFiles(rm)
}

// cut keeps files[lo:hi] and returns the others, after which no reader can
// reach them (readers hold mu while walking). Writer only.
func (s *Store) cut(lo, hi int) []*indexFile {
	if lo == 0 && hi == len(s.files) {
		return nil
	}
	rm := append(slices.Clone(s.files[:lo]), s.files[hi:]...)
	s.mu.Lock()
	s.files = slices.Clone(s.files[lo:hi])
	s.mu.Unlock()
	return rm
}
