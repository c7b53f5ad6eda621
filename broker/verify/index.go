package verify

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gantrymq/gantry/index"
	"github.com/gantrymq/gantry/message"
)

const indexDir = "index"

// errStop ends an index scan early when ctx is done.
var errStop = errors.New("verify: stopped")

// checkIndex checks every index file, oldest first.
func (v *verifier) checkIndex() {
	dir := filepath.Join(v.dir, indexDir)
	prevEnd, prevPath := int64(-1), ""
	for _, name := range v.listDir(dir, KindIndex) {
		path := filepath.Join(dir, name)
		if !index.IsFileName(name) {
			v.addf(KindIndex, path, 0, "unexpected file in the index directory: not a yyyyMMddHHmmssSSS name")
			continue
		}
		if v.ctx.Err() != nil {
			return
		}
		v.progress("index: %s", path)
		v.rep.Index.Files++
		h, err := index.ScanFile(v.fsys, path, nil, nil) // the header first: the slot check needs indexCount
		if err != nil {
			v.indexFileErr(path, err)
			continue
		}
		if h.Count > 1 {
			if prevEnd >= 0 && h.BeginPhyOffset < prevEnd {
				v.addf(KindIndex, path, offBeginPhy, "beginPhyOffset %d is below the endPhyOffset %d of the previous file %s",
					h.BeginPhyOffset, prevEnd, filepath.Base(prevPath))
			}
			prevEnd, prevPath = h.EndPhyOffset, path
		}
		x := &indexScan{v: v, path: path, h: h, prevPhy: -1, cacheOff: -1}
		if _, err := index.ScanFile(v.fsys, path, x.slot, x.entry); err != nil {
			if errors.Is(err, errStop) {
				return
			}
			v.indexFileErr(path, err)
			continue
		}
		if h.Count > 1 && x.prevPhy != h.EndPhyOffset {
			v.addf(KindIndex, path, offEndPhy, "endPhyOffset %d differs from the last entry's phyOffset %d", h.EndPhyOffset, x.prevPhy)
		}
	}
}

// Byte offsets of header fields (index/file.go).
const (
	offBeginPhy = 16
	offEndPhy   = 24
)

func (v *verifier) indexFileErr(path string, err error) {
	if errors.Is(err, index.ErrBadHeader) {
		v.addf(KindIndex, path, 0, "%v", err)
	} else {
		v.addf(KindIO, path, 0, "%v", err)
	}
}

// indexScan checks the slots and entries of one index file.
type indexScan struct {
	v       *verifier
	path    string
	h       index.ScanHeader
	n       int
	prevPhy int64 // phyOffset of the previous entry, -1 before the first

	// The keys of the record last looked up: consecutive entries usually
	// share a record (each of its KEYS and its UNIQ_KEY).
	cacheOff    int64
	cacheHashes []int32
	cacheDesc   string
	cacheReason string
	m           message.Message
}

func (x *indexScan) slot(s index.ScanSlot) error {
	if s.Value < 0 || s.Value >= x.h.Count {
		x.v.addf(KindIndex, x.path, s.FileOffset, "hash slot %d holds entry number %d, outside 1..%d (indexCount %d)",
			s.Slot, s.Value, x.h.Count-1, x.h.Count)
	}
	return x.tick()
}

func (x *indexScan) tick() error {
	x.n++
	if x.n%4096 == 0 && x.v.ctx.Err() != nil {
		return errStop
	}
	return nil
}

func (x *indexScan) entry(e index.ScanEntry) error {
	v, h := x.v, x.h
	v.rep.Index.Entries++
	var why []string
	if e.PrevIndex < 0 || e.PrevIndex >= e.Number {
		why = append(why, fmt.Sprintf("prevIndex %d is not below the entry's own number", e.PrevIndex))
	}
	if e.KeyHash < 0 {
		why = append(why, fmt.Sprintf("keyHash %d is negative", e.KeyHash))
	}
	if e.PhyOffset < h.BeginPhyOffset || e.PhyOffset > h.EndPhyOffset {
		why = append(why, fmt.Sprintf("phyOffset %d is outside the header's range [%d, %d]", e.PhyOffset, h.BeginPhyOffset, h.EndPhyOffset))
	}
	if e.PhyOffset < x.prevPhy {
		why = append(why, fmt.Sprintf("phyOffset %d is below the previous entry's %d", e.PhyOffset, x.prevPhy))
	}
	if t := h.BeginTimestamp + int64(e.TimeDiff)*1000; e.TimeDiff < 0 || t > h.EndTimestamp {
		why = append(why, fmt.Sprintf("timeDiff %d s puts it outside the header's time range", e.TimeDiff))
	}
	x.prevPhy = e.PhyOffset
	switch {
	case e.PhyOffset < v.logMin:
		v.rep.Index.Expired++
	case v.inHole(e.PhyOffset):
		v.rep.Index.Lost++
	default:
		if r := x.checkRecord(e); r != "" {
			why = append(why, r)
		}
	}
	if len(why) > 0 {
		v.addf(KindIndex, x.path, e.FileOffset, "entry %d (keyHash %d, phyOffset %d): %s", e.Number, e.KeyHash, e.PhyOffset, strings.Join(why, "; "))
	}
	return x.tick()
}

// checkRecord returns why e does not index the record at its phyOffset, or "".
func (x *indexScan) checkRecord(e index.ScanEntry) string {
	v := x.v
	if e.PhyOffset >= v.logEnd {
		return fmt.Sprintf("points past the end of the log's valid data (%d)", v.logEnd)
	}
	if e.PhyOffset != x.cacheOff {
		x.lookup(e.PhyOffset)
	}
	switch {
	case x.cacheReason != "":
		return x.cacheReason
	case !slices.Contains(x.cacheHashes, e.KeyHash):
		return "the hash matches none of the record's keys (" + x.cacheDesc + ")"
	}
	return ""
}

// lookup reads the record at off and caches the hashes of its index keys.
func (x *indexScan) lookup(off int64) {
	x.cacheOff, x.cacheHashes, x.cacheDesc, x.cacheReason = off, x.cacheHashes[:0], "", ""
	rec, reason, err := x.v.log.recordAt(off, 0)
	switch {
	case err != nil:
		x.cacheReason = fmt.Sprintf("cannot read the commit log: %v", err)
		return
	case reason != "":
		x.cacheReason = "no valid record starts there: " + reason
		return
	}
	if _, err := message.DecodeInto(&x.m, rec, false); err != nil {
		x.cacheReason = "the record does not decode: " + err.Error()
		return
	}
	m := &x.m
	keys := m.Keys()
	uniq := m.UniqKey()
	idem, _ := m.Properties.Get(message.PropIdempotencyKey)
	for _, k := range []string{uniq, idem} {
		if k != "" {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		x.cacheHashes = append(x.cacheHashes, index.KeyHash(m.Topic+"#"+k))
	}
	desc := fmt.Sprintf("topic %q, keys %q", m.Topic, keys)
	// A parked record is also indexed under the topic it is parked for, by
	// its de-duplication key (IDEMPOTENCY_KEY, else UNIQ_KEY).
	if real, ok := m.Properties.Get(message.PropRealTopic); ok && real != m.Topic {
		var also []string
		for _, k := range []string{idem, uniq} {
			if k != "" {
				x.cacheHashes = append(x.cacheHashes, index.KeyHash(real+"#"+k))
				also = append(also, k)
			}
		}
		desc += fmt.Sprintf(", and under %q: %q", real, also)
	}
	if len(desc) > 200 {
		desc = desc[:200] + "..."
	}
	x.cacheDesc = desc
}
