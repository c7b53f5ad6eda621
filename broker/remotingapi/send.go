package remotingapi

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gantrymq/gantry/broker"
	"github.com/gantrymq/gantry/message"
	"github.com/gantrymq/gantry/remoting"
)

// Send response ext values a Java broker sends and the Go client reads
// (Java's SendMessageResponseHeader).
const (
	defaultRegion = "DefaultRegion"
	traceOff      = "false"
)

// sendNames are the ext keys of a send header: the long names of
// SEND_MESSAGE, or the one-letter names of SEND_MESSAGE_V2 and
// SEND_BATCH_MESSAGE (Java's SendMessageRequestHeaderV2).
type sendNames struct {
	group, topic, queueID, sysFlag, born, flag, props, reconsume, maxReconsume string
}

var (
	longNames  = sendNames{"producerGroup", "topic", "queueId", "sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes", "maxReconsumeTimes"}
	shortNames = sendNames{"a", "b", "e", "f", "g", "h", "i", "j", "l"}
)

// sendHeader is a send request's header.
type sendHeader struct {
	topic             string
	queueID           int32
	sysFlag           int32
	bornTimestamp     int64
	flag              int32
	properties        message.Properties
	reconsumeTimes    int32
	maxReconsumeTimes int32
}

func parseSendHeader(req *remoting.Command, n sendNames) (sendHeader, error) {
	rd := extReader{req: req}
	h := sendHeader{
		topic:             rd.str(n.topic, true),
		queueID:           rd.int32(n.queueID, broker.BrokerPicksQueue),
		sysFlag:           rd.int32(n.sysFlag, 0),
		bornTimestamp:     rd.int64(n.born, 0),
		flag:              rd.int32(n.flag, 0),
		reconsumeTimes:    rd.int32(n.reconsume, 0),
		maxReconsumeTimes: rd.int32(n.maxReconsume, 0),
	}
	if rd.err != nil {
		return h, rd.err
	}
	if h.queueID < 0 {
		h.queueID = broker.BrokerPicksQueue // Java picks a queue for any negative id
	}
	if h.bornTimestamp == 0 {
		h.bornTimestamp = time.Now().UnixMilli()
	}
	props, err := message.DecodeProperties([]byte(req.Ext(n.props)))
	if err != nil {
		return h, fmt.Errorf("%w: %w", broker.ErrInvalidMessage, err)
	}
	h.properties = props
	return h, nil
}

// checkNotTransactional refuses half messages: Gantry has no transactions.
func (h sendHeader) checkNotTransactional(props message.Properties) error {
	tran, _ := props.Get(message.PropTransactionPrepared)
	if h.sysFlag&message.TransactionMask != 0 || strings.EqualFold(tran, "true") {
		return fmt.Errorf("%w: transactional messages are not supported by Gantry", broker.ErrNoPermission)
	}
	return nil
}

// message builds the message of a single send, or of one batch entry.
func (h sendHeader) message(c *remoting.Conn, flag int32, body []byte, props message.Properties) *message.Message {
	return &message.Message{
		Topic: h.topic, QueueID: h.queueID, Flag: flag, Body: body, Properties: props,
		// The record encoder sets the host bits; transactions are refused.
		SysFlag:       h.sysFlag & (message.FlagCompressed | message.FlagMultiTags),
		BornTimestamp: h.bornTimestamp, BornHost: peerAddrPort(c), ReconsumeTimes: h.reconsumeTimes,
	}
}

// peerAddrPort is the connection's peer, an IPv4 address unmapped so that
// it is stored in 8 bytes.
func peerAddrPort(c *remoting.Conn) netip.AddrPort {
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}
	}
	ap := a.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// sendMessage answers SEND_MESSAGE (10): one message, long header names.
func (h *Handler) sendMessage(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	return h.sendOne(ctx, c, req, longNames)
}

// sendMessageV2 answers SEND_MESSAGE_V2 (310): one message, one-letter names.
func (h *Handler) sendMessageV2(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	return h.sendOne(ctx, c, req, shortNames)
}

