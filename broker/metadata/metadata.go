package metadata

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/gantrymq/gantry/internal/fsx"
)

// File names in Config.Dir, as in RocketMQ.
const (
	TopicsFile       = "topics.json"
	GroupsFile       = "subscriptionGroup.json"
	OffsetsFile      = "consumerOffset.json"
	DelayOffsetsFile = "delayOffset.json"
)

// Config configures Open. The zero value of every field but Dir means its default.
type Config struct {
	// Dir holds the metadata files: <storeRoot>/config. Required; created if missing.
	Dir string
	// FS is the filesystem. Default fsx.OS.
	FS fsx.FS
	// Now stamps data versions. Default time.Now.
	Now func() time.Time
	// Logger receives a warning for every file replaced by its backup. Default: discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = fsx.OS
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("metadata: Dir is required"))
	}
	return errors.Join(errs...)
}

// FileReport says how one file was loaded.
type FileReport struct {
	Path   string `json:"path"` // the main file
	Source Source `json:"source"`
	Reason string `json:"reason,omitempty"` // why the main file was rejected; "" unless Source is SourceBackup
}

// LoadReport says how Open loaded each file, in the order topics,
// subscription groups, consumer offsets, delay offsets.
type LoadReport struct {
	Files []FileReport `json:"files"`
}

// Metadata is the broker's topics, subscription groups, consumer offsets
// and delay offsets, kept in memory and written by Save.
type Metadata struct {
	cfg    Config
	log    *slog.Logger
	report LoadReport

	saveMu  sync.Mutex // one Save at a time; taken before any table lock
	topics  *table[topicsDoc]
	groups  *table[groupsDoc]
	offsets *table[offsetsDoc]
	delays  *table[delaysDoc]
}

// tableFile is what Open and Save need from every table.
type tableFile interface {
	filePath() string
	load(fsx.FS) (src Source, mainErr, err error)
	repair(fsx.FS) error
	save(fsx.FS) error
}

// Open loads the metadata in cfg.Dir. A file found unusable is replaced by
// its backup, with a warning and an entry in Report, and rewritten at once.
// If a file and its backup are both unusable, Open fails with errors
// wrapping ErrDamaged, one per such file.
func Open(cfg Config) (*Metadata, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.FS.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	m := &Metadata{
		cfg: cfg,
		log: cfg.Logger.With("component", "metadata"),
		topics: newTable(cfg.Dir, TopicsFile,
			topicsDoc{TopicConfigTable: map[string]TopicConfig{}}, validateTopics),
		groups: newTable(cfg.Dir, GroupsFile,
			groupsDoc{SubscriptionGroupTable: map[string]SubscriptionGroup{}}, validateGroups),
		offsets: newTable(cfg.Dir, OffsetsFile,
			offsetsDoc{OffsetTable: map[string]map[int32]int64{}, ClientOffsetTable: map[string]map[int32]int64{}}, validateOffsets),
		delays: newTable(cfg.Dir, DelayOffsetsFile,
			delaysDoc{OffsetTable: map[int]int64{}}, validateDelays),
	}
	var errs []error
	for _, t := range m.tables() {
		errs = append(errs, m.loadTable(t))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Metadata) tables() []tableFile {
	return []tableFile{m.topics, m.groups, m.offsets, m.delays}
}

func (m *Metadata) loadTable(t tableFile) error {
	path := t.filePath()
	src, mainErr, err := t.load(m.cfg.FS)
	if err != nil {
		return err
	}
	r := FileReport{Path: path, Source: src}
	if src == SourceBackup {
		r.Reason = mainErr.Error()
		m.log.Warn("metadata file damaged; using its backup",
			"file", path, "backup", BackupPath(path), "err", mainErr)
		if err := t.repair(m.cfg.FS); err != nil {
			return err
		}
	}
	m.report.Files = append(m.report.Files, r)
	return nil
}

// Report says how each file was loaded by Open.
func (m *Metadata) Report() LoadReport {
	return LoadReport{Files: append([]FileReport(nil), m.report.Files...)}
}

// Save writes every table changed since its last successful save. A table
// whose write fails stays changed, so the next Save retries it; the error
// names each file that failed.
func (m *Metadata) Save() error {
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	var errs []error
	for _, t := range m.tables() {
		errs = append(errs, t.save(m.cfg.FS))
	}
	return errors.Join(errs...)
}

// SaveTopics writes the topic table now if it changed: a topic's creation
// (or deletion) is answered only once it would survive a crash, not at
// the next periodic Save.
func (m *Metadata) SaveTopics() error {
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	return m.topics.save(m.cfg.FS)
}

// SaveGroups writes the subscription-group table now if it changed (an
// administrator's change is answered once it is on disk).
func (m *Metadata) SaveGroups() error {
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	return m.groups.save(m.cfg.FS)
}

// Close saves what changed. Metadata holds no open files or goroutines.
func (m *Metadata) Close() error { return m.Save() }
