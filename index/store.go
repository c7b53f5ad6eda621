package index

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Store is a directory of index files, oldest first. See the package doc
// for which methods may run concurrently.
type Store struct {
	cfg Config
	log *slog.Logger

	// wmu serializes the writer side: Put, Truncate, DeleteBelow, Flush
	// and Close. Lock order: wmu, then mu.
	wmu     sync.Mutex
	created bool // a file was created or removed since the last Flush (guarded by wmu)

	// mu guards files and closed. Lookup holds it shared for its whole
	// walk; the writer holds it exclusively only to change the list and
	// to unmap removed files, so no reader ever touches an unmapped file.
	mu     sync.RWMutex
	files  []*indexFile // ordered by name (creation time) and phyOffset
	closed bool

	// prep delivers the first file, created in the background when the
	// store opened without any (guarded by wmu; nil once taken): creating
	// and syncing a preallocated file of hundreds of MiB held the first
	// message's dispatch up by over a second on a loaded machine.
	prep chan preparedFile
}

// preparedFile is the outcome of the background creation of a file.
type preparedFile struct {
	f   *indexFile
	err error
}

// Open opens the index files in cfg.Dir, creating the directory if needed.
// A file whose header is impossible is logged at Warn and deleted together
// with every newer file; EndPhyOffset then says where indexing must resume.
// ctx bounds Open only.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, log: cfg.Logger.With("component", "index")}
	if err := s.recover(ctx); err != nil {
		return nil, err
	}
	if len(s.files) == 0 {
		s.prep = make(chan preparedFile, 1)
		go func() { // joined by newFile or Close, which receive its result
			f, err := createFile(s.cfg.FS, s.cfg.Dir, fileName(s.cfg.Now()), int32(s.cfg.SlotCount), int32(s.cfg.EntryCount))
			s.prep <- preparedFile{f, err}
		}()
	}
	return s, nil
}

// takePrepared waits for the file being created in the background, if
// any, and returns it (nil if there is none or its creation failed).
// Writer only.
func (s *Store) takePrepared() *indexFile {
	if s.prep == nil {
		return nil
	}
	p := <-s.prep
	s.prep = nil
	if p.err != nil {
		s.log.Warn("creating the first index file in the background failed; creating it now", "err", p.err)
	}
	return p.f
}

// Put adds an index entry for key pointing at the record at phyOffset,
// stored at storeTimestamp (Unix milliseconds). phyOffsets must be
// non-decreasing across calls (several keys of one record share one
// offset). Put starts a new file when the newest one is full.
func (s *Store) Put(key string, phyOffset int64, storeTimestamp int64) error {
	return s.PutHash(KeyHash(key), phyOffset, storeTimestamp)
}

