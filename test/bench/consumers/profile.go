package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// cpuProfile is the part of a pprof CPU profile (profile.proto) this tool
// reads: each sample's stack, leaf first, as function names, and its CPU
// nanoseconds.
type cpuProfile struct {
	samples []cpuSample
	total   int64 // ns
}

type cpuSample struct {
	stack []string // leaf first
	ns    int64
}

// gcClass names the part of the garbage collector a function is, or "".
// A sample counts for the first function from the root of its stack that
// has a class: a mark assist runs under mallocgc, so mallocgc itself is
// not a class (allocating is not collecting), gcAssistAlloc under it is.
func gcClass(fn string) string {
	switch {
	case fn == "runtime.gcBgMarkWorker":
		return "mark (background workers)"
	case strings.HasPrefix(fn, "runtime.gcAssistAlloc"):
		return "mark assists"
	case fn == "runtime.bgsweep", fn == "runtime.sweepone", fn == "runtime.(*sweepLocked).sweep", fn == "runtime.(*mheap).reclaim":
		return "sweep"
	case fn == "runtime.bgscavenge", fn == "runtime.(*pageAlloc).scavenge":
		return "scavenge"
	case fn == "runtime.wbBufFlush", fn == "runtime.wbBufFlush1":
		return "write barrier buffers"
	case fn == "runtime.gcStart", fn == "runtime.gcMarkDone", fn == "runtime.gcMarkTermination",
		fn == "runtime.gcStopTheWorldWithSema", fn == "runtime.stopTheWorldWithSema", fn == "runtime.forEachP",
		fn == "runtime.gcDrain", fn == "runtime.markroot", fn == "runtime.scanobject", fn == "runtime.greyobject":
		return "cycle start/end, other marking"
	}
	return ""
}

// gcShare splits the profile's CPU time by gcClass; the "" entry is
// everything else.
func (p *cpuProfile) gcShare() map[string]int64 {
	out := map[string]int64{}
	for _, s := range p.samples {
		class := ""
		for i := len(s.stack) - 1; i >= 0 && class == ""; i-- {
			class = gcClass(s.stack[i])
		}
		out[class] += s.ns
	}
	return out
}

// top returns the n functions with the most flat CPU time, with their ns.
func (p *cpuProfile) top(n int) []string {
	flat := map[string]int64{}
	for _, s := range p.samples {
		if len(s.stack) > 0 {
			flat[s.stack[0]] += s.ns
		}
	}
	names := make([]string, 0, len(flat))
	for k := range flat {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return flat[names[i]] > flat[names[j]] })
	var out []string
	for _, k := range names[:min(n, len(names))] {
		out = append(out, fmt.Sprintf("%5.1f %%  %s", 100*float64(flat[k])/float64(max(p.total, 1)), k))
	}
	return out
}

// parseCPUProfile decodes a gzipped profile.proto CPU profile with
// protowire (no pprof library in this module's requirements).
func parseCPUProfile(gz []byte) (*cpuProfile, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	type rawSample struct{ locs, vals []uint64 }
	var (
		strs      []string
		types     []uint64 // sample_type's type string index
		raw       []rawSample
		locFuncs  = map[uint64][]uint64{} // location id -> function ids, leaf (innermost inline) first
		funcNames = map[uint64]uint64{}   // function id -> name string index
	)
	err = fields(b, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error {
		switch num {
		case 1: // sample_type
			return fields(v, func(n protowire.Number, _ protowire.Type, _ []byte, u uint64) error {
				if n == 1 {
					types = append(types, u)
				}
				return nil
			})
		case 2: // sample
			var s rawSample
			err := fields(v, func(n protowire.Number, t protowire.Type, v []byte, u uint64) error {
				switch n {
				case 1:
					s.locs = appendVarints(s.locs, t, v, u)
				case 2:
					s.vals = appendVarints(s.vals, t, v, u)
				}
				return nil
			})
			raw = append(raw, s)
			return err
		case 4: // location
			var id uint64
			var fns []uint64
			err := fields(v, func(n protowire.Number, _ protowire.Type, v []byte, u uint64) error {
				switch n {
				case 1:
					id = u
				case 4: // line
					return fields(v, func(n protowire.Number, _ protowire.Type, _ []byte, u uint64) error {
						if n == 1 {
							fns = append(fns, u)
						}
						return nil
					})
				}
				return nil
			})
			locFuncs[id] = fns
			return err
		case 5: // function
			var id, name uint64
			err := fields(v, func(n protowire.Number, _ protowire.Type, _ []byte, u uint64) error {
				switch n {
				case 1:
					id = u
				case 2:
					name = u
				}
				return nil
			})
			funcNames[id] = name
			return err
		case 6: // string_table
			strs = append(strs, string(v))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	cpu := -1
	for i, t := range types {
		if t < uint64(len(strs)) && strs[t] == "cpu" {
			cpu = i
		}
	}
	if cpu < 0 {
		return nil, errors.New("profile: no cpu sample type")
	}
	p := &cpuProfile{}
	for _, s := range raw {
		if cpu >= len(s.vals) {
			continue
		}
		cs := cpuSample{ns: int64(s.vals[cpu])}
		for _, l := range s.locs {
			for _, f := range locFuncs[l] {
				if n := funcNames[f]; n < uint64(len(strs)) {
					cs.stack = append(cs.stack, strs[n])
				}
			}
		}
		p.samples = append(p.samples, cs)
		p.total += cs.ns
	}
	return p, nil
}

// fields calls f for each field of the message b: v for length-delimited
// fields, u for varints.
func fields(b []byte, f func(protowire.Number, protowire.Type, []byte, uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("profile: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		var u uint64
		switch typ {
		case protowire.VarintType:
			u, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("profile: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, typ, v, u); err != nil {
			return err
		}
	}
	return nil
}

// appendVarints appends a repeated varint field, packed or not.
func appendVarints(dst []uint64, typ protowire.Type, v []byte, u uint64) []uint64 {
	if typ == protowire.VarintType {
		return append(dst, u)
	}
	for len(v) > 0 {
		x, n := protowire.ConsumeVarint(v)
		if n < 0 {
			return dst
		}
		dst = append(dst, x)
		v = v[n:]
	}
	return dst
}
