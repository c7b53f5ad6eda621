package commitlog

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
)

// Holes returns the damaged ranges recovery skipped with SkipCorrupt (at
// this Open or an earlier one) that the log may still hold, in log order.
// A record that lay there is lost; an index of the log (a consume queue)
// may still point into the range. They are read from the copies recovery
// keeps in StateDir/corrupt/, one a range, named <from>-<to>.bin.
func (l *Log) Holes() []Span { return l.holes }

// InHole reports whether log offset off lies in a range Holes returns.
func (l *Log) InHole(off int64) bool {
	_, ok := l.HoleAt(off)
	return ok
}

// HoleAt returns the skipped range holding log offset off, if any.
func (l *Log) HoleAt(off int64) (Span, bool) {
	i := sort.Search(len(l.holes), func(i int) bool { return l.holes[i].End > off })
	if i < len(l.holes) && l.holes[i].Off <= off {
		return l.holes[i], true
	}
	return Span{}, false
}

// loadHoles lists the damaged ranges saved under StateDir/corrupt/.
func (l *Log) loadHoles() {
	names, err := l.fs.ReadDir(filepath.Join(l.cfg.StateDir, "corrupt"))
	if err != nil {
		return // none
	}
	var holes []Span
	for _, name := range names {
		var h Span
		if n, err := fmt.Sscanf(name, "%020d-%020d.bin", &h.Off, &h.End); err == nil && n == 2 && h.End > h.Off {
			holes = append(holes, h)
		}
	}
	slices.SortFunc(holes, func(a, b Span) int { return cmp.Compare(a.Off, b.Off) })
	l.holes = holes
}
