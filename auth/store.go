package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/internal/tick"
)

// ErrNotFound is returned by changes of a user or rule that does not exist.
var ErrNotFound = errors.New("auth: not found")

// ErrExists is returned by CreateUser for a user that exists.
var ErrExists = errors.New("auth: already exists")

// DefaultReloadInterval is StoreConfig.ReloadInterval's default.
const DefaultReloadInterval = time.Second

// MaxFileBytes bounds the ACL file a Store reads.
const MaxFileBytes = 16 << 20

// StoreConfig configures a Store.
type StoreConfig struct {
	// Path is the ACL file (JSON, File). It must exist; an empty users
	// list is allowed here (a server refuses to start with auth on and no
	// users, docs/SECURITY.md).
	Path string
	// ReloadInterval is how often the file is checked for changes.
	// Default 1 s; negative: never.
	ReloadInterval time.Duration
	// Logger receives reloads and files that fail to load. Default:
	// discard.
	Logger *slog.Logger
}

// Store is the users of an ACL file, reloaded when the file changes and
// written when a user or rule is changed through it. Safe for concurrent
// use.
type Store struct {
	cfg   StoreConfig
	log   *slog.Logger
	users atomic.Pointer[Users]

	mu    sync.Mutex // serializes changes and reloads
	stamp fileStamp  // the file as last read or written
	gen   atomic.Uint64

	stop context.CancelFunc
	wg   sync.WaitGroup
	once sync.Once
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// OpenStore reads the ACL file and, unless ReloadInterval is negative,
// checks it for changes until Close.
func OpenStore(cfg StoreConfig) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("auth: no ACL file path")
	}
	if cfg.ReloadInterval == 0 {
		cfg.ReloadInterval = DefaultReloadInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{cfg: cfg, log: cfg.Logger.With("component", "auth", "file", cfg.Path)}
	users, stamp, err := readFile(cfg.Path)
	if err != nil {
		return nil, err
	}
	s.users.Store(users)
	s.stamp = stamp
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	if cfg.ReloadInterval > 0 {
		s.wg.Go(func() { tick.Every(ctx, cfg.ReloadInterval, s.reload) })
	}
	return s, nil
}

// Users returns the current users.
func (s *Store) Users() *Users { return s.users.Load() }

// Generation changes whenever the users change.
func (s *Store) Generation() uint64 { return s.gen.Load() }

// Close stops checking the file for changes.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.stop()
		s.wg.Wait()
	})
	return nil
}

// ParseFile decodes and checks an ACL file's content.
func ParseFile(data []byte) (*Users, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("auth: ACL file: %w", err)
	}
	u, err := NewUsers(f)
	if err != nil {
		return nil, fmt.Errorf("auth: ACL file: %w", err)
	}
	return u, nil
}

func readFile(path string) (*Users, fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("auth: ACL file: %w", err)
	}
	if fi.Size() > MaxFileBytes {
		return nil, fileStamp{}, fmt.Errorf("auth: ACL file %s: %d bytes, over the %d limit", path, fi.Size(), MaxFileBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("auth: ACL file: %w", err)
	}
	u, err := ParseFile(data)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("%w (%s)", err, path)
	}
	return u, fileStamp{fi.ModTime(), fi.Size()}, nil
}

