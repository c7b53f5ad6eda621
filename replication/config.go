package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/gantrymq/gantry/replication/epoch"
)

const (
	// DefaultAddr is the master's HA listen address (RocketMQ's haListenPort,
	// the remoting port plus one).
	DefaultAddr = ":10912"
	// DefaultMaxFrameBytes is the default limit on a frame's body. It is
	// above the largest record a log holds (message.MaxRecordBytes; a test
	// checks it), since a frame holds whole records.
	DefaultMaxFrameBytes = 5 << 20
	// maxFrameLimit bounds MaxFrameBytes: a frame's body must fit the u32
	// length field with room to spare, and a segment is at most 2 GiB.
	maxFrameLimit = 1 << 30
)

// MasterConfig configures a Master. A zero field means its default.
type MasterConfig struct {
	// Addr is the TCP address to listen on. Default DefaultAddr.
	Addr string
	// Listener, when set, is accepted on instead of listening on Addr;
	// Close closes it.
	Listener net.Listener
	// Epochs is the master's epoch list, oldest first (its epoch file's
	// Entries, the current epoch last, starting at or below the log's
	// end). The welcome carries it and each data frame is labelled with
	// the epoch of its data (docs/REPLICATION.md, "Epochs"). A master whose
	// list changes (a new election) is started again with the new list.
	// Without it, every frame is labelled Epoch and slaves that hold data
	// and keep an epoch file cannot follow (they share no epoch with it).
	Epochs []epoch.Entry
	// Epoch is the master's epoch: the last entry's when Epochs is set (0
	// or that value), else stamped on every frame. Default 0.
	Epoch int32
	// BatchBytes is the size of each stream's read buffer: a data frame
	// holds at most that many bytes unless one record is larger. Default
	// 256 KiB.
	BatchBytes int
	// MaxFrameBytes is the largest data frame body the master sends; a
	// slave's smaller limit (its hello) wins. Default DefaultMaxFrameBytes.
	MaxFrameBytes int
	// MaxSlaves bounds the replica ids the master tracks; a further slave
	// is refused. Default 16.
	MaxSlaves int
	// PollInterval is how often an idle stream looks for new log bytes
	// nobody told it of: the appender calls Master.Notify, which wakes the
	// streams at once. Default 100 ms.
	PollInterval time.Duration
	// Confirmed, if set, returns the master's confirmed offset: what its
	// consumers may read up to (its store's DispatchLimit). Each stream
	// sends it in a confirm frame when it grows, capped at what the stream
	// has sent. It is called under no lock of the Master's.
	Confirmed func() int64
	// OnAck, if set, is called after a replica's ack moved, outside the
	// Master's lock; it must not block.
	OnAck func()
	// HeartbeatInterval is how long a stream stays silent before it sends a
	// heartbeat. Default 1 s.
	HeartbeatInterval time.Duration
	// ReadTimeout closes a connection on which no ack arrived for that
	// long; it must exceed the slaves' AckInterval. Default 20 s.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write to a slave. Default 20 s.
	WriteTimeout time.Duration
	// HandshakeTimeout bounds the hello and welcome. Default 10 s.
	HandshakeTimeout time.Duration
	// Meta, if set, is the metadata each stream sends its slave (meta.go):
	// a snapshot when the stream starts and whenever its version changed.
	Meta MetaSource
	// MetaInterval is how often a stream looks at Meta's version. Default
	// 1 s: a promoted slave lacks at most about that much of the master's
	// last metadata changes (consumer offsets: a redelivery, not a loss).
	MetaInterval time.Duration
	// Authenticate, if set, decides whether a slave may replicate
	// (docs/SECURITY.md, "Cluster"): it gets what the slave's hello signed
	// (empty Date and Authorization for an unsigned hello) and the peer's
	// address, and returns nil to admit it, else why not. The master
	// refuses the slave with that reason before it reads any of its log,
	// and remembers each admitted nonce for twice ReplayWindow, so that a
	// captured hello cannot be replayed. Without it every slave is
	// admitted, signed or not: the HA port then serves its log to anyone
	// who reaches it.
	Authenticate func(h SignedHello, from string) error
	// ReplayWindow is how far from the master's clock Authenticate accepts
	// a hello's date (the broker's authWindowMillis). Default 1 min.
	ReplayWindow time.Duration
	// Logger receives the master's logs. Default: discarded.
	Logger *slog.Logger
}

