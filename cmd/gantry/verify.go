package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gantrymq/gantry/broker/verify"
	"github.com/gantrymq/gantry/internal/fsx"
)

func newVerifyCmd() *cobra.Command {
	var (
		maxErrors int
		quiet     bool
		verbose   bool
	)
	cmd := &cobra.Command{
		Use:   "verify DIR",
		Short: "Check a broker store directory offline",
		Long: `Verify checks the broker store in DIR offline and changes nothing: every
file is opened read-only. DIR is the store (the broker's storePathRootDir,
holding commitlog/) or the data directory of gantry dev (./gantry-data,
holding store/). Stop the broker first; a store in use looks damaged.

It checks:
  commit log      segment names, sizes and contiguity; every record (sizes,
                  magic, body CRC, the __CRC32# whole-record CRC, its physical
                  offset); damage is "valid data after damage" when valid
                  records follow it, else a "torn tail"
  consume queues  every entry points at a valid record of its topic and queue
                  with the entry's size, queue offset and tags code; offsets
                  contiguous; nothing after the zero tail; every queue reaches
                  its last message in the log (entries missing otherwise)
  index           headers, hash slots and chains; every entry points at a
                  record one of whose keys (topic#KEYS, topic#UNIQ_KEY) has the
                  entry's hash
Entries pointing below the log's first segment (deleted by retention) are
counted as expired, not errors.

Output: a JSON report on stdout (unless --quiet) and a one-line summary on
stderr. Problems are listed with the file, the offset (for commit-log records
the physical log offset, otherwise the byte offset in the file) and the reason.

Exit status: 0 clean, 1 problems found, 2 usage error or the store cannot be
read.`,
		Example: `  gantry verify ./gantry-data
  gantry verify ./gantry-data/store
  gantry verify --quiet /var/lib/gantry/store && echo ok
  gantry verify --max-errors -1 /backup/store > report.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if maxErrors < -1 {
				return fmt.Errorf("--max-errors %d: want -1 (no limit), 0 (list none) or more", maxErrors)
			}
			opts := verify.Options{MaxErrors: maxErrors}
			if maxErrors == 0 {
				opts.MaxErrors = 1 // keep the first for the summary line
			}
			if verbose {
				opts.Progress = func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), s) }
			}
			return runVerify(cmd, args[0], opts, maxErrors == 0, quiet)
		},
	}
	f := cmd.Flags()
	f.IntVar(&maxErrors, "max-errors", verify.DefaultMaxErrors, "list at most this many problems in the report (all are counted); -1 for no limit")
	f.BoolVarP(&quiet, "quiet", "q", false, "print only the summary line, not the JSON report")
	f.BoolVar(&verbose, "verbose", false, "print progress to stderr")
	return cmd
}

// runVerify runs the check and prints the report and summary. listNone
// drops the listed problems from the JSON report.
func runVerify(cmd *cobra.Command, dir string, opts verify.Options, listNone, quiet bool) error {
	rep, err := verify.Run(cmd.Context(), fsx.OS, dir, opts)
	interrupted := err != nil && cmd.Context().Err() != nil
	if err != nil && !interrupted {
		return &exitError{code: exitUsage, err: err}
	}
	line := summary(rep)
	if listNone {
		rep.Errors = []verify.Problem{}
	}
	if !quiet {
		if err := writeJSON(cmd.OutOrStdout(), rep); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
	}
	fmt.Fprintln(cmd.ErrOrStderr(), line)
	switch {
	case interrupted: // the report is partial
		return &exitError{code: exitUsage, err: fmt.Errorf("verify %s: %w", dir, err)}
	case !rep.Clean:
		return &exitError{code: exitProblems}
	}
	return nil
}

func writeJSON(w io.Writer, rep verify.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// summary is the one-line human summary of a report.
func summary(rep verify.Report) string {
	if rep.Clean {
		return fmt.Sprintf("verify %s: clean, %d records, %d queue entries, %d index entries",
			rep.Dir, rep.CommitLog.Records, rep.ConsumeQueues.Entries, rep.Index.Entries)
	}
	s := fmt.Sprintf("verify %s: %d errors", rep.Dir, rep.ErrorCount)
	if len(rep.Errors) > 0 {
		s += "; first: " + rep.Errors[0].String()
	}
	return s
}
