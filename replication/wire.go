package replication

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gantrymq/gantry/replication/epoch"
)

// The HA port's protocol (docs/REPLICATION.md). All integers are big-endian.
//
//	hello   (slave → master, 36 bytes): [magic u32 "GHAS"][version u16][flags u16]
//	        [replica id i64][segment bytes i64][log end i64][max frame body u32]
//	        flags bit 0 (signed): a proof follows, [nonce 16 bytes][date length u8][date]
//	        [authorization length u16][authorization] (HelloProof)
//	welcome (master → slave, 32+n+4+12k bytes): [magic u32 "GHAM"][version u16][status u16]
//	        [segment bytes i64][log end i64][epoch i32][reason length u16][0 u16][reason n bytes]
//	        [epoch count u32][k × [epoch i32][start offset i64]] (the master's epoch list,
//	        epoch.AppendWire; in a welcome of this Version only, refusals included)
//	frame   (master → slave, 17+n bytes): [type u8][epoch i32][offset i64][body length u32][body]
//	        type 1 data, 2 heartbeat (offset: the master's log end), 3 metadata, 4 confirm
//	        (offset: the master's confirmed offset); heartbeats and confirms have no body
//	        a metadata frame's offset is its chunk's position in the snapshot, its body
//	        [snapshot length u32][chunk]
//	ack     (slave → master, 8 bytes): [log end i64]
const (
	// Version is the protocol version this package speaks. Version 2
	// added the master's epoch list to the welcome and labels each data
	// frame with its data's epoch; version 3 the confirm frame. A peer of
	// another version is refused with a reason naming both.
	Version = 3

	// HelloSize, WelcomeHeaderSize, FrameHeaderSize and AckSize are the
	// fixed sizes of the messages (a welcome is followed by its reason and
	// its epoch list).
	HelloSize         = 36
	WelcomeHeaderSize = 32
	FrameHeaderSize   = 17
	AckSize           = 8

	// MaxReasonBytes bounds a refusal's reason on the wire; a longer one is
	// cut when encoded and refused when decoded.
	MaxReasonBytes = 1024

	// NonceSize is the size of a signed hello's nonce, and
	// MaxAuthorizationBytes bounds its authorization on the wire.
	NonceSize             = 16
	MaxAuthorizationBytes = 1024

	// helloSigned is the hello flag of a proof following it.
	helloSigned uint16 = 1

	helloMagic   uint32 = 0x47484153 // "GHAS"
	welcomeMagic uint32 = 0x4748414D // "GHAM"
)

// FrameType says what a frame carries.
type FrameType uint8

const (
	// FrameData carries log bytes at Offset: whole entries as the master's
	// log holds them (commitlog.CopyReplica).
	FrameData FrameType = 1
	// FrameHeartbeat has no body; Offset is the master's log end.
	FrameHeartbeat FrameType = 2
	// FrameMeta carries a chunk of a metadata snapshot (meta.go): Offset
	// is the chunk's position in the snapshot, the body the snapshot's
	// length (u32) and the chunk.
	FrameMeta FrameType = 3
	// FrameConfirm has no body; Offset is the master's confirmed offset
	// (MasterConfig.Confirmed), which the master's consumers may read up
	// to, at most what it sent the slave. A slave in controller mode lets
	// its own consumers read up to it (docs/REPLICATION.md, "What
	// consumers read").
	FrameConfirm FrameType = 4
)

func (t FrameType) String() string {
	switch t {
	case FrameData:
		return "data"
	case FrameHeartbeat:
		return "heartbeat"
	case FrameMeta:
		return "metadata"
	case FrameConfirm:
		return "confirm"
	}
	return fmt.Sprintf("type %d", uint8(t))
}

// Hello is the slave's first message.
type Hello struct {
	Version       uint16
	ReplicaID     int64  // the slave's broker id
	SegmentBytes  int64  // the slave's log's segment size
	End           int64  // the slave's log end: where the stream starts
	MaxFrameBytes uint32 // the largest frame body the slave takes
	// Proof, when set, signs the hello with the slave's cluster
	// credentials (docs/SECURITY.md, "Cluster"); nil: an unsigned hello,
	// the only kind before authentication.
	Proof *HelloProof
}

// HelloProof is a signed hello's proof of identity: a fresh nonce, and
// the signature of the hello's SignedContent as gRPC metadata values (the
// auth package's SignGRPC with the content as the method), so that the
// master checks it with the users, the clock window and the refusal
// counters of its gRPC calls.
type HelloProof struct {
	Nonce         [NonceSize]byte
	Date          string // Unix milliseconds in decimal, at most 255 bytes
	Authorization string // at most MaxAuthorizationBytes
}

