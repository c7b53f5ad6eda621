package verify

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gantrymq/gantry/consumequeue"
	"github.com/gantrymq/gantry/internal/fsx"
	"github.com/gantrymq/gantry/message"
)

const (
	queueDir = "consumequeue"
	// scheduleTopic's consume queues hold a delivery time, not a tag hash.
	scheduleTopic = "SCHEDULE_TOPIC_XXXX"
)

// checkQueues checks every consume queue: consumequeue/<topic>/<queueId>/.
func (v *verifier) checkQueues() {
	root := filepath.Join(v.dir, queueDir)
	for _, topic := range v.listDir(root, KindConsumeQueue) {
		tdir := filepath.Join(root, topic)
		if !v.isDir(tdir, "a topic directory") {
			continue
		}
		for _, name := range v.listDir(tdir, KindConsumeQueue) {
			qdir := filepath.Join(tdir, name)
			qid, err := strconv.ParseInt(name, 10, 32)
			if err != nil || qid < 0 || strconv.FormatInt(qid, 10) != name {
				v.addf(KindConsumeQueue, qdir, 0, "unexpected entry in a topic directory: %q is not a queue id", name)
				continue
			}
			if !v.isDir(qdir, "a queue directory") || v.ctx.Err() != nil {
				continue
			}
			v.progress("consumequeue: %s/%d", topic, qid)
			v.rep.ConsumeQueues.Queues++
			q := &queueScan{v: v, topic: topic, qid: int32(qid), prevPhys: -1}
			q.run(qdir)
			v.noteQueueEnd(topic, int32(qid), qdir, q.end)
		}
	}
}

// isDir reports whether path is a directory, reporting it when not.
func (v *verifier) isDir(path, what string) bool {
	info, err := v.fsys.Stat(path)
	switch {
	case err != nil:
		v.addf(KindIO, path, 0, "cannot stat: %v", err)
		return false
	case !info.IsDir:
		v.addf(KindConsumeQueue, path, 0, "unexpected file: expected %s", what)
		return false
	}
	return true
}

// queueState is where a queue's scan is: before its first real entry
// (placeholders allowed), among real entries, or in the unused zero tail.
type queueState int

const (
	stateLeading queueState = iota
	stateEntries
	stateTail
)

// queueScan checks one consume queue.
type queueScan struct {
	v        *verifier
	topic    string
	qid      int32
	state    queueState
	prevPhys int64 // commit-log offset of the previous real entry, -1 before the first
	end      int64 // one past the last entry (real or placeholder)
	m        message.Message
}

// qfile is one file of a queue.
type qfile struct {
	base int64 // logical byte offset of its first entry
	path string
	size int64
}

func (q *queueScan) run(dir string) {
	files := q.listFiles(dir)
	for _, f := range files {
		if q.v.ctx.Err() != nil {
			return
		}
		q.scanFile(f)
	}
}

// listFiles lists the queue's files and reports bad names, sizes and gaps.
func (q *queueScan) listFiles(dir string) []qfile {
	v := q.v
	var files []qfile
	sizes := map[int64]int{}
	for _, name := range v.listDir(dir, KindConsumeQueue) {
		path := filepath.Join(dir, name)
		base, ok := fsx.ParseOffsetName(name)
		if !ok {
			if !strings.HasSuffix(name, ".tmp") {
				v.addf(KindConsumeQueue, path, 0, "unexpected file in a queue directory: not a 20-digit file name")
			}
			continue
		}
		info, err := v.fsys.Stat(path)
		switch {
		case err != nil:
			v.addf(KindIO, path, 0, "cannot stat: %v", err)
			continue
		case info.IsDir:
			v.addf(KindConsumeQueue, path, 0, "a directory has a queue file's name")
			continue
		}
		files = append(files, qfile{base: base, path: path, size: info.Size})
		sizes[info.Size]++
	}
	// The queue's file size: the most common one (ties: the largest).
	var fileBytes int64
	for s, n := range sizes {
		if n > sizes[fileBytes] || (n == sizes[fileBytes] && s > fileBytes) {
			fileBytes = s
		}
	}
	v.rep.ConsumeQueues.Files += len(files)
	for i, f := range files {
		switch {
		case f.size%consumequeue.EntrySize != 0:
			v.addf(KindConsumeQueue, f.path, f.size, "file is %d bytes, not a whole number of %d-byte entries", f.size, consumequeue.EntrySize)
		case f.size != fileBytes:
			v.addf(KindConsumeQueue, f.path, f.size, "file is %d bytes, the queue's other files %d", f.size, fileBytes)
		}
		if fileBytes > 0 && f.base%fileBytes != 0 {
			v.addf(KindConsumeQueue, f.path, 0, "start offset %d is not a multiple of the file size %d", f.base, fileBytes)
		}
		if i > 0 && f.base != files[i-1].base+fileBytes {
			v.addf(KindConsumeQueue, f.path, 0, "file does not follow the previous one (%s): expected start %d, a file is missing",
				filepath.Base(files[i-1].path), files[i-1].base+fileBytes)
		}
	}
	return files
}

