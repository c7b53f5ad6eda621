package index

import "slices"

// Truncate drops every entry at or past physEnd, the commit log's valid
// end after recovery. It deletes, newest first, every file whose
// endPhyOffset >= physEnd (and empty files at the end), and returns the
// offset to re-index from: the endPhyOffset of the newest remaining file,
// or 0 when none remains. The caller re-dispatches every record with
// phyOffset >= reindexFrom. The record at reindexFrom itself is indexed
// again, so its keys may get duplicate entries (with identical
// phyOffsets); Lookup returns each offset once.
func (s *Store) Truncate(physEnd int64) (reindexFrom int64, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	keep := len(s.files)
	for keep > 0 {
		f := s.files[keep-1]
		if !f.empty() && f.endPhy.Load() < physEnd {
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
	return max(s.endPhy(), 0), nil
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