// SignedContent is what a slave signs in its hello: every field of the
// hello and the proof's nonce, so that a proof is good for that hello
// only. It never parses as a gRPC method.
func (h Hello) SignedContent(nonce [NonceSize]byte) string {
	return fmt.Sprintf("gantry-ha-hello/%d replica=%d segment=%d end=%d max-frame=%d nonce=%x",
		h.Version, h.ReplicaID, h.SegmentBytes, h.End, h.MaxFrameBytes, nonce)
}

// Welcome is the master's answer to a Hello: a refusal when Reason is set.
type Welcome struct {
	Version      uint16
	SegmentBytes int64  // the master's log's segment size
	End          int64  // the master's log end
	Epoch        int32  // the master's epoch
	Reason       string // why the master refuses the slave; empty: accepted
	// Epochs is the master's epoch list, oldest first (replication/epoch),
	// which a slave compares with its own before it appends anything. It
	// is on the wire in a welcome of this Version only: nil in another's.
	Epochs []epoch.Entry
	// Start is the master's log's first offset (retention deleted what
	// lay below): a replica whose log ends below it resyncs from there.
	// After the epoch list, in a welcome of this Version only.
	Start int64
}

// FrameHeader is the fixed part of a frame.
type FrameHeader struct {
	Type    FrameType
	Epoch   int32
	Offset  int64
	BodyLen uint32
}

// AppendHello appends h's encoding to b, its proof after it when set; a
// date or authorization too long for the wire is cut (and then fails the
// master's check).
func AppendHello(b []byte, h Hello) []byte {
	var flags uint16
	if h.Proof != nil {
		flags = helloSigned
	}
	b = binary.BigEndian.AppendUint32(b, helloMagic)
	b = binary.BigEndian.AppendUint16(b, h.Version)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint64(b, uint64(h.ReplicaID))
	b = binary.BigEndian.AppendUint64(b, uint64(h.SegmentBytes))
	b = binary.BigEndian.AppendUint64(b, uint64(h.End))
	b = binary.BigEndian.AppendUint32(b, h.MaxFrameBytes)
	if p := h.Proof; p != nil {
		date, authz := p.Date[:min(len(p.Date), 255)], p.Authorization[:min(len(p.Authorization), MaxAuthorizationBytes)]
		b = append(b, p.Nonce[:]...)
		b = append(b, byte(len(date)))
		b = append(b, date...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(authz)))
		b = append(b, authz...)
	}
	return b
}

// decodeHelloHeader decodes the HelloSize bytes of a hello's fixed part
// and reports whether a proof follows.
func decodeHelloHeader(b []byte) (Hello, bool, error) {
	if len(b) != HelloSize {
		return Hello{}, false, fmt.Errorf("%w: hello of %d bytes, want %d", ErrProtocol, len(b), HelloSize)
	}
	if m := binary.BigEndian.Uint32(b); m != helloMagic {
		return Hello{}, false, fmt.Errorf("%w: hello magic %#x, want %#x (not a Gantry replica)", ErrProtocol, m, helloMagic)
	}
	flags := binary.BigEndian.Uint16(b[6:])
	if flags&^helloSigned != 0 {
		return Hello{}, false, fmt.Errorf("%w: hello flags %#x, want 0 or %#x (signed)", ErrProtocol, flags, helloSigned)
	}
	return Hello{
		Version:       binary.BigEndian.Uint16(b[4:]),
		ReplicaID:     int64(binary.BigEndian.Uint64(b[8:])),
		SegmentBytes:  int64(binary.BigEndian.Uint64(b[16:])),
		End:           int64(binary.BigEndian.Uint64(b[24:])),
		MaxFrameBytes: binary.BigEndian.Uint32(b[32:]),
	}, flags&helloSigned != 0, nil
}

