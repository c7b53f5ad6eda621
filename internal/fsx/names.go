package fsx

import (
	"fmt"
	"strconv"
)

// OffsetName is the 20-digit zero-padded form of an offset, RocketMQ's name
// for commit-log segments and consume-queue files.
func OffsetName(off int64) string { return fmt.Sprintf("%020d", off) }

// ParseOffsetName returns the offset an OffsetName encodes.
func ParseOffsetName(name string) (int64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(name, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}
