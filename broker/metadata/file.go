package metadata

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/gantrymq/gantry/internal/fsx"
)

// Source says which copy of a file Load used.
type Source string

const (
	SourceNone   Source = "none"   // neither the file nor its backup exists
	SourceMain   Source = "main"   // the file itself
	SourceBackup Source = "backup" // the file was unusable; its .bak was used
)

var (
	errMissing = errors.New("missing")
	errEmpty   = errors.New("empty file")
)

// BackupPath returns the backup file kept for path.
func BackupPath(path string) string { return path + ".bak" }

// Save replaces path with data durably. If path holds a different version
// that parses as JSON, that version is first made durable as path's backup,
// so that at every instant path holds the old or the new version and the
// backup the previous good one. Content that does not parse never replaces a
// backup.
func Save(fsys fsx.FS, path string, data []byte) error {
	cur, err := fsx.ReadFile(fsys, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("metadata: read %s: %w", path, err)
	case !bytes.Equal(cur, data) && json.Valid(cur):
		if err := fsx.WriteFileAtomic(fsys, BackupPath(path), cur); err != nil {
			return fmt.Errorf("metadata: back up %s: %w", path, err)
		}
	}
	// Written even when unchanged: an earlier save may have renamed it in
	// place but failed to sync the directory.
	if err := fsx.WriteFileAtomic(fsys, path, data); err != nil {
		return fmt.Errorf("metadata: write %s: %w", path, err)
	}
	return nil
}

// Load reads path and passes it to into, which decodes and validates it. If
// path is missing, empty, not JSON or rejected by into, its backup is tried
// and SourceBackup returned. If neither exists, Load returns SourceNone. If
// a copy exists but none is accepted, it returns a *DamagedError naming both
// files. into must leave its target unchanged when it returns an error.
func Load(fsys fsx.FS, path string, into func([]byte) error) (Source, error) {
	src, _, err := load(fsys, path, into)
	return src, err
}

// load is Load that also returns why the main file was rejected.
func load(fsys fsx.FS, path string, into func([]byte) error) (src Source, mainErr, err error) {
	mainErr = tryFile(fsys, path, into)
	if mainErr == nil {
		return SourceMain, nil, nil
	}
	bak := BackupPath(path)
	bakErr := tryFile(fsys, bak, into)
	switch {
	case bakErr == nil:
		return SourceBackup, mainErr, nil
	case errors.Is(mainErr, errMissing) && errors.Is(bakErr, errMissing):
		return SourceNone, nil, nil
	}
	return "", mainErr, &DamagedError{Path: path, Backup: bak, MainErr: mainErr, BackupErr: bakErr}
}

func tryFile(fsys fsx.FS, name string, into func([]byte) error) error {
	b, err := fsx.ReadFile(fsys, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errMissing
	case err != nil:
		return err
	case len(bytes.TrimSpace(b)) == 0:
		return errEmpty
	case !json.Valid(b):
		return decodeStrict(b, new(any)) // for the syntax error's wording
	}
	return into(b)
}

// decodeStrict decodes exactly one JSON value with no unknown fields, so
// that truncation, garbage and foreign files are rejected.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("truncated JSON: %w", err)
		}
		return fmt.Errorf("bad JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("bad JSON: trailing data after the value")
	}
	return nil
}

// encode is the on-disk form of v: indented like RocketMQ's files.
func encode(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
