package verify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/gantrymq/gantry/internal/fsx"
)

// ErrNotStore means the directory given to Run is not a store: it is not a
// directory, or has neither a commitlog directory nor a store directory
// holding one.
var ErrNotStore = errors.New("verify: not a store directory")

// DefaultMaxErrors is how many problems a Report lists when
// Options.MaxErrors is 0.
const DefaultMaxErrors = 100

// Options tunes Run. The zero value is ready to use.
type Options struct {
	// MaxErrors is how many problems Report.Errors lists, in the order
	// found; Report.ErrorCount counts them all. 0 means DefaultMaxErrors,
	// a negative value no limit.
	MaxErrors int
	// Progress, if set, receives a short line as each phase and file
	// starts. It is called on Run's goroutine.
	Progress func(string)
}

// Kind classifies a problem.
type Kind string

// Problem kinds.
const (
	KindSegment      Kind = "segment"      // commit-log files: names, sizes, missing segments
	KindRecord       Kind = "record"       // commit-log records: damage, torn tails
	KindConsumeQueue Kind = "consumequeue" // consume-queue files and entries
	KindIndex        Kind = "index"        // index files and entries
	KindIO           Kind = "io"           // a file or directory could not be read
)

// Problem is one thing wrong with the store.
type Problem struct {
	// File is the path of the file at fault (a directory for a listing
	// problem).
	File string `json:"file"`
	// Offset is, for KindRecord, the commit-log (physical) offset of the
	// damage; otherwise the byte offset in File.
	Offset int64 `json:"offset"`
	// FileOffset is the byte offset in File.
	FileOffset int64 `json:"fileOffset"`
	// QueueOffset is the queue offset of a consume-queue entry at fault.
	QueueOffset *int64 `json:"queueOffset,omitempty"`
	Kind        Kind   `json:"kind"`
	Message     string `json:"message"`
}

func (p Problem) String() string {
	return fmt.Sprintf("%s at offset %d: %s", p.File, p.Offset, p.Message)
}

// Report is what Run found. Clean is true exactly when ErrorCount is 0.
type Report struct {
	Dir   string `json:"dir"`
	Clean bool   `json:"clean"`
	// AbortMarker is true when the commit log's abort file exists: a
	// broker has the store open, or the last one crashed. Verifying a
	// store in use can report problems that are only writes in flight.
	AbortMarker   bool         `json:"abortMarker"`
	CommitLog     LogSummary   `json:"commitLog"`
	ConsumeQueues QueueSummary `json:"consumeQueues"`
	Index         IndexSummary `json:"index"`
	Errors        []Problem    `json:"errors"` // at most Options.MaxErrors
	ErrorCount    int          `json:"errorCount"`
	DurationMS    int64        `json:"durationMs"`
}

// LogSummary describes the commit log.
type LogSummary struct {
	Segments     int   `json:"segments"`
	SegmentBytes int64 `json:"segmentBytes"`
	// MinOffset is the start of the first segment.
	MinOffset int64 `json:"minOffset"`
	// LastValidOffset is the end of the last valid record (MinOffset if
	// there is none): consume-queue and index entries must point below it.
	LastValidOffset int64 `json:"lastValidOffset"`
	Records         int64 `json:"records"` // valid records
	Bytes           int64 `json:"bytes"`   // total size of the valid records
	// Holes counts damaged ranges an earlier recovery skipped on request
	// (commitlog.Config.SkipCorrupt); they are not reported as problems.
	Holes int `json:"holes"`
}

// QueueSummary describes the consume queues.
type QueueSummary struct {
	Queues  int   `json:"queues"`
	Files   int   `json:"files"`
	Entries int64 `json:"entries"` // entries in use, placeholders excluded
	Expired int64 `json:"expired"` // entries pointing below the log's MinOffset
	// Lost counts entries pointing into a damaged range an earlier
	// recovery skipped: their messages are gone (not reported as problems).
	Lost int64 `json:"lost,omitempty"`
}

// IndexSummary describes the key index.
type IndexSummary struct {
	Files   int   `json:"files"`
	Entries int64 `json:"entries"`        // entries in use
	Expired int64 `json:"expired"`        // entries pointing below the log's MinOffset
	Lost    int64 `json:"lost,omitempty"` // entries pointing into a skipped damaged range
}

