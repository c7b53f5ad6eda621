package client

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"time"

	"google.golang.org/grpc"
)

// Defaults of Config and of the Producer and PullConsumer options.
const (
	DefaultNameServer       = "127.0.0.1:9877"
	DefaultRouteRefresh     = 30 * time.Second
	DefaultRetries          = 2
	DefaultBackoffBase      = 50 * time.Millisecond
	DefaultBackoffMax       = time.Second
	DefaultSendTimeout      = 3 * time.Second
	DefaultMaxBatchMessages = 256
	DefaultMaxBatchBytes    = 1 << 20
	DefaultMaxBufferedMsgs  = 10000
	DefaultMaxBufferedBytes = 64 << 20
	DefaultHoldMargin       = 5 * time.Second
	DefaultPullMaxMessages  = 32
	failedBrokerExpiry      = 30 * time.Second // how long a broker that failed a send is avoided
	nameServerCallTimeout   = 3 * time.Second  // per nameserver tried
)

// Config configures the connection to a Gantry cluster; Producer,
// PullConsumer and Admin take one. A zero value means the default; the
// client works on a copy.
type Config struct {
	// NameServers are the nameservers' gRPC addresses (host:port). They are
	// tried in turn, starting from a random one. Default
	// ["127.0.0.1:9877"].
	NameServers []string
	// TLS, if set, makes every connection the client opens, to
	// nameservers and brokers alike, TLS with this configuration
	// (docs/SECURITY.md, "TLS"): RootCAs the CAs that signed the servers'
	// certificates (nil: the system's), Certificates the client's own for
	// servers that require one (mutual TLS). Its ServerName, if empty, is
	// each address's host, which the server's certificate must name.
	// Default nil: plaintext.
	TLS *tls.Config
	// DialOptions are added to every connection (nameservers and brokers)
	// after the defaults, so an option here replaces its default:
	// plaintext credentials, or TLS's with Config.TLS
	// (grpc.WithTransportCredentials); messages
	// received and sent up to message.MaxEnvelopeBytes, a pull of one
	// message of the largest body; a fixed 16 MiB HTTP/2 flow-control
	// window (grpc.WithInitialWindowSize: gRPC's dynamic one sends a PING
	// with every request sent one at a time); reconnection after 50 ms
	// doubling to 1 s (grpc.WithConnectParams); TCP connections whose reads
	// and writes are inline system calls (grpc.WithContextDialer).
	DialOptions []grpc.DialOption
	// Credentials, when set, sign every call (brokers and nameservers with
	// authentication on, docs/SECURITY.md). Default none.
	Credentials Credentials
	// RouteRefresh is how often the cached topic routes are read again from
	// the nameservers. Default 30 s.
	RouteRefresh time.Duration
	// Logger receives the client's logs. nil: discard.
	Logger *slog.Logger
	// ClientID identifies this client to brokers and in logs. Default
	// hostname@pid@random.
	ClientID string
	// Hooks observe the client's sends, deliveries and connections: each
	// implements one or more of SendHook, SendDoneHook, ConsumeHook,
	// ConsumeDoneHook and ConnStateHook (see Hook), and they are called in
	// this order. The contrib/otel module makes one for OpenTelemetry
	// traces and metrics. Default none, which costs nothing per message.
	Hooks []Hook
}

// withDefaults returns a copy of c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if len(c.NameServers) == 0 {
		c.NameServers = []string{DefaultNameServer}
	}
	c.NameServers = append([]string(nil), c.NameServers...)
	c.DialOptions = append([]grpc.DialOption(nil), c.DialOptions...)
	if c.TLS != nil {
		c.TLS = c.TLS.Clone()
	}
	c.Hooks = append([]Hook(nil), c.Hooks...)
	if c.RouteRefresh == 0 {
		c.RouteRefresh = DefaultRouteRefresh
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ClientID == "" {
		c.ClientID = defaultClientID()
	}
	return c
}