// readProof reads a signed hello's proof, its lengths checked before
// anything is allocated for it.
func readProof(r io.Reader) (*HelloProof, error) {
	short := func(what string, err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: signed hello cut in its %s: %w", ErrProtocol, what, err)
		}
		return fmt.Errorf("replication: read hello's %s: %w", what, err)
	}
	p := &HelloProof{}
	var head [NonceSize + 1]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, short("nonce", err)
	}
	copy(p.Nonce[:], head[:NonceSize])
	date := make([]byte, int(head[NonceSize])+2) // the date and the authorization's length
	if _, err := io.ReadFull(r, date); err != nil {
		return nil, short("date", err)
	}
	n := int(binary.BigEndian.Uint16(date[len(date)-2:]))
	if n > MaxAuthorizationBytes {
		return nil, fmt.Errorf("%w: signed hello announces an authorization of %d bytes, at most %d", ErrProtocol, n, MaxAuthorizationBytes)
	}
	authz := make([]byte, n)
	if _, err := io.ReadFull(r, authz); err != nil {
		return nil, short("authorization", err)
	}
	p.Date, p.Authorization = string(date[:len(date)-2]), string(authz)
	return p, nil
}

// DecodeHello decodes a whole hello, b holding exactly its bytes: the
// HelloSize bytes of its fixed part and, in a signed hello, its proof. It
// checks the framing only; what the master accepts is its own decision.
func DecodeHello(b []byte) (Hello, error) {
	if len(b) < HelloSize {
		return Hello{}, fmt.Errorf("%w: hello of %d bytes, want %d", ErrProtocol, len(b), HelloSize)
	}
	h, signed, err := decodeHelloHeader(b[:HelloSize])
	if err != nil {
		return Hello{}, err
	}
	if !signed {
		if len(b) != HelloSize {
			return Hello{}, fmt.Errorf("%w: unsigned hello of %d bytes, want %d", ErrProtocol, len(b), HelloSize)
		}
		return h, nil
	}
	r := bytes.NewReader(b[HelloSize:])
	if h.Proof, err = readProof(r); err != nil {
		return Hello{}, err
	}
	if r.Len() > 0 {
		return Hello{}, fmt.Errorf("%w: %d bytes after the hello's proof", ErrProtocol, r.Len())
	}
	return h, nil
}

// ReadHello reads and decodes a hello from r, with its proof when signed.
func ReadHello(r io.Reader) (Hello, error) {
	var b [HelloSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return Hello{}, fmt.Errorf("replication: read hello: %w", err)
	}
	h, signed, err := decodeHelloHeader(b[:])
	if err == nil && signed {
		h.Proof, err = readProof(r)
	}
	if err != nil {
		return Hello{}, err
	}
	return h, nil
}

// AppendWelcome appends w's encoding to b; a reason longer than
// MaxReasonBytes is cut. The epoch list is appended when w.Version is
// Version, so that a welcome of version 1 is encoded as version 1 was.
func AppendWelcome(b []byte, w Welcome) []byte {
	reason := w.Reason
	if len(reason) > MaxReasonBytes {
		reason = reason[:MaxReasonBytes]
	}
	var status uint16
	if reason != "" {
		status = 1
	}
	b = binary.BigEndian.AppendUint32(b, welcomeMagic)
	b = binary.BigEndian.AppendUint16(b, w.Version)
	b = binary.BigEndian.AppendUint16(b, status)
	b = binary.BigEndian.AppendUint64(b, uint64(w.SegmentBytes))
	b = binary.BigEndian.AppendUint64(b, uint64(w.End))
	b = binary.BigEndian.AppendUint32(b, uint32(w.Epoch))
	b = binary.BigEndian.AppendUint16(b, uint16(len(reason)))
	b = binary.BigEndian.AppendUint16(b, 0)
	b = append(b, reason...)
	if w.Version == Version {
		b = epoch.AppendWire(b, w.Epochs)
		b = binary.BigEndian.AppendUint64(b, uint64(w.Start))
	}
	return b
}

// readStart reads a welcome's Start, after its epoch list, and checks it.
func readStart(r io.Reader, w *Welcome) error {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: welcome without the master's first offset: %w", ErrProtocol, err)
		}
		return fmt.Errorf("replication: read welcome's first offset: %w", err)
	}
	w.Start = int64(binary.BigEndian.Uint64(b[:]))
	if w.Start < 0 || w.Reason == "" && w.Start > w.End {
		return fmt.Errorf("%w: welcome's first offset %d outside the master's log [0, %d]", ErrProtocol, w.Start, w.End)
	}
	return nil
}

