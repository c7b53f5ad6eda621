package index

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/gantrymq/gantry/internal/fsx"
)

// Config configures a Store. The zero value of every field means its default.
type Config struct {
	// Dir holds the index files. Required; created if missing.
	Dir string
	// FS is the filesystem. Default: fsx.OS.
	FS fsx.FS
	// SlotCount is the number of hash slots of each new file
	// (maxHashSlotNum). Default 5,000,000. Existing files keep theirs.
	SlotCount int
	// EntryCount is the entry capacity of each new file, including the
	// unused entry 0 (maxIndexNum). Default 20,000,000. Existing files keep
	// theirs.
	EntryCount int
	// Now gives the creation time that names new files. Default time.Now.
	Now func() time.Time
	// Logger receives recovery warnings. Default: discard.
	Logger *slog.Logger
}

const (
	defaultSlotCount  = 5_000_000
	defaultEntryCount = 20_000_000
)

// WithDefaults returns c with every zero field set to its default, as
// Open uses it.
func (c Config) WithDefaults() Config { return c.withDefaults() }

func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = fsx.OS
	}
	if c.SlotCount == 0 {
		c.SlotCount = defaultSlotCount
	}
	if c.EntryCount == 0 {
		c.EntryCount = defaultEntryCount
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("index: Dir is required"))
	}
	if c.SlotCount < 0 || c.SlotCount > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("index: SlotCount %d out of range 1..%d", c.SlotCount, math.MaxInt32))
	}
	if c.EntryCount < 0 || c.EntryCount == 1 || c.EntryCount > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("index: EntryCount %d out of range 2..%d", c.EntryCount, math.MaxInt32))
	}
	return errors.Join(errs...)
}

// FileBytes is the size of a new index file under c (its defaults
// applied): a 40-byte header, 4 bytes a slot and 20 bytes an entry. With
// the defaults, 420,000,040 bytes.
func (c Config) FileBytes() int64 {
	c = c.withDefaults()
	return fileSize(int32(c.SlotCount), int32(c.EntryCount))
}
