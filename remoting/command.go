package remoting

import (
	"fmt"
	"strconv"
)

// Flag bits of Command.Flag (Java's RemotingCommand: RPC_TYPE, RPC_ONEWAY).
const (
	// FlagResponse marks a response; a frame without it is a request.
	FlagResponse int32 = 1 << 0
	// FlagOneway marks a request that must not be answered. The Go client
	// never sets it, even on its oneway calls; Java sets it on invokeOneway.
	FlagOneway int32 = 1 << 1
)

// Version ordinals (Java's MQVersion) seen on the wire.
const (
	// VersionV4_5_2 is what the official Go client sends (317).
	VersionV4_5_2 int32 = 317
	// VersionV5_3_3 is what Gantry sends (479): the Go client records a
	// heartbeat response's version as the broker version, which must be ≥ 0.
	VersionV5_3_3 int32 = 479
)

// DefaultLanguage is the language Gantry writes in the commands it makes:
// a Java broker's, since clients expect to talk to one (they ignore it).
const DefaultLanguage = "JAVA"

// SerializeType is how a frame's header is encoded: byte 0 of the header word.
type SerializeType uint8

const (
	// JSON is RocketMQ's default header encoding, the only one the Go client sends.
	JSON SerializeType = 0
	// RocketMQ is the compact binary header ("ROCKETMQ" in Java).
	RocketMQ SerializeType = 1
)

func (t SerializeType) String() string {
	switch t {
	case JSON:
		return "JSON"
	case RocketMQ:
		return "ROCKETMQ"
	}
	return "SerializeType(" + strconv.Itoa(int(t)) + ")"
}

// Command is one remoting frame: a request or a response, its header and
// its body. A Command is not safe for concurrent mutation; once handed to
// a write (a handler's return, Invoke, Oneway) it must not be changed.
type Command struct {
	// Code is a RequestCode in a request, a ResponseCode in a response.
	Code int16
	// Language is the sender's language name ("JAVA", "GO", ...). Receivers
	// ignore it; Gantry sends DefaultLanguage.
	Language string
	// Version is the sender's version ordinal (VersionV5_3_3 for Gantry).
	Version int32
	// Opaque is the request id; a response echoes its request's.
	Opaque int32
	// Flag holds FlagResponse and FlagOneway.
	Flag int32
	// Remark is a response's error text. Empty means none (JSON null).
	Remark string
	// ExtFields are the custom header fields, every value a string. May be
	// nil; SetExt allocates it.
	ExtFields map[string]string
	// Body is the frame's body. A decoded Body aliases the frame's buffer.
	Body []byte
	// SerializeType is the header encoding the command arrived in, and the
	// one AppendFrame writes it in.
	SerializeType SerializeType
}

// IsResponse reports whether c is a response (FlagResponse set).
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether c is a request that must not be answered.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// RequestCode returns c.Code as a request code.
func (c *Command) RequestCode() RequestCode { return RequestCode(c.Code) }

// ResponseCode returns c.Code as a response code.
func (c *Command) ResponseCode() ResponseCode { return ResponseCode(c.Code) }

// Ext returns the ext field key, or "" when it is absent.
func (c *Command) Ext(key string) string { return c.ExtFields[key] }

// SetExt sets the ext field key to value, allocating ExtFields if needed.
func (c *Command) SetExt(key, value string) {
	if c.ExtFields == nil {
		c.ExtFields = make(map[string]string, 4)
	}
	c.ExtFields[key] = value
}

// String describes c for logs: its kind, code, opaque and remark.
func (c *Command) String() string {
	if c.IsResponse() {
		return fmt.Sprintf("response %s opaque=%d remark=%q ext=%d body=%d", c.ResponseCode(), c.Opaque, c.Remark, len(c.ExtFields), len(c.Body))
	}
	return fmt.Sprintf("request %s opaque=%d ext=%d body=%d", c.RequestCode(), c.Opaque, len(c.ExtFields), len(c.Body))
}

// NewRequest returns a request with code and ext fields (not copied), in
// Gantry's language and version. Invoke and Oneway assign its opaque.
func NewRequest(code RequestCode, ext map[string]string) *Command {
	return &Command{Code: int16(code), Language: DefaultLanguage, Version: VersionV5_3_3, ExtFields: ext}
}

// NewResponse returns the response to req: code and remark, req's opaque,
// FlagResponse, and req's header encoding.
func NewResponse(req *Command, code ResponseCode, remark string) *Command {
	return &Command{
		Code:          int16(code),
		Language:      DefaultLanguage,
		Version:       VersionV5_3_3,
		Opaque:        req.Opaque,
		Flag:          FlagResponse,
		Remark:        remark,
		SerializeType: req.SerializeType,
	}
}

// ErrorResponse returns the response to req with code and a remark made
// from format and args.
func ErrorResponse(req *Command, code ResponseCode, format string, args ...any) *Command {
	return NewResponse(req, code, fmt.Sprintf(format, args...))
}

// NotSupported returns the REQUEST_CODE_NOT_SUPPORTED answer to req, with a
// remark naming its code.
func NotSupported(req *Command) *Command {
	code := req.RequestCode()
	name := code.Name()
	if name == "" {
		name = "unknown"
	}
	return ErrorResponse(req, ResRequestCodeNotSupported, "request code %d (%s) is not supported by Gantry", code, name)
}