// SignedHello is what MasterConfig.Authenticate checks: the content a
// slave's hello signs (Hello.SignedContent) and the signature's gRPC
// metadata values (auth.Users.VerifyGRPC with Content as the method).
type SignedHello struct {
	Content, Date, Authorization string
}

// HelloSigner signs a slave's hello, as it signs a gRPC call of a method
// (an *auth.Signer).
type HelloSigner interface {
	SignGRPC(method string, now time.Time) (date, authorization string)
}

func (c MasterConfig) withDefaults() MasterConfig {
	setDefault(&c.Addr, DefaultAddr)
	setDefault(&c.BatchBytes, 256<<10)
	setDefault(&c.MaxFrameBytes, DefaultMaxFrameBytes)
	setDefault(&c.MaxSlaves, 16)
	setDefault(&c.PollInterval, 100*time.Millisecond)
	setDefault(&c.HeartbeatInterval, time.Second)
	setDefault(&c.ReadTimeout, 20*time.Second)
	setDefault(&c.WriteTimeout, 20*time.Second)
	setDefault(&c.HandshakeTimeout, 10*time.Second)
	setDefault(&c.MetaInterval, time.Second)
	setDefault(&c.ReplayWindow, time.Minute)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c; a zero field is its default.
func (c MasterConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Epoch < 0 {
		errs = append(errs, fmt.Errorf("replication: Epoch must not be negative, got %d", c.Epoch))
	}
	if err := epoch.Validate(c.Epochs); err != nil {
		errs = append(errs, fmt.Errorf("replication: Epochs: %w", err))
	} else if n := len(c.Epochs); n > 0 && c.Epoch != 0 && c.Epoch != c.Epochs[n-1].Epoch {
		errs = append(errs, fmt.Errorf("replication: Epoch %d is not the last of Epochs (%v)", c.Epoch, c.Epochs[n-1]))
	}
	errs = append(errs, checkFrameBytes("BatchBytes", c.BatchBytes), checkFrameBytes("MaxFrameBytes", c.MaxFrameBytes))
	if c.BatchBytes > c.MaxFrameBytes {
		errs = append(errs, fmt.Errorf("replication: BatchBytes %d exceeds MaxFrameBytes %d", c.BatchBytes, c.MaxFrameBytes))
	}
	if c.MaxSlaves < 1 {
		errs = append(errs, fmt.Errorf("replication: MaxSlaves must be at least 1, got %d", c.MaxSlaves))
	}
	errs = append(errs, checkDurations(map[string]time.Duration{
		"PollInterval": c.PollInterval, "HeartbeatInterval": c.HeartbeatInterval, "ReadTimeout": c.ReadTimeout,
		"WriteTimeout": c.WriteTimeout, "HandshakeTimeout": c.HandshakeTimeout, "MetaInterval": c.MetaInterval,
		"ReplayWindow": c.ReplayWindow,
	}))
	if c.ReadTimeout > 0 && c.HeartbeatInterval >= c.ReadTimeout {
		errs = append(errs, fmt.Errorf("replication: HeartbeatInterval %s must be shorter than ReadTimeout %s", c.HeartbeatInterval, c.ReadTimeout))
	}
	return errors.Join(errs...)
}

// SlaveConfig configures a Slave. A zero field means its default.
type SlaveConfig struct {
	// MasterAddr is the master's HA address (host:port). Required.
	MasterAddr string
	// ReplicaID is the slave's broker id, which the master tracks its acks
	// by. Default 1.
	ReplicaID int64
	// MaxFrameBytes is the largest frame body the slave takes; a longer
	// frame is refused before its body is read. Default
	// DefaultMaxFrameBytes.
	MaxFrameBytes int
	// AckInterval is how often the slave acks while nothing changes, so
	// that the master knows it is alive. Default 1 s.
	AckInterval time.Duration
	// ReadTimeout closes a connection on which nothing arrived for that
	// long; it must exceed the master's HeartbeatInterval. Default 20 s.
	ReadTimeout time.Duration
	// WriteTimeout bounds each ack's write. Default 20 s.
	WriteTimeout time.Duration
	// DialTimeout bounds a connection attempt and the handshake. Default 10 s.
	DialTimeout time.Duration
	// Dial, if set, connects to the master's HA address instead of plain
	// TCP: a TLS dialer (docs/SECURITY.md, "TLS") when the master's HA port
	// serves TLS. The context carries DialTimeout.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// RetryMin and RetryMax bound the pause between connection attempts,
	// which doubles after each failure and starts again at RetryMin after
	// a connection that appended bytes or lasted RetryMax. Defaults 100 ms
	// and 5 s.
	RetryMin, RetryMax time.Duration
	// Epochs is the replica's epoch file (*epoch.File). With it the slave
	// compares its list with the master's at each handshake and appends
	// only when its log is a prefix of the master's; else it stops with a
	// *TruncateNeededError. It records each epoch the master's frames
	// start, and refuses frames from an epoch older than its last entry
	// (docs/REPLICATION.md, "Epochs"). Without it the slave trusts that
	// its log is a prefix of the master's, as protocol version 1 did: only
	// for a group that never fails over.
	Epochs Epochs
	// OnMeta, if set, takes each metadata snapshot the master sends, in
	// the goroutine that appends the log, between two data frames. An
	// error is logged; replication goes on, and the next snapshot replaces
	// the one refused. Without it snapshots are dropped.
	OnMeta func(snapshot []byte) error
	// OnConfirm, if set, takes the master's confirmed offset from each
	// confirm frame (at most the replica's log end; it only grows within a
	// connection), in the goroutine that appends the log. It must not
	// block.
	OnConfirm func(off int64)
	// MaxMetaBytes bounds a metadata snapshot; a larger one is refused (the
	// connection drops). Default DefaultMaxMetaBytes.
	MaxMetaBytes int
	// Signer, if set, signs each hello with the slave's cluster
	// credentials (the broker's innerClientAuthenticationCredentials), as
	// a master that authenticates its slaves requires (docs/SECURITY.md,
	// "Cluster"). A master older than signed hellos closes the connection
	// on one. nil: unsigned hellos.
	Signer HelloSigner
	// Logger receives the slave's logs. Default: discarded.
	Logger *slog.Logger
}

func (c SlaveConfig) withDefaults() SlaveConfig {
	setDefault(&c.ReplicaID, 1)
	setDefault(&c.MaxFrameBytes, DefaultMaxFrameBytes)
	setDefault(&c.AckInterval, time.Second)
	setDefault(&c.ReadTimeout, 20*time.Second)
	setDefault(&c.WriteTimeout, 20*time.Second)
	setDefault(&c.DialTimeout, 10*time.Second)
	setDefault(&c.RetryMin, 100*time.Millisecond)
	setDefault(&c.RetryMax, 5*time.Second)
	setDefault(&c.MaxMetaBytes, DefaultMaxMetaBytes)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c; a zero field is its default.
func (c SlaveConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.MasterAddr == "" {
		errs = append(errs, errors.New("replication: MasterAddr is required"))
	}
	if c.ReplicaID < 0 {
		errs = append(errs, fmt.Errorf("replication: ReplicaID must not be negative, got %d", c.ReplicaID))
	}
	errs = append(errs, checkFrameBytes("MaxFrameBytes", c.MaxFrameBytes))
	if c.MaxMetaBytes < 1 {
		errs = append(errs, fmt.Errorf("replication: MaxMetaBytes must be at least 1, got %d", c.MaxMetaBytes))
	}
	errs = append(errs, checkDurations(map[string]time.Duration{
		"AckInterval": c.AckInterval, "ReadTimeout": c.ReadTimeout, "WriteTimeout": c.WriteTimeout,
		"DialTimeout": c.DialTimeout, "RetryMin": c.RetryMin, "RetryMax": c.RetryMax,
	}))
	if c.RetryMin > c.RetryMax {
		errs = append(errs, fmt.Errorf("replication: RetryMin %s exceeds RetryMax %s", c.RetryMin, c.RetryMax))
	}
	if c.ReadTimeout > 0 && c.AckInterval >= c.ReadTimeout {
		errs = append(errs, fmt.Errorf("replication: AckInterval %s must be shorter than ReadTimeout %s", c.AckInterval, c.ReadTimeout))
	}
	return errors.Join(errs...)
}

func setDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

func checkFrameBytes(name string, n int) error {
	if n < 1 || n > maxFrameLimit {
		return fmt.Errorf("replication: %s %d out of range [1, %d]", name, n, maxFrameLimit)
	}
	return nil
}

func checkDurations(ds map[string]time.Duration) error {
	var errs []error
	for _, name := range []string{"PollInterval", "HeartbeatInterval", "AckInterval", "ReadTimeout", "WriteTimeout", "HandshakeTimeout", "MetaInterval", "ReplayWindow", "DialTimeout", "RetryMin", "RetryMax"} {
		if d, ok := ds[name]; ok && d <= 0 {
			errs = append(errs, fmt.Errorf("replication: %s must be positive, got %s", name, d))
		}
	}
	return errors.Join(errs...)
}