// scanFile checks the entries of one file, reading it in chunks.
func (q *queueScan) scanFile(f qfile) {
	v := q.v
	fh, err := v.fsys.OpenFile(f.path, os.O_RDONLY, 0)
	if err != nil {
		v.addf(KindIO, f.path, 0, "cannot open: %v", err)
		return
	}
	defer fh.Close()
	const chunk = scanChunk / consumequeue.EntrySize * consumequeue.EntrySize
	buf := make([]byte, min(chunk, f.size))
	end := f.size / consumequeue.EntrySize * consumequeue.EntrySize
	for lo := int64(0); lo < end; lo += chunk {
		b := buf[:min(chunk, end-lo)]
		if n, err := fh.ReadAt(b, lo); n < len(b) {
			v.addf(KindIO, f.path, lo+int64(n), "read failed: %v", err)
			return
		}
		for i := 0; i < len(b); i += consumequeue.EntrySize {
			fileOff := lo + int64(i)
			q.entry(f.path, fileOff, (f.base+fileOff)/consumequeue.EntrySize, b[i:i+consumequeue.EntrySize])
		}
		if v.ctx.Err() != nil {
			return
		}
	}
}

// entry checks one 20-byte entry with queue offset qo.
func (q *queueScan) entry(path string, fileOff, qo int64, b []byte) {
	e := consumequeue.DecodeEntry(b)
	switch {
	case consumequeue.IsUnusedEntry(b):
		q.state = stateTail
		return
	case q.state == stateTail:
		q.problem(path, fileOff, qo, "entry %s after the queue's unused (zero) tail", fmtEntry(e))
		return
	case e.IsPlaceholder():
		if q.state != stateLeading {
			q.problem(path, fileOff, qo, "placeholder entry after the queue's first real entry")
		}
		q.end = qo + 1
		return
	case !e.Valid():
		q.state = stateEntries
		q.problem(path, fileOff, qo, "invalid entry %s: offset must be >= 0 and size > 0", fmtEntry(e))
		return
	}
	q.state = stateEntries
	q.end = qo + 1
	q.v.rep.ConsumeQueues.Entries++
	var why []string
	if q.prevPhys >= 0 && e.Offset <= q.prevPhys {
		why = append(why, fmt.Sprintf("commit-log offset %d is not after the previous entry's %d", e.Offset, q.prevPhys))
	}
	q.prevPhys = e.Offset
	switch {
	case e.Offset < q.v.logMin:
		q.v.rep.ConsumeQueues.Expired++
	case q.v.inHole(e.Offset):
		q.v.rep.ConsumeQueues.Lost++
	default:
		why = append(why, q.checkRecord(e, qo)...)
	}
	if len(why) > 0 {
		q.problem(path, fileOff, qo, "entry %s: %s", fmtEntry(e), strings.Join(why, "; "))
	}
}

// checkRecord compares an entry with the record it points at.
func (q *queueScan) checkRecord(e consumequeue.Entry, qo int64) []string {
	v := q.v
	if e.Offset >= v.logEnd {
		return []string{fmt.Sprintf("points past the end of the log's valid data (%d)", v.logEnd)}
	}
	rec, reason, err := v.log.recordAt(e.Offset, e.Size)
	switch {
	case err != nil:
		return []string{fmt.Sprintf("cannot read the commit log: %v", err)}
	case reason != "":
		return []string{"no valid record starts there: " + reason}
	}
	if _, err := message.DecodeInto(&q.m, rec, false); err != nil {
		return []string{"the record does not decode: " + err.Error()}
	}
	m := &q.m
	var why []string
	if int32(len(rec)) != e.Size {
		why = append(why, fmt.Sprintf("size %d, the record is %d bytes", e.Size, len(rec)))
	}
	if m.Topic != q.topic {
		why = append(why, fmt.Sprintf("the record's topic is %q", m.Topic))
	}
	if m.QueueID != q.qid {
		why = append(why, fmt.Sprintf("the record's queue id is %d", m.QueueID))
	}
	if m.QueueOffset != qo {
		why = append(why, fmt.Sprintf("the record's queue offset is %d", m.QueueOffset))
	}
	if tx := m.SysFlag & message.TransactionMask; tx == message.TransactionPrepared || tx == message.TransactionRollback {
		why = append(why, "the record is a prepared or rolled-back transactional message, which is never queued")
	}
	if q.topic != scheduleTopic {
		if want := message.TagsCode(m.Tags()); want != e.TagsCode {
			why = append(why, fmt.Sprintf("tags code %d, the record's TAGS %q hash to %d", e.TagsCode, m.Tags(), want))
		}
	}
	return why
}

func (q *queueScan) problem(path string, fileOff, qo int64, format string, args ...any) {
	q.v.add(Problem{
		File: path, Offset: fileOff, FileOffset: fileOff, QueueOffset: &qo, Kind: KindConsumeQueue,
		Message: fmt.Sprintf("queue offset %d: ", qo) + fmt.Sprintf(format, args...),
	})
}

func fmtEntry(e consumequeue.Entry) string {
	return fmt.Sprintf("{offset %d, size %d, tags code %d}", e.Offset, e.Size, e.TagsCode)
}