// Run checks the store in dir offline and reports what it finds: the
// commit log record by record, every consume-queue entry and every index
// entry against the records they point at. It opens every file read-only
// and changes nothing, so it can run on a copy, a backup or a store whose
// broker refuses to start; it must not run on a store a broker has open.
//
// Problems go into the Report. Run fails only when it cannot start (dir is
// missing, unreadable or not a store) or when ctx is done; then the Report
// holds what was found so far. Memory use is bounded by a few read buffers
// of several MiB, whatever the store's size.
func Run(ctx context.Context, fsys fsx.FS, dir string, opts Options) (Report, error) {
	start := time.Now()
	rep := Report{Dir: dir, Errors: []Problem{}}
	dir, err := storeDir(fsys, dir)
	if err != nil {
		return rep, err
	}
	rep.Dir = dir
	if opts.MaxErrors == 0 {
		opts.MaxErrors = DefaultMaxErrors
	}
	v := &verifier{ctx: ctx, fsys: fsys, dir: dir, opts: opts, rep: &rep}
	rep.AbortMarker = fsx.Exists(fsys, filepath.Join(dir, "abort")) ||
		fsx.Exists(fsys, filepath.Join(dir, "commitlog", "abort"))
	v.log = newLogFiles(fsys)
	defer v.log.close()
	for _, phase := range []func(){v.checkLog, v.checkQueues, v.checkQueueEnds, v.checkIndex} {
		if ctx.Err() != nil {
			break
		}
		phase()
	}
	rep.Clean = rep.ErrorCount == 0
	rep.DurationMS = time.Since(start).Milliseconds()
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("verify: interrupted: %w", err)
	}
	return rep, nil
}

// storeDir returns the store directory dir names: dir itself when it
// holds a commitlog directory (a broker's storePathRootDir), or dir/store
// when that does (the data directory of gantry dev, or of a broker whose
// storePathRootDir is the default ./gantry-data/store).
func storeDir(fsys fsx.FS, dir string) (string, error) {
	info, err := fsys.Stat(dir)
	if err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // the path is in our message
		}
		return dir, fmt.Errorf("verify: cannot read store directory %s: %w", dir, err)
	}
	if !info.IsDir {
		return dir, fmt.Errorf("%w: %s is not a directory", ErrNotStore, dir)
	}
	for _, d := range []string{dir, filepath.Join(dir, "store")} {
		if info, err := fsys.Stat(filepath.Join(d, logDir)); err == nil && info.IsDir {
			return d, nil
		}
	}
	return dir, fmt.Errorf("%w: %s has no %s directory, nor a store directory holding one; give the broker's "+
		"storePathRootDir (it holds %s/, consumequeue/, index/ and config/) or the data directory of gantry dev (it holds store/)",
		ErrNotStore, dir, logDir, logDir)
}

// verifier holds the state of one Run.
type verifier struct {
	ctx  context.Context
	fsys fsx.FS
	dir  string
	opts Options
	rep  *Report

	log *logFiles
	// logMin and logEnd bound the offsets queue and index entries may
	// point at: below logMin is expired, at or past logEnd is missing.
	logMin, logEnd int64
	findBuf        []byte // findValid's read buffer
	// logQueues holds, by topic and queue id, where each queue's records
	// in the log end (checkLog); queueEnds where each consume queue ends
	// (checkQueues). checkQueueEnds compares them.
	// holes are the damaged ranges an earlier recovery skipped, in log
	// order: entries pointing into one are of lost messages.
	holes     [][2]int64
	logQueues map[string]map[int32]logQueue
	queueEnds map[string]map[int32]queueEnd
}

// add records a problem.
func (v *verifier) add(p Problem) {
	v.rep.ErrorCount++
	if v.opts.MaxErrors < 0 || len(v.rep.Errors) < v.opts.MaxErrors {
		v.rep.Errors = append(v.rep.Errors, p)
	}
}

// addf records a problem whose Offset is the byte offset in file.
func (v *verifier) addf(kind Kind, file string, off int64, format string, args ...any) {
	v.add(Problem{File: file, Offset: off, FileOffset: off, Kind: kind, Message: fmt.Sprintf(format, args...)})
}

func (v *verifier) progress(format string, args ...any) {
	if v.opts.Progress != nil {
		v.opts.Progress(fmt.Sprintf(format, args...))
	}
}

// listDir lists dir; a missing directory is empty, any other failure is
// reported and yields nothing.
func (v *verifier) listDir(dir string, kind Kind) []string {
	names, err := v.fsys.ReadDir(dir)
	if err != nil {
		if fsx.Exists(v.fsys, dir) {
			v.addf(KindIO, dir, 0, "cannot list %s directory: %v", kind, err)
		}
		return nil
	}
	return names
}
