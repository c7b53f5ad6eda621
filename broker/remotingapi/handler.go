package remotingapi

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/remoting"
)

// Defaults of Config.
const (
	// DefaultMaxHold is Config.MaxHold's default: Java's own push consumer
	// asks for 15 s, and the Go client gives up on a pull after 30 s.
	DefaultMaxHold = 15 * time.Second
	// DefaultNotifyTimeout is Config.NotifyTimeout's default.
	DefaultNotifyTimeout = 3 * time.Second
	// DefaultYoungQueueBytes is Config.YoungQueueBytes's default.
	DefaultYoungQueueBytes = 1 << 30
)

// Config configures a Handler. The zero value of every field means its
// default.
type Config struct {
	// MaxHold bounds how long a pull waits for a message (long polling),
	// whatever its suspendTimeoutMillis asks; the broker's
	// longPollingMaxHold bounds it too. Default 15 s.
	MaxHold time.Duration
	// NotifyTimeout bounds the writing of one NOTIFY_CONSUMER_IDS_CHANGED
	// to a connection. Default 3 s.
	NotifyTimeout time.Duration
	// YoungQueueBytes decides QUERY_CONSUMER_OFFSET for a group without an
	// offset in a queue. As a Java broker answers offset 0 ("read from the
	// start") rather than QUERY_NOT_FOUND when the queue was never trimmed
	// and its first message is still in the page cache, so that a new group
	// reads a young topic from its first message even when it starts from
	// the last offset (Java's ConsumerOffsetManager), Gantry answers 0 when
	// the queue was never trimmed and its first message lies within the
	// last YoungQueueBytes of the commit log (an empty queue is young).
	// Default 1 GiB; negative: always QUERY_NOT_FOUND.
	YoungQueueBytes int64
	// Logger receives membership notifications (Debug) and refused
	// requests (Debug). Default: discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxHold <= 0 {
		c.MaxHold = DefaultMaxHold
	}
	if c.NotifyTimeout <= 0 {
		c.NotifyTimeout = DefaultNotifyTimeout
	}
	if c.YoungQueueBytes == 0 {
		c.YoungQueueBytes = DefaultYoungQueueBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Handler is a broker's remoting front end: a remoting.Handler that
// answers RocketMQ clients' requests with calls on the broker. Its methods
// are safe for concurrent use.
type Handler struct {
	b     *broker.Broker
	cfg   Config
	log   *slog.Logger
	mux   *remoting.Mux
	codes []remoting.RequestCode // those routes registered
	guard *auth.Guard            // nil: authentication off
	users func() *auth.Users     // the guard's users

	clients clientTable
	subs    subscriptions
	notes   *notifier

	removeHook      func()
	removeResetHook func()
	stop            context.CancelFunc
	wg              sync.WaitGroup
	closeOnce       sync.Once
}

// New returns the remoting front end of b and starts its notifier, which
// tells connections of membership changes and of resets of their groups'
// offsets. Close stops it; close the remoting.Server serving the Handler
// first. With authentication on (b.Guard), every request is authenticated
// and authorized before it runs (docs/SECURITY.md, "Operations and
// rights").
func New(b *broker.Broker, cfg Config) *Handler {
	cfg = cfg.withDefaults()
	h := &Handler{
		b: b, cfg: cfg, log: cfg.Logger.With("component", "remotingapi"),
		clients: newClientTable(), subs: subscriptions{byKey: map[subKey]subscription{}},
		notes: newNotifier(), guard: b.Guard(),
	}
	if st := b.Users(); st != nil {
		h.users = st.Users
	}
	h.mux = h.routes()
	ctx, stop := context.WithCancel(context.Background())
	h.stop = stop
	h.removeHook = b.AddConsumersChangedHook(h.notes.add)
	h.removeResetHook = b.AddOffsetResetHook(h.notes.addReset)
	h.wg.Go(func() { h.notifyLoop(ctx) })
	return h
}

// routes registers a handler per request code; the Mux answers the others
// REQUEST_CODE_NOT_SUPPORTED. Each code needs a class (codeClasses).
func (h *Handler) routes() *remoting.Mux {
	m := &classedMux{Mux: remoting.NewMux(), h: h}
	m.HandleFunc(remoting.ReqSendMessage, h.sendMessage)
	m.HandleFunc(remoting.ReqSendMessageV2, h.sendMessageV2)
	m.HandleFunc(remoting.ReqSendBatchMessage, h.sendBatch)
	m.HandleFunc(remoting.ReqPullMessage, h.pull)
	m.HandleFunc(remoting.ReqHeartBeat, h.heartbeat)
	m.HandleFunc(remoting.ReqUnregisterClient, h.unregisterClient)
	m.HandleFunc(remoting.ReqGetConsumerListByGroup, h.consumerList)
	m.HandleFunc(remoting.ReqQueryConsumerOffset, h.queryConsumerOffset)
	m.HandleFunc(remoting.ReqUpdateConsumerOffset, h.updateConsumerOffset)
	m.HandleFunc(remoting.ReqSearchOffsetByTimestamp, h.searchOffset)
	m.HandleFunc(remoting.ReqGetMaxOffset, h.maxOffset)
	m.HandleFunc(remoting.ReqGetMinOffset, h.minOffset)
	m.HandleFunc(remoting.ReqConsumerSendMsgBack, h.sendBack)
	m.HandleFunc(remoting.ReqLockBatchMQ, h.lockBatch)
	m.HandleFunc(remoting.ReqUnlockBatchMQ, h.unlockBatch)
	m.HandleFunc(remoting.ReqQueryMessage, h.queryMessage)
	m.HandleFunc(remoting.ReqViewMessageByID, h.viewMessage)
	m.HandleFunc(remoting.ReqUpdateAndCreateTopic, h.updateAndCreateTopic)
	m.HandleFunc(remoting.ReqDeleteTopicInBroker, h.deleteTopicInBroker)
	m.HandleFunc(remoting.ReqGetAllTopicConfig, h.allTopicConfig)
	m.HandleFunc(remoting.ReqUpdateAndCreateSubscriptionGroup, h.updateAndCreateGroup)
	m.HandleFunc(remoting.ReqDeleteSubscriptionGroup, h.deleteGroup)
	m.HandleFunc(remoting.ReqGetAllSubscriptionGroupConfig, h.allGroupConfig)
	m.HandleFunc(remoting.ReqGetTopicStatsInfo, h.topicStats)
	m.HandleFunc(remoting.ReqGetConsumeStats, h.consumeStats)
	m.HandleFunc(remoting.ReqGetConsumerConnectionList, h.consumerConnections)
	m.HandleFunc(remoting.ReqGetBrokerRuntimeInfo, h.runtimeInfo)
	m.HandleFunc(remoting.ReqInvokeBrokerToResetOffset, h.resetOffset)
	m.HandleFunc(remoting.ReqUpdateBrokerConfig, refuseConfigChange)
	return m.Mux
}

// classedMux registers routes that have a class only.
type classedMux struct {
	*remoting.Mux
	h *Handler
}

func (m *classedMux) HandleFunc(code remoting.RequestCode, f func(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command) {
	if _, ok := codeClasses[code]; !ok {
		panic(fmt.Sprintf("remotingapi: %s has no operation class (codeClasses)", code))
	}
	m.Mux.HandleFunc(code, f)
	m.h.codes = append(m.h.codes, code)
}

// Codes returns the request codes the front end answers.
func (h *Handler) Codes() []remoting.RequestCode { return slices.Clone(h.codes) }

// ServeRemoting implements remoting.Handler.
func (h *Handler) ServeRemoting(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	if h.guard != nil {
		return h.serveChecked(ctx, c, req)
	}
	return h.mux.ServeRemoting(ctx, c, req)
}

// Close stops the notifier and waits for it. Later calls return ErrClosed.
// Close the remoting.Server first: connections closing afterwards still
// unregister their consumers, but nobody is told.
func (h *Handler) Close() error {
	err := ErrClosed
	h.closeOnce.Do(func() {
		err = nil
		h.removeHook()
		h.removeResetHook()
		h.stop()
		h.wg.Wait()
	})
	return err
}
