package consumequeue

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/gantrymq/gantry/internal/fsx"
)

// Config configures a Queue. The zero value of every field means its default.
type Config struct {
	// Dir holds this queue's files, conventionally
	// <root>/consumequeue/<topic>/<queueId>. Required; created if missing.
	Dir string
	// FS is the filesystem. Default: fsx.OS.
	FS fsx.FS
	// EntriesPerFile is the number of 20-byte entries per file
	// (mappedFileSizeConsumeQueue / 20). Default 300,000 (6,000,000 bytes).
	// Existing files must have been written with the same value.
	EntriesPerFile int
	// Hint is what the queue's owner recorded of it at its last flush or
	// close; Open uses it to read only the entries written after it. A
	// hint the files contradict is ignored (see Hint). Default: none.
	Hint Hint
	// DeferCreate makes Append hold the entries of an empty queue without
	// files in memory (up to maxPending, readable meanwhile) instead of
	// creating the queue's first file: Materialize, or the next Flush,
	// creates it on the caller's goroutine. The store's dispatcher sets it
	// so that creating thousands of new queues does not hold back the
	// dispatch of the others. Default false: Append creates it.
	DeferCreate bool
	// Logger receives lifecycle and anomaly logs. Default: discard.
	Logger *slog.Logger
}

// Hint is what the owner of a queue recorded of it, for Open.
type Hint struct {
	// MaxOffset is a max offset the queue had when every entry below it
	// was durable (read before a Flush that succeeded). Open trusts the
	// entries below it once the last of them is valid, and scans entries
	// from there on. 0: no hint.
	MaxOffset int64
	// Clean says MaxOffset was recorded at a clean close, after which
	// nothing was written: the queue ends exactly there and its files hold
	// nothing after it, so Open checks no more than the entries on either
	// side of it. It must not be given twice for one close: the owner
	// records a new state before it writes to the queue again.
	Clean bool
}

const (
	defaultEntriesPerFile = 300_000
	// maxEntriesPerFile keeps a file's size within an int on every platform
	// and within one mapping.
	maxEntriesPerFile = (1<<31 - 1) / EntrySize
)

func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = fsx.OS
	}
	if c.EntriesPerFile == 0 {
		c.EntriesPerFile = defaultEntriesPerFile
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c (after defaults).
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("consumequeue: Dir is required"))
	}
	if c.EntriesPerFile < 1 || c.EntriesPerFile > maxEntriesPerFile {
		errs = append(errs, fmt.Errorf("consumequeue: EntriesPerFile %d out of range [1, %d]", c.EntriesPerFile, maxEntriesPerFile))
	}
	if c.Hint.MaxOffset < 0 {
		errs = append(errs, fmt.Errorf("consumequeue: Hint.MaxOffset %d is negative", c.Hint.MaxOffset))
	}
	return errors.Join(errs...)
}
