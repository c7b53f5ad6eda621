package grpcapi

import (
	"encoding/binary"
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/internal/grpcbuf"
	"github.com/gantrymq/gantry/message"
)

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
// (view set) when one holds them all, else a copy, appended to *stitch
// if it has the room (it never grows), else in a buffer of its own.
func (f *frames) take(n int, stitch *[]byte) (b []byte, view bool) {
	if f.i < len(f.segs) && len(f.segs[f.i])-f.off >= n {
		b = f.segs[f.i][f.off : f.off+n : f.off+n]
		f.skip(n)
		return b, true
	}
	if s := *stitch; cap(s)-len(s) >= n {
		b = s[len(s) : len(s)+n : len(s)+n]
		*stitch = s[:len(s)+n]
	} else {
		b = make([]byte, n)
	}
	f.peek(b)
	f.skip(n)
	return b, false
}

// stitchSize is the buffer a request's records that straddle two
// segments are copied into (larger ones get their own).
const stitchSize = 32 << 10

// unmarshalFrames decodes a SendRequest of records from data without
// joining its buffers: each records element is cut at its records'
// boundaries (TOTALSIZE) into chunks that are views of the buffers, but
// for a record that straddles two buffers, which is copied (into
// p.stitch) and is a chunk of its own. The buffers are kept (Ref) until
// release. It reports false, having kept nothing, for a request of any
// other form (messages, unknown fields, a record size that does not fit
// its element): the caller then joins the buffers and UnmarshalOwned
// decodes the request or says what is wrong with it.
func (p *pooledSendRequest) unmarshalFrames(data mem.BufferSlice) bool {
	var small [32][]byte
	f := newFrames(data, small[:])
	req := gantryv1.SendRequest{}
	chunks := make([][]byte, 0, 2*len(f.segs)+1) // a run and a copied record a segment, at most
	var stitch *[]byte
	ok := p.readFields(&f, &req, &chunks, &stitch)
	if !ok || len(chunks) == 0 {
		if stitch != nil {
			grpcbuf.Shared.Put(stitch)
		}
		return false
	}
	req.Records = chunks
	p.req.Topic, p.req.ProducerGroup, p.req.RequestId, p.req.Records = req.Topic, req.ProducerGroup, req.RequestId, req.Records
	data.Ref()
	p.frames, p.buf = data, stitch
	return true
}

// readFields reads f's fields into req and its records into chunks.
func (p *pooledSendRequest) readFields(f *frames, req *gantryv1.SendRequest, chunks *[][]byte, stitch **[]byte) bool {
	for f.left > 0 {
		tag, ok := f.varint()
		if !ok {
			return false
		}
		num, typ := protowire.DecodeTag(tag)
		if typ == protowire.VarintType {
			v, ok := f.varint()
			if !ok || num != 4 {
				return false
			}
			req.RequestId = v
			continue
		}
		if typ != protowire.BytesType {
			return false
		}
		l, ok := f.varint()
		if !ok || l > uint64(f.left) {
			return false
		}
		switch num {
		case 1, 3:
			var scratch []byte
			b, _ := f.take(int(l), &scratch)
			if !utf8.Valid(b) {
				return false
			}
			if num == 1 {
				req.Topic = string(b)
			} else {
				req.ProducerGroup = string(b)
			}
		case 5:
			if l == 0 || !readRecords(f, int(l), chunks, stitch) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// readRecords reads a records element of n bytes into chunks of whole
// records.
func readRecords(f *frames, n int, chunks *[][]byte, stitch **[]byte) bool {
	var run []byte // the records read since the last chunk, in one segment
	runSeg := -1
	for n > 0 {
		var hdr [4]byte
		if f.peek(hdr[:]) < len(hdr) {
			return false
		}
		size := int(binary.BigEndian.Uint32(hdr[:]))
		if size < message.MinRecordSize || size > n {
			return false
		}
		seg := f.i
		if seg == runSeg && len(f.segs[seg])-f.off >= size { // follows run in its segment
			run = run[:len(run)+size]
			f.skip(size)
			n -= size
			continue
		}
		if run != nil {
			*chunks = append(*chunks, run[:len(run):len(run)])
			run, runSeg = nil, -1
		}
		if len(f.segs[seg])-f.off >= size {
			run, runSeg = f.segs[seg][f.off:f.off+size], seg
			f.skip(size)
			n -= size
			continue
		}
		if *stitch == nil {
			*stitch = grpcbuf.Shared.Get(stitchSize)
			**stitch = (**stitch)[:0]
		}
		rec, _ := f.take(size, *stitch)
		*chunks = append(*chunks, rec)
		n -= size
	}
	if run != nil {
		*chunks = append(*chunks, run[:len(run):len(run)])
	}
	return true
}
