package metadata

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Snapshot is the whole metadata as a slave copies it from its master
// (docs/REPLICATION.md, "Metadata"): every table's document, as its file
// holds it.
type Snapshot struct {
	Topics  json.RawMessage `json:"topics"`
	Groups  json.RawMessage `json:"groups"`
	Offsets json.RawMessage `json:"offsets"`
	Delays  json.RawMessage `json:"delays"`
}

// Version changes whenever a table changes: the sum of the tables' change
// counts, which only grow. Cheap: for a replication stream to look at
// often.
func (m *Metadata) Version() uint64 {
	var v uint64
	for _, g := range []func() uint64{m.topics.generation, m.groups.generation, m.offsets.generation, m.delays.generation} {
		v += g()
	}
	return v
}

// Snapshot returns every table's document and the version it holds (a
// change made while it is taken may be in it or not; its version is then
// newer than the one returned, so it goes out with the next snapshot).
func (m *Metadata) Snapshot() (uint64, Snapshot, error) {
	v := m.Version()
	var s Snapshot
	var errs []error
	for _, part := range []struct {
		dst *json.RawMessage
		enc func() ([]byte, error)
	}{
		{&s.Topics, m.topics.encodeDoc},
		{&s.Groups, m.groups.encodeDoc},
		{&s.Offsets, m.offsets.encodeDoc},
		{&s.Delays, m.delays.encodeDoc},
	} {
		b, err := part.enc()
		errs = append(errs, err)
		*part.dst = b
	}
	return v, s, errors.Join(errs...)
}

// Restore replaces every table with the snapshot's documents, checked as
// Open checks the files: a snapshot with any document missing or invalid
// changes nothing and returns an error naming it. A table that holds its
// document already is left alone (not saved again, its version kept); the
// others are saved before Restore returns.
func (m *Metadata) Restore(s Snapshot) error {
	topics, err := decodeDoc(s.Topics, "topics", validateTopics)
	if err != nil {
		return err
	}
	groups, err := decodeDoc(s.Groups, "groups", validateGroups)
	if err != nil {
		return err
	}
	offsets, err := decodeDoc(s.Offsets, "offsets", validateOffsets)
	if err != nil {
		return err
	}
	delays, err := decodeDoc(s.Delays, "delays", validateDelays)
	if err != nil {
		return err
	}
	m.topics.replaceIfChanged(topics, s.Topics)
	m.groups.replaceIfChanged(groups, s.Groups)
	m.offsets.replaceIfChanged(offsets, s.Offsets)
	m.delays.replaceIfChanged(delays, s.Delays)
	return m.Save()
}

// decodeDoc decodes and checks one document of a snapshot.
func decodeDoc[T any](b json.RawMessage, name string, validate func(*T) error) (T, error) {
	var doc T
	if len(b) == 0 {
		return doc, fmt.Errorf("%w: snapshot has no %s document", ErrInvalid, name)
	}
	if err := decodeStrict(b, &doc); err != nil {
		return doc, fmt.Errorf("%w: snapshot's %s document: %w", ErrInvalid, name, err)
	}
	if err := validate(&doc); err != nil {
		return doc, fmt.Errorf("snapshot's %s document: %w", name, err)
	}
	return doc, nil
}

// generation returns the table's change count.
func (t *table[T]) generation() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.gen
}

// encodeDoc returns the table's document as compact JSON.
func (t *table[T]) encodeDoc() ([]byte, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return json.Marshal(t.doc)
}

// replaceIfChanged makes doc, whose encoding is raw, the table's
// document, to be saved, unless the table holds it already: a slave takes
// a snapshot whenever any table changed, and saves only those that did.
func (t *table[T]) replaceIfChanged(doc T, raw []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, err := json.Marshal(t.doc); err == nil && bytes.Equal(cur, raw) {
		return
	}
	t.doc = doc
	t.gen++
}
