// Package history is the record the reliability suite keeps of a run: one
// JSON object per line for every send attempt and its outcome, every
// message a consumer handled, every queue drained at the end, every
// committed offset seen and every fault injected. Workers append to their
// own file and sync it after each batch, so a worker killed with SIGKILL
// leaves everything it reported up to its last batch (and at worst a torn
// last line, which Read skips).
//
// A message's body is derived from its id (Body), so any reader can check
// a message it got without the producer's help.
package history

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"
)

// Kind is what an event records.
type Kind string

const (
	// Send: a send attempt (Outcome Invoke, written before the request
	// goes out) or its outcome (OK, Definite, Indeterminate).
	Send Kind = "send"
	// Recv: a consumer handled a message (before its handler returned).
	Recv Kind = "recv"
	// Drain: the final read of a queue found a message there.
	Drain Kind = "drain"
	// Queue: the final read of a queue: Offset is its min offset, Max its
	// max (next) offset.
	Queue Kind = "queue"
	// Commit: the group's committed offset of a queue (Offset), read at
	// Time, right after a consumer was killed.
	Commit Kind = "commit"
	// Fault: the harness injected a fault (Note says which) at Time.
	Fault Kind = "fault"
	// Heal: a fault's effect ended at Time (Note says how: a killed
	// broker serves again). An acknowledgement recorded between a fault
	// and the heal after it may have been given before the fault (a
	// response in flight when the broker died, read afterwards): the
	// checker counts a loss age of such an ack from that fault.
	Heal Kind = "heal"
	// Start: the harness started a broker process at Time, before it
	// serves. An acknowledgement recorded between a fault and the start
	// after it was given by the process the fault hit; one recorded after
	// the start may come from the new process, which can answer before
	// the harness sees it serve (the heal). The checker's hole test
	// (Options.LossAllowance) tells the two apart by it.
	Start Kind = "start"
	// Mark: a milestone of the harness (Note says which); the checker
	// ignores it.
	Mark Kind = "mark"
)

// Outcome is how a send attempt ended.
type Outcome string

const (
	Invoke        Outcome = "invoke"        // about to send; no outcome yet
	OK            Outcome = "ok"            // acknowledged (SEND_OK)
	Definite      Outcome = "definite"      // failed, nothing stored
	Indeterminate Outcome = "indeterminate" // failed, may be stored
)

// NoteDelayed marks the ack of a message sent with a delay: its queue and
// offset are those of the parked record, not of the message delivered
// later, which lands after messages sent after it.
const NoteDelayed = "delayed"

// Event is one line of a history.
type Event struct {
	Kind    Kind    `json:"kind"`
	ID      string  `json:"id,omitempty"`
	Key     string  `json:"key,omitempty"`
	Outcome Outcome `json:"outcome,omitempty"`
	Worker  string  `json:"worker,omitempty"`
	Topic   string  `json:"topic,omitempty"`
	// Broker, Queue: the queue (broker name and queue id).
	Broker string `json:"broker,omitempty"`
	Queue  int32  `json:"queue"`
	// Offset is the queue offset (send OK, recv, drain, commit) or the
	// queue's min offset (queue).
	Offset int64 `json:"offset"`
	// Max is the queue's max (next) offset (queue).
	Max int64 `json:"max,omitempty"`
	// Phys is the commit-log offset (send OK, recv, drain).
	Phys int64 `json:"phys,omitempty"`
	// Len and CRC describe the body read (recv, drain): its length and
	// CRC-32 (IEEE), to compare with Body(ID).
	Len int    `json:"len,omitempty"`
	CRC uint32 `json:"crc,omitempty"`
	// Batch numbers a consumer's handler calls (recv).
	Batch int64 `json:"batch,omitempty"`
	// Redelivery is the message's reconsume times (recv).
	Redelivery int32 `json:"redelivery,omitempty"`
	// Time is when it happened, Unix nanoseconds.
	Time int64  `json:"t"`
	Err  string `json:"err,omitempty"`
	Note string `json:"note,omitempty"`
}