// Validate reports every problem of c (after defaults) joined in one error.
func (c Config) Validate() error {
	var errs []error
	for i, ns := range c.NameServers {
		if ns == "" {
			errs = append(errs, fmt.Errorf("client: Config.NameServers[%d] is empty", i))
		}
	}
	if c.RouteRefresh < 0 {
		errs = append(errs, fmt.Errorf("client: Config.RouteRefresh must be positive, got %s", c.RouteRefresh))
	}
	for i, h := range c.Hooks {
		if err := validateHook(i, h); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// defaultClientID returns hostname@pid@random.
func defaultClientID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s@%d@%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// ProducerOption sets an option of a Producer (see the package doc's
// Options section).
type ProducerOption func(*producerOptions)

// producerOptions are a Producer's settings after its options.
type producerOptions struct {
	group              string
	selector           QueueSelector
	retries            int
	backoffBase        time.Duration
	backoffMax         time.Duration
	random             func(n int64) int64
	retryIndeterminate bool
	sendTimeout        time.Duration
	maxBatchMessages   int
	maxBatchBytes      int64
	unary              bool
	// maxBufferedMessages and maxBufferedBytes bound the sends accepted
	// and not completed (WithMaxBuffered).
	maxBufferedMessages int
	maxBufferedBytes    int64
	warmUp              []string // topics NewProducer loads and connects to
}

func defaultProducerOptions() producerOptions {
	return producerOptions{
		selector:         &ByShardingKey{},
		retries:          DefaultRetries,
		backoffBase:      DefaultBackoffBase,
		backoffMax:       DefaultBackoffMax,
		random:           mrand.Int64N,
		sendTimeout:      DefaultSendTimeout,
		maxBatchMessages: DefaultMaxBatchMessages,
		maxBatchBytes:    DefaultMaxBatchBytes,

		maxBufferedMessages: DefaultMaxBufferedMsgs,
		maxBufferedBytes:    DefaultMaxBufferedBytes,
	}
}

func (o producerOptions) validate() error {
	var errs []error
	if o.selector == nil {
		errs = append(errs, errors.New("client: queue selector is nil"))
	}
	if o.retries < 0 {
		errs = append(errs, fmt.Errorf("client: retries must not be negative, got %d", o.retries))
	}
	if o.backoffBase <= 0 || o.backoffMax < o.backoffBase {
		errs = append(errs, fmt.Errorf("client: backoff needs 0 < base <= max, got %s and %s", o.backoffBase, o.backoffMax))
	}
	if o.random == nil {
		errs = append(errs, errors.New("client: random source is nil"))
	}
	if o.sendTimeout <= 0 {
		errs = append(errs, fmt.Errorf("client: send timeout must be positive, got %s", o.sendTimeout))
	}
	if o.maxBatchMessages <= 0 || o.maxBatchBytes <= 0 {
		errs = append(errs, fmt.Errorf("client: batch limits must be positive, got %d messages and %d bytes", o.maxBatchMessages, o.maxBatchBytes))
	}
	if o.maxBufferedMessages <= 0 || o.maxBufferedBytes <= 0 {
		errs = append(errs, fmt.Errorf("client: WithMaxBuffered limits must be positive, got %d messages and %d bytes", o.maxBufferedMessages, o.maxBufferedBytes))
	}
	for _, t := range o.warmUp {
		if err := validTopic(t); err != nil {
			errs = append(errs, fmt.Errorf("client: WithWarmUp: %w", err))
		}
	}
	return errors.Join(errs...)
}

// WithProducerGroup sets the producer group sent with every request.
// Default "".
func WithProducerGroup(group string) ProducerOption {
	return func(o *producerOptions) { o.group = group }
}

// WithQueueSelector sets how a send picks its queue. Default: a
// ByShardingKey, which keeps the order of each Message.ShardingKey and
// goes round-robin for messages without one. A RoundRobin refuses messages
// with a ShardingKey (see RoundRobin).
func WithQueueSelector(s QueueSelector) ProducerOption {
	return func(o *producerOptions) { o.selector = s }
}

// WithRetries sets how many more attempts a send makes after a retryable
// failure (see IsRetryable). 0 disables retries. Default 2.
func WithRetries(n int) ProducerOption {
	return func(o *producerOptions) { o.retries = n }
}

// WithBackoff sets the exponential backoff between attempts: before retry
// n (1, 2, ...) the producer sleeps a uniformly random time in
// [0, min(maxDelay, base·2^(n-1))) ("full jitter"). Defaults 50 ms and 1 s.
func WithBackoff(base, maxDelay time.Duration) ProducerOption {
	return func(o *producerOptions) { o.backoffBase, o.backoffMax = base, maxDelay }
}

// withRandom sets the random source of the backoff jitter: rnd(n) returns
// a number in [0, n). Default math/rand/v2.Int64N. For tests.
func withRandom(rnd func(n int64) int64) ProducerOption {
	return func(o *producerOptions) { o.random = rnd }
}

// WithRetryIndeterminate makes the producer retry indeterminate failures
// (*IndeterminateError) too, on the same queue. Retries keep the messages'
// UNIQ_KEY, so a broker with de-duplication on (broker.conf
// duplicationWindow, 5 minutes by default; 0 turns it off) answers a retry
// of a send that was in fact stored with the original result instead of
// storing it twice. Default false: without de-duplication a retry may
// store the messages twice.
func WithRetryIndeterminate(retry bool) ProducerOption {
	return func(o *producerOptions) { o.retryIndeterminate = retry }
}

// WithSendTimeout bounds each attempt of a send, within the context's own
// deadline. Default 3 s.
func WithSendTimeout(d time.Duration) ProducerOption {
	return func(o *producerOptions) { o.sendTimeout = d }
}

// WithMaxBatch limits how many messages and bytes (bodies, tags, keys and
// properties) concurrent sends to one queue are coalesced into. A single
// Send is never split, whatever its size. Defaults 256 and 1 MiB. Whatever
// the limits, a request's records never exceed MaxSendBytes, which one
// Send may carry at most.
func WithMaxBatch(messages int, bytes int64) ProducerOption {
	return func(o *producerOptions) { o.maxBatchMessages, o.maxBatchBytes = messages, bytes }
}

// WithMaxBuffered bounds the sends a producer has accepted and not yet
// completed (Send, SendBatch and SendAsync, until their result is
// returned or their callback has returned): at most messages messages and
// bytes bytes (bodies, tags, keys and properties, as WithMaxBatch counts
// them). A send that would pass the bound blocks until there is room or
// its context ends (then it fails with the context's error, through the
// callback for SendAsync): a producer faster than its brokers slows down
// instead of growing its memory without limit. A send larger than the
// bound on its own is admitted when nothing else is buffered.
//
// Defaults 10,000 messages and 64 MiB: 10,000 is franz-go's
// MaxBufferedRecords; 64 MiB is twice Kafka's buffer.memory (32 MiB),
// since one Gantry body may be 4 MiB (MaxBodyBytes) against Kafka's 1 MiB
// default, so the bound still holds 16 of the largest messages.
func WithMaxBuffered(messages int, bytes int64) ProducerOption {
	return func(o *producerOptions) { o.maxBufferedMessages, o.maxBufferedBytes = messages, bytes }
}

// WithWarmUp makes NewProducer prepare the topics before it returns,
// within its ctx: it reads each topic's route from the nameservers (a
// nameserver that cannot be reached fails NewProducer, naming the
// addresses; a topic without a route fails it with ErrTopicNotFound) and
// connects to the topics' brokers, waiting until each connection is
// ready. Without it NewProducer does neither and the first send of a topic
// pays for both. Several calls add up.
func WithWarmUp(topics ...string) ProducerOption {
	return func(o *producerOptions) { o.warmUp = append(o.warmUp, topics...) }
}

// WithUnarySend makes the producer use the unary Send call instead of the
// SendStream stream. Default false (the producer falls back to unary Send
// by itself for a broker that does not implement SendStream).
func WithUnarySend() ProducerOption {
	return func(o *producerOptions) { o.unary = true }
}

// PullConsumerOption sets an option of a PullConsumer (see the package
// doc's Options section).
type PullConsumerOption func(*pullOptions)

// pullOptions are a PullConsumer's settings after its options.
type pullOptions struct {
	maxBytes     int32
	holdMargin   time.Duration
	autoCommit   time.Duration
	noAutoCommit bool
}

// DefaultAutoCommitInterval is how often a PullConsumer commits its marked
// offsets by itself (WithAutoCommitInterval).
const DefaultAutoCommitInterval = 5 * time.Second

// WithPullMaxBytes limits the bytes of records one Pull returns. Default 0:
// the broker's limit.
func WithPullMaxBytes(n int32) PullConsumerOption {
	return func(o *pullOptions) { o.maxBytes = n }
}

// WithHoldMargin sets how long past the hold a held Pull waits for the
// broker's answer: a Pull with hold h gets a call deadline of h + margin
// unless its context ends earlier. Default 5 s.
func WithHoldMargin(d time.Duration) PullConsumerOption {
	return func(o *pullOptions) { o.holdMargin = d }
}

// WithAutoCommitInterval sets how often the consumer commits the offsets
// marked with MarkOffset, on a goroutine of its own: a consumer that dies
// without Close re-delivers at most what it marked in one interval (plus
// a commit in flight). Default 5 s; d must be positive.
func WithAutoCommitInterval(d time.Duration) PullConsumerOption {
	return func(o *pullOptions) { o.autoCommit, o.noAutoCommit = d, false }
}

// WithoutAutoCommit turns auto-commit off: marked offsets are committed
// only by Commit and by Close. Of it and WithAutoCommitInterval, the last
// given wins.
func WithoutAutoCommit() PullConsumerOption {
	return func(o *pullOptions) { o.noAutoCommit = true }
}
