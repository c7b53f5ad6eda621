package delivery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/gantrymq/gantry/broker/metadata"
	"github.com/gantrymq/gantry/internal/fsx"
)

// StateSnapshot is the delivery state a slave copies from its master
// (docs/REPLICATION.md, "Metadata"): the dead-letter state and the timer's
// progress as their files hold them. The delay levels' progress is in the
// broker's metadata (delayOffset.json), copied with it.
type StateSnapshot struct {
	DLQ   json.RawMessage `json:"dlq"`
	Timer json.RawMessage `json:"timer,omitempty"` // absent: never saved
}

// StateVersion changes whenever the state a StateSnapshot holds changes.
func (d *Service) StateVersion() uint64 {
	return d.dlq.version() + d.timer.saves.Load()
}

// StateSnapshot returns the dead-letter state (from memory) and the
// timer's progress as last saved (the timer saves it within about a second
// of a change), and the version they hold.
func (d *Service) StateSnapshot() (uint64, StateSnapshot, error) {
	saves := d.timer.saves.Load()
	gen, dlq, err := d.dlq.snapshot()
	if err != nil {
		return 0, StateSnapshot{}, fmt.Errorf("broker: dead-letter state snapshot: %w", err)
	}
	snap := StateSnapshot{DLQ: dlq}
	timer, err := fsx.ReadFile(d.cfg.FS, d.timer.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, StateSnapshot{}, fmt.Errorf("broker: timer progress snapshot: %w", err)
	default:
		snap.Timer = timer
	}
	return gen + saves, snap, nil
}

// RestoreStateFiles writes a master's StateSnapshot as the state files in
// dir, each checked as Open checks it: a bad snapshot writes nothing. It is
// for a broker whose delivery Service is not open (a slave's is opened when
// it becomes master, from these files).
func RestoreStateFiles(fsys fsx.FS, dir string, snap StateSnapshot) error {
	if _, err := decodeDLQState(snap.DLQ); err != nil {
		return fmt.Errorf("broker: dead-letter state snapshot: %w", err)
	}
	if snap.Timer != nil {
		if err := checkTimerProgress(snap.Timer); err != nil {
			return fmt.Errorf("broker: timer progress snapshot: %w", err)
		}
	}
	if err := metadata.Save(fsys, filepath.Join(dir, DLQStateFile), snap.DLQ); err != nil {
		return err
	}
	if snap.Timer == nil {
		return nil
	}
	return metadata.Save(fsys, filepath.Join(dir, TimerProgressFile), snap.Timer)
}

// checkTimerProgress checks a progress file's shape as decodeTimerProgress
// does, without expanding its ranges (a peer's range may be huge).
func checkTimerProgress(data []byte) error {
	var doc timerProgressDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("bad JSON: %w", err)
	}
	if doc.LowWater < 0 {
		return fmt.Errorf("lowWater %d: want >= 0", doc.LowWater)
	}
	prev := doc.LowWater
	for _, r := range doc.Delivered {
		if r[0] < prev || r[1] <= r[0] {
			return fmt.Errorf("delivered range [%d, %d): want ascending ranges above lowWater %d", r[0], r[1], doc.LowWater)
		}
		prev = r[1]
	}
	return nil
}