// reload reads the file again if it changed; a file that does not load
// leaves the users as they were.
func (s *Store) reload() {
	fi, err := os.Stat(s.cfg.Path)
	if err != nil {
		s.log.Error("ACL file unreadable; keeping the users loaded", "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if (fileStamp{fi.ModTime(), fi.Size()}) == s.stamp {
		return
	}
	users, stamp, err := readFile(s.cfg.Path)
	if err != nil {
		s.stamp = fileStamp{fi.ModTime(), fi.Size()} // log a broken file once
		s.log.Error("ACL file does not load; keeping the users loaded", "err", err)
		return
	}
	s.users.Store(users)
	s.stamp = stamp
	s.gen.Add(1)
	s.log.Info("ACL file reloaded", "users", users.Len())
}

// Replace makes data (an ACL file's content, as a master's snapshot
// carries it) the users and writes it to the file.
func (s *Store) Replace(data []byte) error {
	users, err := ParseFile(data)
	if err != nil {
		return err
	}
	return s.update(func(File) (File, error) { return users.File(), nil })
}

// update changes the users with f and writes the file.
func (s *Store) update(f func(File) (File, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next, err := f(s.users.Load().File())
	if err != nil {
		return err
	}
	users, err := NewUsers(next)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(users.File(), "", "  ")
	if err != nil {
		return err
	}
	if err := fsx.WriteFileAtomicPerm(fsx.OS, s.cfg.Path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("auth: write ACL file: %w", err)
	}
	if fi, err := os.Stat(s.cfg.Path); err == nil {
		s.stamp = fileStamp{fi.ModTime(), fi.Size()}
	}
	s.users.Store(users)
	s.gen.Add(1)
	return nil
}

// Bytes returns the users as the ACL file holds them.
func (s *Store) Bytes() ([]byte, error) {
	return json.MarshalIndent(s.users.Load().File(), "", "  ")
}

// CreateUser adds u.
func (s *Store) CreateUser(u User) error {
	return s.update(func(f File) (File, error) {
		if f.index(u.AccessKey) >= 0 {
			return f, fmt.Errorf("%w: user %q", ErrExists, u.AccessKey)
		}
		f.Users = append(f.Users, u)
		return f, nil
	})
}

// UpdateUser changes a user's secret key (when set) and role, keeping its
// rules.
func (s *Store) UpdateUser(accessKey, secretKey string, role Role) error {
	return s.update(func(f File) (File, error) {
		i := f.index(accessKey)
		if i < 0 {
			return f, fmt.Errorf("%w: user %q", ErrNotFound, accessKey)
		}
		if secretKey != "" {
			f.Users[i].SecretKey = secretKey
		}
		f.Users[i].Role = role
		return f, nil
	})
}

// DeleteUser removes a user and its rules.
func (s *Store) DeleteUser(accessKey string) error {
	return s.update(func(f File) (File, error) {
		i := f.index(accessKey)
		if i < 0 {
			return f, fmt.Errorf("%w: user %q", ErrNotFound, accessKey)
		}
		f.Users = append(f.Users[:i], f.Users[i+1:]...)
		return f, nil
	})
}

// PutRules sets a user's rules on the resources of rules: create refuses
// a resource that has a rule already, otherwise its rule is replaced.
func (s *Store) PutRules(accessKey string, rules []Rule, create bool) error {
	return s.update(func(f File) (File, error) {
		i := f.index(accessKey)
		if i < 0 {
			return f, fmt.Errorf("%w: user %q", ErrNotFound, accessKey)
		}
		u := &f.Users[i]
		for _, r := range rules {
			j := ruleIndex(u.Rules, r.Resource)
			switch {
			case j >= 0 && create:
				return f, fmt.Errorf("%w: user %q has a rule on %s (updateAcl changes it)", ErrExists, accessKey, r.Resource)
			case j >= 0:
				u.Rules[j] = r
			default:
				u.Rules = append(u.Rules, r)
			}
		}
		return f, nil
	})
}

// DeleteRules removes a user's rules on resources, or all its rules when
// resources is empty.
func (s *Store) DeleteRules(accessKey string, resources []string) error {
	return s.update(func(f File) (File, error) {
		i := f.index(accessKey)
		if i < 0 {
			return f, fmt.Errorf("%w: user %q", ErrNotFound, accessKey)
		}
		u := &f.Users[i]
		if len(resources) == 0 {
			u.Rules = nil
			return f, nil
		}
		for _, res := range resources {
			j := ruleIndex(u.Rules, res)
			if j < 0 {
				return f, fmt.Errorf("%w: user %q has no rule on %s", ErrNotFound, accessKey, res)
			}
			u.Rules = append(u.Rules[:j], u.Rules[j+1:]...)
		}
		return f, nil
	})
}

func (f File) index(accessKey string) int {
	for i, u := range f.Users {
		if u.AccessKey == accessKey {
			return i
		}
	}
	return -1
}

func ruleIndex(rules []Rule, resource string) int {
	for i, r := range rules {
		if r.Resource == resource {
			return i
		}
	}
	return -1
}
