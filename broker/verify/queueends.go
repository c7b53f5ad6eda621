package verify

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"github.com/gantrymq/gantry/message"
)

// logQueue is where a queue's records in the commit log end: one past the
// queue offset of its last record, and that record's log offset.
type logQueue struct {
	end, phys int64
}

// queueEnd is where a consume queue ends: one past its last entry (real
// or placeholder), and its directory.
type queueEnd struct {
	end int64
	dir string
}

// noteQueued records a valid record at log offset phys for the queue
// ends: every record but a prepared or rolled-back transactional message
// has a consume-queue entry.
func (v *verifier) noteQueued(rec []byte, phys int64) {
	if tx := message.SysFlagOf(rec) & message.TransactionMask; tx == message.TransactionPrepared || tx == message.TransactionRollback {
		return
	}
	m, err := message.NewView(rec)
	if err != nil {
		return // Check passed: cannot happen
	}
	byID := v.logQueues[string(m.Topic())]
	if byID == nil {
		if v.logQueues == nil {
			v.logQueues = map[string]map[int32]logQueue{}
		}
		byID = map[int32]logQueue{}
		v.logQueues[string(m.Topic())] = byID
	}
	if end := m.QueueOffset() + 1; end >= byID[m.QueueID()].end {
		byID[m.QueueID()] = logQueue{end: end, phys: phys}
	}
}

// inHole reports whether log offset off lies in a damaged range an
// earlier recovery skipped.
func (v *verifier) inHole(off int64) bool {
	i := sort.Search(len(v.holes), func(i int) bool { return v.holes[i][1] > off })
	return i < len(v.holes) && v.holes[i][0] <= off
}

// noteQueueEnd records where the consume queue of topic/qid in dir ends.
func (v *verifier) noteQueueEnd(topic string, qid int32, dir string, end int64) {
	if v.queueEnds == nil {
		v.queueEnds = map[string]map[int32]queueEnd{}
	}
	if v.queueEnds[topic] == nil {
		v.queueEnds[topic] = map[int32]queueEnd{}
	}
	v.queueEnds[topic][qid] = queueEnd{end: end, dir: dir}
}

// checkQueueEnds reports every consume queue that ends before the last
// record of its queue in the commit log: entries are missing (a
// dispatcher that could not keep up, stopped by a full disk, or files
// lost), and the messages they should point at cannot be read until the
// broker dispatches them again at its next start.
func (v *verifier) checkQueueEnds() {
	topics := make([]string, 0, len(v.logQueues))
	for t := range v.logQueues {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	for _, topic := range topics {
		ids := make([]int32, 0, len(v.logQueues[topic]))
		for id := range v.logQueues[topic] {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, qid := range ids {
			lq := v.logQueues[topic][qid]
			qe, ok := v.queueEnds[topic][qid]
			if !ok {
				qe.dir = filepath.Join(v.dir, queueDir, topic, strconv.Itoa(int(qid)))
			}
			if qe.end >= lq.end {
				continue
			}
			qo := qe.end
			v.add(Problem{File: qe.dir, QueueOffset: &qo, Kind: KindConsumeQueue, Message: fmt.Sprintf(
				"consume queue %s/%d ends at queue offset %d, but the commit log holds its messages up to queue offset %d "+
					"(the last at log offset %d): %d entries missing; those messages cannot be read until the broker "+
					"dispatches them again at its next start", topic, qid, qe.end, lq.end-1, lq.phys, lq.end-qe.end)})
		}
	}
}
