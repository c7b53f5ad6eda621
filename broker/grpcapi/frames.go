package grpcapi

import (
	"encoding/binary"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/internal/grpcbuf"
	"github.com/gantrymq/gantry/message"
)

// pooledSendRequest is a SendRequest decoded by the broker's one decoder
// (UnmarshalPooled), for Send and SendStream alike, and released once the
// request is answered: the store copies the records into the log, and the
// answer's keys and ids into buffers of its own, so nothing of the request
// outlives its answer, and a request costs no allocation of its size.
type pooledSendRequest struct {
	req    gantryv1.SendRequest
	buf    *[]byte         // the records unmarshalFrames copied (a Shared buffer)
	frames mem.BufferSlice // gRPC's buffers, when the records are views of them
}

// UnmarshalPooled implements grpcbuf.PooledUnmarshaler. A request of
// records, as Gantry's producer sends them, keeps gRPC's buffers and its
// records are views of them (unmarshalFrames). The slow branch, for
// anything else (messages, unknown fields, records that are not whole,
// malformed input), joins the buffers and leaves them to proto.Unmarshal,
// which copies what it keeps, or says what is wrong.
func (p *pooledSendRequest) UnmarshalPooled(data mem.BufferSlice) error {
	if p.unmarshalFrames(data) {
		return nil
	}
	joined := grpcbuf.JoinPooled(data)
	defer grpcbuf.Shared.Put(joined)
	return proto.Unmarshal(*joined, &p.req)
}

// release gives back what the request holds of gRPC's buffers and the
// Shared pool.
func (p *pooledSendRequest) release() {
	if p.buf != nil {
		grpcbuf.Shared.Put(p.buf)
		p.buf = nil
	}
	if p.frames != nil {
		p.frames.Free()
		p.frames = nil
	}
}

// frames reads a message that gRPC received in several buffers (one a
// 16 KiB HTTP/2 frame, mostly) as one run of bytes, without joining them.
type frames struct {
	segs [][]byte
	i    int // the segment read next
	off  int // in segs[i]
	left int // bytes not read yet
}

func newFrames(data mem.BufferSlice, segs [][]byte) frames {
	f := frames{segs: segs[:0]}
	for _, b := range data {
		if s := b.ReadOnlyData(); len(s) > 0 {
			f.segs = append(f.segs, s)
			f.left += len(s)
		}
	}
	return f
}

// peek copies the next bytes into dst, as many as there are, without
// reading them, and returns how many it copied.
func (f *frames) peek(dst []byte) int {
	n := 0
	for i, off := f.i, f.off; n < len(dst) && i < len(f.segs); i, off = i+1, 0 {
		n += copy(dst[n:], f.segs[i][off:])
	}
	return n
}

// skip reads n bytes (at most f.left).
func (f *frames) skip(n int) {
	f.left -= n
	for n > 0 {
		c := min(n, len(f.segs[f.i])-f.off)
		f.off += c
		n -= c
		if f.off == len(f.segs[f.i]) {
			f.i, f.off = f.i+1, 0
		}
	}
}

// inSegment reports whether the next n bytes lie in one segment.
func (f *frames) inSegment(n int) bool { return f.i < len(f.segs) && len(f.segs[f.i])-f.off >= n }

// varint reads a varint.
func (f *frames) varint() (uint64, bool) {
	var b [binary.MaxVarintLen64]byte
	v, n := protowire.ConsumeVarint(b[:f.peek(b[:])])
	if n < 0 {
		return 0, false
	}
	f.skip(n)
	return v, true
}