func (h *Handler) sendOne(ctx context.Context, c *remoting.Conn, req *remoting.Command, n sendNames) *remoting.Command {
	hdr, err := parseSendHeader(req, n)
	if err == nil {
		err = hdr.checkNotTransactional(hdr.properties)
	}
	if err != nil {
		return errorResponse(req, err)
	}
	m := hdr.message(c, hdr.flag, req.Body, hdr.properties)
	if group, ok := strings.CutPrefix(hdr.topic, broker.RetryTopicPrefix); ok {
		return h.sendRetry(ctx, req, group, m, hdr.maxReconsumeTimes)
	}
	res, err := h.b.Send(ctx, hdr.topic, []*message.Message{m})
	return sendResponse(req, hdr.queueID, res, err)
}

// sendRetry stores a consumer's own retry (its fallback when
// CONSUMER_SEND_MSG_BACK failed), dead-lettered past maxReconsumeTimes.
func (h *Handler) sendRetry(ctx context.Context, req *remoting.Command, group string, m *message.Message, maxTimes int32) *remoting.Command {
	res, err := h.b.SendRetry(ctx, group, m, maxTimes)
	var results []broker.SendResult
	if res.Put.MsgID != "" {
		results = []broker.SendResult{{PutResult: res.Put}}
	}
	if err == nil && res.DeadLettered {
		h.log.Debug("client retry dead-lettered", "group", group, "reconsume_times", res.ReconsumeTimes)
	}
	return sendResponse(req, m.QueueID, results, err)
}

// sendBatch answers SEND_BATCH_MESSAGE (320): messages of one topic and
// queue, one-letter header names, the batch body format of §2.3. The Go
// client adds no UNIQ_KEY to them; the broker adds the missing ones.
func (h *Handler) sendBatch(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	hdr, err := parseSendHeader(req, shortNames)
	if err != nil {
		return errorResponse(req, err)
	}
	if strings.HasPrefix(hdr.topic, broker.RetryTopicPrefix) {
		return errorResponse(req, fmt.Errorf("%w: batches cannot be sent to a retry topic (%s)", broker.ErrInvalidMessage, hdr.topic))
	}
	entries, err := decodeBatch(req.Body)
	if err != nil {
		return remoting.NewResponse(req, remoting.ResMessageIllegal, err.Error())
	}
	msgs := make([]*message.Message, len(entries))
	for i, e := range entries {
		props, err := message.DecodeProperties(e.Properties)
		if err == nil {
			err = hdr.checkNotTransactional(props)
		}
		if err != nil {
			return errorResponse(req, fmt.Errorf("%w: batch message %d: %w", broker.ErrInvalidMessage, i, err))
		}
		msgs[i] = hdr.message(c, e.Flag, e.Body, props)
	}
	res, err := h.b.Send(ctx, hdr.topic, msgs)
	return sendResponse(req, hdr.queueID, res, err)
}

// sendResponse answers a send: SUCCESS with where the messages went, or
// FLUSH_DISK_TIMEOUT (FLUSH_SLAVE_TIMEOUT) with the same fields when they
// are stored but not known durable (not known replicated: a SYNC_MASTER's
// slaves did not ack in time; the Go client reports a status, not an
// error), or the error's code. A batch's msgId and transactionId list every message's,
// comma-separated, as Java's msgId does; queueId and queueOffset are the
// first message's. The queue id is the one asked for, when one was (a
// delayed message's result is its parked record's).
func sendResponse(req *remoting.Command, queueID int32, res []broker.SendResult, err error) *remoting.Command {
	code := remoting.ResSuccess
	if err != nil {
		code = Code(err)
		timeout := code == remoting.ResFlushDiskTimeout || code == remoting.ResFlushSlaveTimeout
		if !broker.IsIndeterminate(err) || len(res) == 0 || !timeout {
			return errorResponse(req, err)
		}
	}
	if len(res) == 0 {
		return remoting.NewResponse(req, remoting.ResSystemError, "Gantry stored nothing and reported no error")
	}
	resp := remoting.NewResponse(req, code, "")
	ids := make([]string, len(res))
	uniq := make([]string, len(res))
	for i, r := range res {
		ids[i], uniq[i] = r.MsgID, r.UniqKey
	}
	if queueID < 0 {
		queueID = res[0].QueueID
	}
	resp.SetExt("msgId", strings.Join(ids, ","))
	resp.SetExt("queueId", strconv.Itoa(int(queueID)))
	resp.SetExt("queueOffset", strconv.FormatInt(res[0].QueueOffset, 10))
	resp.SetExt("transactionId", strings.Join(uniq, ","))
	resp.SetExt(message.PropMsgRegion, defaultRegion)
	resp.SetExt(message.PropTraceSwitch, traceOff)
	return resp
}
