package tlsx

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBadFile is what a FileError unwraps to.
var ErrBadFile = errors.New("tlsx: bad file")

// FileError is a certificate, key or CA file that cannot be used: missing,
// unreadable, without what it should hold, or a key that does not match
// its certificate. Setting names the setting that gave the path
// (tls.server.certPath, --tls-cert).
type FileError struct {
	Setting string
	Path    string
	Err     error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Setting, e.Path, e.Err)
}

func (e *FileError) Unwrap() []error { return []error{ErrBadFile, e.Err} }

// loadKeyPair loads a certificate chain and its private key (PEM), naming
// the setting and path of the file at fault.
func loadKeyPair(certSetting, certPath, keySetting, keyPath string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return tls.Certificate{}, &FileError{certSetting, certPath, err}
	}
	if !hasPEM(certPEM, "CERTIFICATE") {
		return tls.Certificate{}, &FileError{certSetting, certPath, errors.New("no PEM CERTIFICATE block in it")}
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return tls.Certificate{}, &FileError{keySetting, keyPath, err}
	}
	if b, _ := pem.Decode(keyPEM); b != nil && b.Headers["Proc-Type"] != "" {
		return tls.Certificate{}, &FileError{keySetting, keyPath, errors.New("the key is encrypted; decrypt it (openssl pkey -in key.pem -out plain.pem)")}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, &FileError{keySetting, keyPath, fmt.Errorf("not the private key of %s %s: %w", certSetting, certPath, err)}
	}
	return pair, nil
}

// hasPEM reports whether b holds a PEM block of the type.
func hasPEM(b []byte, typ string) bool {
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return false
		}
		if blk.Type == typ {
			return true
		}
	}
}

// loadCAs loads a PEM bundle of CA certificates.
func loadCAs(setting, path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &FileError{setting, path, err}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, &FileError{setting, path, errors.New("no PEM certificate in it")}
	}
	return pool, nil
}

// stamp is what a look at a file sees of it: a change of either field
// (or of whether it exists) is a change of the file.
type stamp struct {
	mod  time.Time
	size int64
	gone bool
}

func stampFiles(paths []string) []stamp {
	out := make([]stamp, len(paths))
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			out[i].gone = true
			continue
		}
		out[i] = stamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return out
}

// watched is material loaded from files and loaded again when they
// change: get looks at the files at most once per interval, in the
// caller's goroutine (a handshake's), and never waits for another look.
type watched[T any] struct {
	what     string // for logs: "server certificate"
	paths    []string
	load     func() (*T, error)
	interval time.Duration
	log      *slog.Logger

	cur     atomic.Pointer[T]
	checked atomic.Int64 // unix ns of the last look

	mu     sync.Mutex // one look at a time; guards what follows
	stamps []stamp    // of the files cur came from
	failed []stamp    // of the files that last failed to load
}

// newWatched loads the material once; an error is the load's.
func newWatched[T any](what string, paths []string, interval time.Duration, log *slog.Logger, load func() (*T, error)) (*watched[T], error) {
	w := &watched[T]{what: what, paths: paths, load: load, interval: interval, log: log}
	w.stamps = stampFiles(paths)
	v, err := load()
	if err != nil {
		return nil, err
	}
	w.cur.Store(v)
	w.checked.Store(time.Now().UnixNano())
	return w, nil
}

// get returns the current material, first loading the files again if
// they changed since the last look (at most one look per interval).
func (w *watched[T]) get() *T {
	if len(w.paths) > 0 {
		now := time.Now().UnixNano()
		if now-w.checked.Load() >= int64(w.interval) && w.mu.TryLock() {
			w.check(now)
			w.mu.Unlock()
		}
	}
	return w.cur.Load()
}

// check loads the files again if they changed. A failure keeps the
// material in use and is logged once for the files as they are.
func (w *watched[T]) check(now int64) {
	w.checked.Store(now)
	st := stampFiles(w.paths)
	if slices.Equal(st, w.stamps) || slices.Equal(st, w.failed) {
		return
	}
	v, err := w.load()
	if err != nil {
		w.failed = st
		w.log.Error("TLS files changed but do not load: still using the ones loaded before", "what", w.what, "err", err)
		return
	}
	w.cur.Store(v)
	w.stamps, w.failed = st, nil
	w.log.Info("TLS files reloaded", "what", w.what, "files", w.paths)
}