// take reads the next n bytes (at most f.left): a view of their segment
// when one holds them all, else a copy, into *stitch (a Shared buffer,
// got when first needed) if it has the room (it never grows), else into a
// buffer of its own. The stitch buffer is not a field of frames: escape
// analysis follows a struct as a whole, and the buffer goes to the heap
// (the request keeps it), which would take the segments' array along.
func (f *frames) take(n int, stitch **[]byte) []byte {
	if f.inSegment(n) {
		b := f.segs[f.i][f.off : f.off+n : f.off+n]
		f.skip(n)
		return b
	}
	if *stitch == nil {
		*stitch = grpcbuf.Shared.Get(stitchSize)
		**stitch = (**stitch)[:0]
	}
	var b []byte
	if s := **stitch; cap(s)-len(s) >= n {
		b = s[len(s) : len(s)+n : len(s)+n]
		**stitch = s[:len(s)+n]
	} else {
		b = make([]byte, n)
	}
	f.peek(b)
	f.skip(n)
	return b
}

// stitchSize is the buffer a request's records that straddle two
// segments are copied into (larger ones get their own).
const stitchSize = 32 << 10

// unmarshalFrames is UnmarshalPooled's fast branch: it decodes a
// SendRequest of records from data without joining its buffers. Each
// records element is cut at its records' boundaries (TOTALSIZE) into
// chunks that are views of the buffers, but for a record that straddles
// two buffers, which is copied (into p.buf) and is a chunk of its own; the
// other fields go to SetHeaderField. The buffers are kept (Ref) until
// release. It reports false, having kept nothing, for a request of any
// other form (messages, unknown fields, a record size that does not fit
// its element): the slow branch then starts afresh.
func (p *pooledSendRequest) unmarshalFrames(data mem.BufferSlice) bool {
	p.req.Reset() // as proto.Unmarshal does: a field the request lacks is left zero
	var small [32][]byte
	f := newFrames(data, small[:])
	chunks := make([][]byte, 0, 2*len(f.segs)+1) // a run and a copied record a segment, at most
	var stitch *[]byte
	if !readFields(&f, &p.req, &chunks, &stitch) || len(chunks) == 0 {
		if stitch != nil {
			grpcbuf.Shared.Put(stitch)
		}
		return false
	}
	p.req.Records = chunks
	data.Ref()
	p.frames, p.buf = data, stitch
	return true
}

// readFields reads f's fields into req and its records into chunks,
// copying what straddles segments into *stitch (see take).
func readFields(f *frames, req *gantryv1.SendRequest, chunks *[][]byte, stitch **[]byte) bool {
	for f.left > 0 {
		tag, ok := f.varint()
		if !ok {
			return false
		}
		num, typ := protowire.DecodeTag(tag)
		var v []byte
		var u uint64
		switch typ {
		case protowire.VarintType:
			if u, ok = f.varint(); !ok {
				return false
			}
		case protowire.BytesType:
			l, ok := f.varint()
			if !ok || l > uint64(f.left) {
				return false
			}
			if num == 5 {
				if l == 0 || !readRecords(f, int(l), chunks, stitch) {
					return false
				}
				continue
			}
			v = f.take(int(l), stitch)
		default:
			return false
		}
		if !req.SetHeaderField(num, typ, v, u) {
			return false
		}
	}
	return true
}

// readRecords reads a records element of n bytes into chunks of whole
// records: a run of records in one segment is one chunk.
func readRecords(f *frames, n int, chunks *[][]byte, stitch **[]byte) bool {
	var run []byte // the run of records read last, a view of segment runSeg
	runSeg := -1
	flush := func() {
		if len(run) > 0 {
			*chunks = append(*chunks, run[:len(run):len(run)])
		}
		run, runSeg = nil, -1
	}
	for n > 0 {
		var hdr [4]byte
		if f.peek(hdr[:]) < len(hdr) {
			return false
		}
		size := int(binary.BigEndian.Uint32(hdr[:]))
		if size < message.MinRecordSize || size > n {
			return false
		}
		if f.inSegment(size) {
			if f.i != runSeg {
				flush()
				run, runSeg = f.segs[f.i][f.off:f.off], f.i
			}
			run = run[:len(run)+size] // the records follow each other in the segment
			f.skip(size)
		} else {
			flush()
			*chunks = append(*chunks, f.take(size, stitch))
		}
		n -= size
	}
	flush()
	return true
}