// At returns e.Time as a time.
func (e Event) At() time.Time { return time.Unix(0, e.Time) }

// Now is the time stamp of an event made now.
func Now() int64 { return time.Now().UnixNano() }

// Body returns the body of the message with the given id: the id, a '|',
// then 32 to 543 bytes drawn from a generator seeded by the id.
func Body(id string) []byte {
	h := fnv.New64a()
	h.Write([]byte(id))
	seed := h.Sum64()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n := 32 + int(seed%512)
	b := make([]byte, 0, len(id)+1+n+8)
	b = append(b, id...)
	b = append(b, '|')
	for len(b) < len(id)+1+n {
		b = binary.LittleEndian.AppendUint64(b, rng.Uint64())
	}
	return b[:len(id)+1+n]
}

// CRC is the checksum recorded for a body read.
func CRC(body []byte) uint32 { return crc32.ChecksumIEEE(body) }

// IDOfBody returns the id at the start of a body made by Body.
func IDOfBody(body []byte) (string, bool) {
	i := bytes.IndexByte(body, '|')
	if i <= 0 || i > 128 {
		return "", false
	}
	return string(body[:i]), true
}

// Verify reports whether a body of length n and checksum crc is Body(id).
func Verify(id string, n int, crc uint32) bool {
	b := Body(id)
	return len(b) == n && CRC(b) == crc
}

// Writer appends events to a history file. Add buffers; Flush writes the
// buffered events with one write; Sync also fsyncs. Safe for concurrent
// use.
type Writer struct {
	mu     sync.Mutex
	f      *os.File
	buf    []byte
	err    error
	closed bool
}

// Create opens path for appending, creating it if needed.
func Create(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &Writer{f: f}, nil
}

// Add buffers events.
func (w *Writer) Add(events ...Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			w.err = errors.Join(w.err, err)
			continue
		}
		w.buf = append(append(w.buf, b...), '\n')
	}
}

// Flush writes what Add buffered, with one write, without syncing: enough
// for the events to survive the writer's own SIGKILL (the page cache
// does), which is all a worker needs before it sends.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

func (w *Writer) flushLocked() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) > 0 {
		if _, err := w.f.Write(w.buf); err != nil {
			w.err = fmt.Errorf("history: write %s: %w", w.f.Name(), err)
			return w.err
		}
		w.buf = w.buf[:0]
	}
	return nil
}

// Sync writes what Add buffered and fsyncs the file.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.flushLocked(); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		w.err = fmt.Errorf("history: sync %s: %w", w.f.Name(), err)
	}
	return w.err
}

// Append adds events and syncs.
func (w *Writer) Append(events ...Event) error {
	w.Add(events...)
	return w.Sync()
}

// Close syncs and closes the file. Later calls return nil.
func (w *Writer) Close() error {
	err := w.Sync()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.err == nil {
		w.err = errors.New("history: writer closed")
	}
	return errors.Join(err, w.f.Close())
}

// Read returns the events of a history file. A last line without its
// newline (a writer killed in the middle of a write) is skipped; any other
// line that does not parse is an error.
func Read(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	return Decode(f, path)
}

// Decode reads events from r (name is for errors); see Read.
func Decode(r io.Reader, name string) ([]Event, error) {
	var out []Event
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil // a torn last line, or none
		}
		if err != nil {
			return out, fmt.Errorf("history: read %s: %w", name, err)
		}
		var e Event
		if err := json.Unmarshal(line, &e); err != nil {
			return out, fmt.Errorf("history: %s line %d: %w", name, n, err)
		}
		out = append(out, e)
	}
}

// ReadAll reads several history files into one slice, in order.
func ReadAll(paths ...string) ([]Event, error) {
	var out []Event
	for _, p := range paths {
		evs, err := Read(p)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}