// decodeWelcomeHeader decodes the fixed part of a welcome and returns the
// reason's length, checked against MaxReasonBytes.
func decodeWelcomeHeader(b []byte) (Welcome, int, error) {
	if len(b) != WelcomeHeaderSize {
		return Welcome{}, 0, fmt.Errorf("%w: welcome of %d bytes, want %d", ErrProtocol, len(b), WelcomeHeaderSize)
	}
	if m := binary.BigEndian.Uint32(b); m != welcomeMagic {
		return Welcome{}, 0, fmt.Errorf("%w: welcome magic %#x, want %#x (not a Gantry master)", ErrProtocol, m, welcomeMagic)
	}
	status := binary.BigEndian.Uint16(b[6:])
	n := int(binary.BigEndian.Uint16(b[28:]))
	switch {
	case status > 1:
		return Welcome{}, 0, fmt.Errorf("%w: welcome status %d, want 0 or 1", ErrProtocol, status)
	case binary.BigEndian.Uint16(b[30:]) != 0:
		return Welcome{}, 0, fmt.Errorf("%w: welcome's reserved field is not 0", ErrProtocol)
	case n > MaxReasonBytes:
		return Welcome{}, 0, fmt.Errorf("%w: welcome announces a reason of %d bytes, at most %d", ErrProtocol, n, MaxReasonBytes)
	case (status == 1) != (n > 0):
		return Welcome{}, 0, fmt.Errorf("%w: welcome status %d with a reason of %d bytes", ErrProtocol, status, n)
	}
	return Welcome{
		Version:      binary.BigEndian.Uint16(b[4:]),
		SegmentBytes: int64(binary.BigEndian.Uint64(b[8:])),
		End:          int64(binary.BigEndian.Uint64(b[16:])),
		Epoch:        int32(binary.BigEndian.Uint32(b[24:])),
	}, n, nil
}

// DecodeWelcome decodes a whole welcome, b holding exactly its bytes. A
// welcome of this Version must end right after its epoch list, which is
// checked as epoch.ReadWire checks it (a count above epoch.MaxEntries is
// refused before anything is allocated).
func DecodeWelcome(b []byte) (Welcome, error) {
	if len(b) < WelcomeHeaderSize {
		return Welcome{}, fmt.Errorf("%w: welcome of %d bytes, at least %d", ErrProtocol, len(b), WelcomeHeaderSize)
	}
	w, n, err := decodeWelcomeHeader(b[:WelcomeHeaderSize])
	if err != nil {
		return Welcome{}, err
	}
	if len(b) < WelcomeHeaderSize+n {
		return Welcome{}, fmt.Errorf("%w: welcome of %d bytes, its header announces a reason of %d", ErrProtocol, len(b), n)
	}
	w.Reason = string(b[WelcomeHeaderSize : WelcomeHeaderSize+n])
	rest := b[WelcomeHeaderSize+n:]
	if w.Version != Version {
		if len(rest) > 0 {
			return Welcome{}, fmt.Errorf("%w: welcome of version %d with %d bytes after its reason", ErrProtocol, w.Version, len(rest))
		}
		return w, nil
	}
	r := bytes.NewReader(rest)
	if w.Epochs, err = readEpochs(r); err != nil {
		return Welcome{}, err
	}
	if err := readStart(r, &w); err != nil {
		return Welcome{}, err
	}
	if r.Len() > 0 {
		return Welcome{}, fmt.Errorf("%w: %d bytes after the welcome's first offset", ErrProtocol, r.Len())
	}
	return w, nil
}

// readEpochs reads a welcome's epoch list: a list epoch.ReadWire refuses,
// or one cut short, is a protocol violation.
func readEpochs(r io.Reader) ([]epoch.Entry, error) {
	list, err := epoch.ReadWire(r)
	switch {
	case err == nil:
		return list, nil
	case errors.Is(err, epoch.ErrInvalidEntry), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("%w: welcome's epoch list: %w", ErrProtocol, err)
	}
	return nil, fmt.Errorf("replication: read welcome's epoch list: %w", err)
}

// ReadWelcome reads and decodes a welcome from r.
func ReadWelcome(r io.Reader) (Welcome, error) {
	var b [WelcomeHeaderSize + MaxReasonBytes]byte
	if _, err := io.ReadFull(r, b[:WelcomeHeaderSize]); err != nil {
		return Welcome{}, fmt.Errorf("replication: read welcome: %w", err)
	}
	w, n, err := decodeWelcomeHeader(b[:WelcomeHeaderSize])
	if err != nil {
		return Welcome{}, err
	}
	if _, err := io.ReadFull(r, b[WelcomeHeaderSize:WelcomeHeaderSize+n]); err != nil {
		return Welcome{}, fmt.Errorf("replication: read welcome's reason: %w", err)
	}
	w.Reason = string(b[WelcomeHeaderSize : WelcomeHeaderSize+n])
	if w.Version == Version {
		if w.Epochs, err = readEpochs(r); err != nil {
			return Welcome{}, err
		}
		if err := readStart(r, &w); err != nil {
			return Welcome{}, err
		}
	}
	return w, nil
}

