package replication

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzMetaReceiver feeds a receiver chunks cut from the input: it never
// panics, never holds more than its limit, and returns a snapshot only
// when it has exactly the announced bytes, equal to what was sent.
func FuzzMetaReceiver(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 3, 'a', 'b', 'c'})
	f.Add([]byte{0, 0, 0, 0, 8, 'a', 'b', 'c', 0, 0, 0, 3, 0, 0, 0, 8, 'd', 'e', 'f', 'g', 'h'})
	f.Fuzz(func(t *testing.T, in []byte) {
		const limit = 64
		r := metaReceiver{max: limit}
		var sent []byte
		for len(in) >= 9 {
			off := int64(binary.BigEndian.Uint32(in))
			total := binary.BigEndian.Uint32(in[4:])
			n := min(int(in[8]%16)+1, len(in)-9)
			chunk := in[9 : 9+n]
			in = in[9+n:]
			body := binary.BigEndian.AppendUint32(nil, total)
			body = append(body, chunk...)
			if off == 0 {
				sent = sent[:0]
			}
			snap, err := r.add(off, body)
			if len(r.buf) > limit {
				t.Fatalf("receiver holds %d bytes, limit %d", len(r.buf), limit)
			}
			if err != nil {
				r = metaReceiver{max: limit} // the connection drops
				sent = sent[:0]
				continue
			}
			sent = append(sent, chunk...)
			if snap != nil {
				if uint32(len(snap)) != total || !bytes.Equal(snap, sent) {
					t.Fatalf("snapshot of %d bytes %q, announced %d, sent %q", len(snap), snap, total, sent)
				}
				sent = sent[:0]
			}
		}
	})
}
