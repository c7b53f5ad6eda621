package grpcbuf

import (
	"bytes"
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// Codec is gRPC's protobuf codec with the Shared pool: gRPC's own
// (encoding/proto) takes its buffers from mem.DefaultBufferPool whatever
// pool the server or connection was given. The broker's server uses it
// (grpc.ForceServerCodecV2) and Gantry's client (grpc.ForceCodecV2); it
// is not registered globally, so other gRPC users in a process keep
// gRPC's.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// Name is "proto": the wire format is protobuf's.
func (Codec) Name() string { return "proto" }

// Marshal is encoding/proto's Marshal with the Shared pool: the message
// is written into a buffer of its exact size.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(Encoded); ok {
		return e.TakeEncoding()
	}
	if a, ok := v.(Appender); ok {
		if size, ok := a.MarshalSize(); ok {
			return appendMarshal(a, size)
		}
	}
	m := messageOf(v)
	if m == nil {
		return nil, fmt.Errorf("proto: cannot marshal %T: not a proto.Message", v)
	}
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true} // sized just above
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := Shared.Get(size)
	out, err := opts.MarshalAppend((*buf)[:0], m)
	if err != nil || len(out) != size {
		Shared.Put(buf)
		if err == nil {
			err = fmt.Errorf("proto: %T marshalled to %d bytes, not its size %d", v, len(out), size)
		}
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, Shared)}, nil
}

// Appender is a message that can encode itself without reflection, such
// as the broker's SendResponse, one result per message sent.
type Appender interface {
	// MarshalSize returns the encoding's length, or false when AppendMarshal
	// cannot encode the message (then proto.Marshal does).
	MarshalSize() (int, bool)
	AppendMarshal(b []byte) []byte
}

func appendMarshal(a Appender, size int) (mem.BufferSlice, error) {
	if mem.IsBelowBufferPoolingThreshold(size) {
		return mem.BufferSlice{mem.SliceBuffer(a.AppendMarshal(make([]byte, 0, size)))}, nil
	}
	buf := Shared.Get(size)
	out := a.AppendMarshal((*buf)[:0])
	if len(out) != size {
		Shared.Put(buf)
		return nil, fmt.Errorf("proto: %T marshalled to %d bytes, not its size %d", a, len(out), size)
	}
	return mem.BufferSlice{mem.NewBuffer(buf, Shared)}, nil
}

// Encoded is a reply that is already encoded: the broker encodes a pull's
// answer while the log regions it copies from are held, straight into a
// Shared buffer, instead of gathering the records into a slice of their
// own that proto.Marshal would copy again. Marshal hands the buffers to
// gRPC, which frees them once written.
type Encoded interface {
	// TakeEncoding returns the encoding, once: the caller owns the buffers.
	TakeEncoding() (mem.BufferSlice, error)
}

// OwnedUnmarshaler is a message that can decode itself from bytes it then
// owns (and may alias), such as the broker's SendRequest whose records
// are most of it.
type OwnedUnmarshaler interface {
	UnmarshalOwned(b []byte) error
}

// PooledUnmarshaler is a message that decodes itself from the received
// bytes gathered into a Shared buffer (JoinPooled), which it keeps until
// it is done with the message and then puts back: the broker's SendStream
// requests, whose records are copied into the log before they are
// answered.
type PooledUnmarshaler interface {
	UnmarshalPooled(data mem.BufferSlice) error
}

// JoinPooled copies data into one Shared buffer, for Shared.Put once its
// holder is done with it.
func JoinPooled(data mem.BufferSlice) *[]byte {
	buf := Shared.Get(data.Len())
	at := 0
	for _, b := range data {
		at += copy((*buf)[at:], b.ReadOnlyData())
	}
	return buf
}

// Unmarshal is encoding/proto's Unmarshal with the Shared pool. An
// OwnedUnmarshaler gets a copy of the message of its own instead: one
// allocation, where proto.Unmarshal makes one per bytes field.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if p, ok := v.(PooledUnmarshaler); ok {
		return p.UnmarshalPooled(data)
	}
	if o, ok := v.(OwnedUnmarshaler); ok {
		return o.UnmarshalOwned(join(data))
	}
	m := messageOf(v)
	if m == nil {
		return fmt.Errorf("proto: cannot unmarshal into %T: not a proto.Message", v)
	}
	buf := data.MaterializeToBuffer(Shared)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

func messageOf(v any) proto.Message {
	switch v := v.(type) {
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(v)
	case protoadapt.MessageV2:
		return v
	}
	return nil
}

// join copies data into one new slice, as data.Materialize does, without
// clearing the slice first: bytes.Join allocates it uninitialised and
// overwrites all of it. A consumer's pull of 256 KiB no longer zeroes a
// buffer it is about to fill (BenchmarkUnmarshalOwned;
// docs/decisions/0020-client-hot-paths.md).
func join(data mem.BufferSlice) []byte {
	var small [32][]byte // a 256 KiB message arrives in 16 KiB frames
	parts := small[:0]
	for _, b := range data {
		parts = append(parts, b.ReadOnlyData())
	}
	return bytes.Join(parts, nil)
}