// PutHash is Put of a key whose KeyHash (or TopicKeyHash) is hash.
func (s *Store) PutHash(hash int32, phyOffset int64, storeTimestamp int64) error {
	if hash < 0 {
		return fmt.Errorf("index: key hash %d is negative; use KeyHash", hash)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if phyOffset < 0 {
		return fmt.Errorf("%w: %d", ErrNegativeOffset, phyOffset)
	}
	if end := s.endPhy(); phyOffset < end {
		return fmt.Errorf("%w: %d < %d", ErrOutOfOrder, phyOffset, end)
	}
	var f *indexFile
	if n := len(s.files); n > 0 && !s.files[n-1].full() {
		f = s.files[n-1]
	} else {
		var err error
		if f, err = s.newFile(); err != nil {
			return err
		}
	}
	if err := f.reserveNext(); err != nil { // before any byte is written
		return err
	}
	f.put(hash, phyOffset, storeTimestamp)
	return nil
}

// newFile creates the next file (or takes the one created in the
// background) and appends it to the list. Writer only.
//
// The newest file, full, is written no more: newFile first syncs all of it
// (its slots, which Flush leaves until a file is full, included), so that a
// crash finds every file but the newest whole, however many files fill
// between two Flushes (see doc.go).
func (s *Store) newFile() (*indexFile, error) {
	if n := len(s.files); n > 0 {
		if err := s.files[n-1].flush(); err != nil {
			return nil, err
		}
	}
	if f := s.takePrepared(); f != nil {
		if len(s.files) == 0 {
			s.mu.Lock()
			s.files = append(s.files, f)
			s.mu.Unlock()
			s.created = true
			return f, nil
		}
		if err := s.removeFiles([]*indexFile{f}); err != nil { // cannot happen: only newFile adds files
			return nil, err
		}
	}
	name := fileName(s.cfg.Now())
	if n := len(s.files); n > 0 && name <= s.files[n-1].name {
		// Same millisecond (or the clock went back): keep names unique and
		// in creation order.
		last, ok := parseFileName(s.files[n-1].name)
		if !ok {
			return nil, fmt.Errorf("index: cannot derive a name after %s", s.files[n-1].name)
		}
		name = fileName(last.Add(time.Millisecond))
	}
	f, err := createFile(s.cfg.FS, s.cfg.Dir, name, int32(s.cfg.SlotCount), int32(s.cfg.EntryCount))
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.files = append(s.files, f)
	s.mu.Unlock()
	s.created = true
	return f, nil
}

// Lookup returns the phyOffsets of up to max entries whose key hash equals
// key's and whose time lies in [begin, end] (Unix milliseconds, both
// inclusive), newest first, each offset at most once. An entry keeps its
// time as whole seconds after its file's beginTimestamp, so the record's
// store time is somewhere in that second: Lookup returns every entry whose
// second overlaps [begin, end], and the caller compares the record's real
// store time. Different keys can share a hash: the caller must also
// compare the key stored in each record.
func (s *Store) Lookup(key string, begin, end int64, max int) ([]int64, error) {
	return s.LookupHash(KeyHash(key), begin, end, max)
}

// LookupHash is Lookup of a key given by its hash (KeyHash, TopicKeyHash),
// for callers that hash without building the key.
func (s *Store) LookupHash(hash int32, begin, end int64, max int) ([]int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	if max <= 0 || begin > end {
		return nil, nil
	}
	var out []int64
	var set map[int64]struct{}
	seen := func(out []int64, phy int64) bool {
		if len(out) <= 16 {
			return slices.Contains(out, phy)
		}
		if set == nil {
			set = make(map[int64]struct{}, 2*len(out))
			for _, p := range out {
				set[p] = struct{}{}
			}
		}
		if _, ok := set[phy]; ok {
			return true
		}
		set[phy] = struct{}{} // the caller appends phy next
		return false
	}
	for i := len(s.files) - 1; i >= 0 && len(out) < max; i-- {
		out = s.files[i].lookup(hash, begin, end, max, out, seen)
	}
	return out, nil
}

// EndPhyOffset returns the phyOffset of the newest indexed entry, -1 when
// nothing is indexed. The dispatcher resumes indexing with the record AT
// this offset (not after it): a crash or a file roll may have split that
// record's keys, and re-indexing it only adds duplicates that Lookup hides.
func (s *Store) EndPhyOffset() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.endPhy()
}

// endPhy needs mu or wmu.
func (s *Store) endPhy() int64 {
	for i := len(s.files) - 1; i >= 0; i-- {
		if f := s.files[i]; !f.empty() {
			return f.endPhy.Load()
		}
	}
	return -1
}

// Files returns the number of index files.
func (s *Store) Files() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.files)
}

// Flush makes every entry added so far durable: for each file written since
// the last Flush it msyncs the new entries, the slots, then the header, and
// it syncs the directory if files were created or removed. It blocks Put
// while it runs.
func (s *Store) Flush() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.flush()
}

func (s *Store) flush() error {
	for _, f := range s.files {
		if err := f.flush(); err != nil {
			return err
		}
	}
	if s.created {
		if err := s.cfg.FS.SyncDir(s.cfg.Dir); err != nil {
			return fmt.Errorf("index: sync dir %s: %w", s.cfg.Dir, err)
		}
		s.created = false
	}
	return nil
}

// Close flushes and unmaps every file. Later calls return ErrClosed.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return ErrClosed
	}
	err := s.flush()
	if f := s.takePrepared(); f != nil { // never used: leave no empty file behind
		err = errors.Join(err, s.removeFiles([]*indexFile{f}))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, f := range s.files {
		f.unmap()
	}
	s.files = nil
	return err
}

// removeFiles takes rm (a set of files already cut from the list by the
// caller under mu) off the disk. Writer only.
func (s *Store) removeFiles(rm []*indexFile) error {
	var errs []error
	for _, f := range rm {
		f.unmap()
		if err := s.cfg.FS.Remove(f.path); err != nil {
			errs = append(errs, fmt.Errorf("index: remove %s: %w", f.path, err))
		}
	}
	if len(rm) > 0 {
		if err := s.cfg.FS.SyncDir(s.cfg.Dir); err != nil {
			errs = append(errs, fmt.Errorf("index: sync dir %s: %w", s.cfg.Dir, err))
		}
	}
	return errors.Join(errs...)
}