// AppendFrameHeader appends h's encoding to b.
func AppendFrameHeader(b []byte, h FrameHeader) []byte {
	b = append(b, byte(h.Type))
	b = binary.BigEndian.AppendUint32(b, uint32(h.Epoch))
	b = binary.BigEndian.AppendUint64(b, uint64(h.Offset))
	return binary.BigEndian.AppendUint32(b, h.BodyLen)
}

// DecodeFrameHeader decodes a frame header from the FrameHeaderSize bytes
// of b and checks it: a known type, an offset and an epoch that are not
// negative, no body on a heartbeat, and a data body of 1 to maxBody bytes
// (ErrFrameTooLarge past it), so that the caller may allocate the body.
func DecodeFrameHeader(b []byte, maxBody int) (FrameHeader, error) {
	if len(b) != FrameHeaderSize {
		return FrameHeader{}, fmt.Errorf("%w: frame header of %d bytes, want %d", ErrProtocol, len(b), FrameHeaderSize)
	}
	h := FrameHeader{
		Type:    FrameType(b[0]),
		Epoch:   int32(binary.BigEndian.Uint32(b[1:])),
		Offset:  int64(binary.BigEndian.Uint64(b[5:])),
		BodyLen: binary.BigEndian.Uint32(b[13:]),
	}
	switch {
	case h.Type < FrameData || h.Type > FrameConfirm:
		return FrameHeader{}, fmt.Errorf("%w: unknown frame %s", ErrProtocol, h.Type)
	case h.Offset < 0:
		return FrameHeader{}, fmt.Errorf("%w: %s frame at negative offset %d", ErrProtocol, h.Type, h.Offset)
	case h.Epoch < 0:
		return FrameHeader{}, fmt.Errorf("%w: %s frame at %d of negative epoch %d", ErrProtocol, h.Type, h.Offset, h.Epoch)
	case (h.Type == FrameHeartbeat || h.Type == FrameConfirm) && h.BodyLen != 0:
		return FrameHeader{}, fmt.Errorf("%w: %s frame with a body of %d bytes", ErrProtocol, h.Type, h.BodyLen)
	case h.Type == FrameData && h.BodyLen == 0:
		return FrameHeader{}, fmt.Errorf("%w: data frame at %d without a body", ErrProtocol, h.Offset)
	case h.Type == FrameMeta && h.BodyLen <= metaLenSize:
		return FrameHeader{}, fmt.Errorf("%w: metadata frame at %d with a body of %d bytes, want more than %d", ErrProtocol, h.Offset, h.BodyLen, metaLenSize)
	case int64(h.BodyLen) > int64(maxBody):
		return FrameHeader{}, &FrameTooLargeError{Offset: h.Offset, Len: h.BodyLen, Max: maxBody}
	}
	return h, nil
}

// ReadFrame reads a frame from r, its body into buf if it fits, else into
// a new buffer, after DecodeFrameHeader checked its length against
// maxBody: a longer frame is refused after its header is read, with
// nothing allocated for it.
func ReadFrame(r io.Reader, buf []byte, maxBody int) (FrameHeader, []byte, error) {
	var b [FrameHeaderSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return FrameHeader{}, nil, fmt.Errorf("replication: read frame header: %w", err)
	}
	h, err := DecodeFrameHeader(b[:], maxBody)
	if err != nil {
		return FrameHeader{}, nil, err
	}
	n := int(h.BodyLen)
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	body := buf[:n]
	if _, err := io.ReadFull(r, body); err != nil {
		return FrameHeader{}, nil, fmt.Errorf("replication: read %s frame body of %d bytes at %d: %w", h.Type, n, h.Offset, err)
	}
	return h, body, nil
}

// AppendAck appends an ack of log end end to b.
func AppendAck(b []byte, end int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(end))
}

// DecodeAck decodes an ack from the AckSize bytes of b.
func DecodeAck(b []byte) (int64, error) {
	if len(b) != AckSize {
		return 0, fmt.Errorf("%w: ack of %d bytes, want %d", ErrProtocol, len(b), AckSize)
	}
	end := int64(binary.BigEndian.Uint64(b))
	if end < 0 {
		return 0, fmt.Errorf("%w: ack of negative end %d", ErrProtocol, end)
	}
	return end, nil
}
