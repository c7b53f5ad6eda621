package remotingapi

import (
	"fmt"
	"strconv"

	"github.com/gantrymq/gantry/remoting"
)

// extReader reads a request's ext fields, keeping the first problem: a
// required field missing or a number that does not parse. Java answers a
// header it cannot decode with an error naming the field; so do we
// (INVALID_PARAMETER).
type extReader struct {
	req *remoting.Command
	err error
}

func (r *extReader) fail(key, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s: ext field %s %s", errBadHeader, r.req.RequestCode(), key, fmt.Sprintf(format, args...))
	}
}

// str returns a field; a required one must be present and not empty.
func (r *extReader) str(key string, required bool) string {
	v, ok := r.req.ExtFields[key]
	if required && (!ok || v == "") {
		r.fail(key, "is required")
	}
	return v
}

// int64 returns a numeric field, or def when it is absent or empty.
func (r *extReader) int64(key string, def int64) int64 {
	return r.number(key, def, 64)
}

// int32 returns a numeric field, or def when it is absent or empty.
func (r *extReader) int32(key string, def int32) int32 {
	return int32(r.number(key, int64(def), 32))
}

// required returns a numeric field that must be present.
func (r *extReader) required(key string, bits int) int64 {
	if r.req.Ext(key) == "" {
		r.fail(key, "is required")
		return 0
	}
	return r.number(key, 0, bits)
}

func (r *extReader) number(key string, def int64, bits int) int64 {
	v := r.req.Ext(key)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		r.fail(key, "%q is not an int%d", v, bits)
		return def
	}
	return n
}

// bool returns a boolean field, false when absent; Java's Boolean.parseBool
// reads anything but "true" (any case) as false.
func (r *extReader) bool(key string) bool {
	v, err := strconv.ParseBool(r.req.Ext(key))
	return err == nil && v
}
