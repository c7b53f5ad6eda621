package metadata

import (
	"errors"
	"fmt"
)

var (
	// ErrDamaged means a metadata file and its backup are both unusable.
	ErrDamaged = errors.New("metadata: damaged file")
	// ErrInvalid means a value breaks a rule (a name, a count, an offset).
	ErrInvalid = errors.New("metadata: invalid")
)

// DamagedError reports a file whose main copy and backup were both
// rejected. It unwraps to ErrDamaged.
type DamagedError struct {
	Path      string // the main file
	Backup    string // its .bak
	MainErr   error  // why Path was rejected
	BackupErr error  // why Backup was rejected
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("metadata: %s and its backup %s are both unusable: main: %v; backup: %v",
		e.Path, e.Backup, e.MainErr, e.BackupErr)
}

func (e *DamagedError) Unwrap() error { return ErrDamaged }

// invalidf returns an error wrapping ErrInvalid, worded "metadata: invalid <what>".
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w "+format, append([]any{ErrInvalid}, args...)...)
}
