package metadata

import (
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/gantrymq/gantry/internal/fsx"
)

// DataVersion is RocketMQ's change stamp for a table: the time of the last
// change (Unix ms) and the number of changes.
type DataVersion struct {
	Timestamp int64 `json:"timestamp"`
	Counter   int64 `json:"counter"`
}

func (v *DataVersion) next(now time.Time) {
	v.Timestamp = now.UnixMilli()
	v.Counter++
}

// table is one metadata file's contents in memory. T is the file's JSON
// document; validate checks (and may normalize) a decoded one.
type table[T any] struct {
	path     string
	validate func(*T) error

	mu    sync.RWMutex
	doc   T
	gen   uint64 // changes made so far
	saved uint64 // gen as of the last successful save
}

func newTable[T any](dir, name string, empty T, validate func(*T) error) *table[T] {
	return &table[T]{path: filepath.Join(dir, name), doc: empty, validate: validate}
}

func (t *table[T]) filePath() string { return t.path }

// load fills the table from its file or backup (see Load).
func (t *table[T]) load(fsys fsx.FS) (src Source, mainErr, err error) {
	return load(fsys, t.path, func(b []byte) error {
		var doc T
		if err := decodeStrict(b, &doc); err != nil {
			return err
		}
		if err := t.validate(&doc); err != nil {
			return err
		}
		t.mu.Lock()
		t.doc = doc
		t.mu.Unlock()
		return nil
	})
}

// repair rewrites the main file from memory after a fallback to the backup.
// It bypasses Save because the main file may be valid JSON with bad values,
// which must not replace the good backup.
func (t *table[T]) repair(fsys fsx.FS) error {
	t.mu.RLock()
	b, err := encode(t.doc)
	t.mu.RUnlock()
	if err == nil {
		err = fsx.WriteFileAtomic(fsys, t.path, b)
	}
	if err != nil {
		return fmt.Errorf("metadata: repair %s: %w", t.path, err)
	}
	return nil
}

// save writes the table if it changed since the last successful save.
// Changes made while the file is written stay dirty for the next save.
func (t *table[T]) save(fsys fsx.FS) error {
	t.mu.RLock()
	if t.gen == t.saved {
		t.mu.RUnlock()
		return nil
	}
	gen := t.gen
	b, err := encode(t.doc)
	t.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("metadata: encode %s: %w", t.path, err)
	}
	if err := Save(fsys, t.path, b); err != nil {
		return err
	}
	t.mu.Lock()
	t.saved = gen
	t.mu.Unlock()
	return nil
}

// read runs f with the table read-locked.
func (t *table[T]) read(f func(*T)) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	f(&t.doc)
}

// update runs f with the table locked; if f reports a change, the table
// becomes dirty.
func (t *table[T]) update(f func(*T) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f(&t.doc) {
		t.gen++
	}
}
