package broker

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gantrymq/gantry/broker/store"
	"github.com/gantrymq/gantry/message"
)

// Filter is a parsed tag subscription expression: everything ("" or "*")
// or a set of tags ("TagA || TagB"). The zero Filter matches everything.
type Filter struct {
	tags  []string // nil: everything
	codes []int64  // message.TagsCode of each tag
}

// ParseFilter parses a subscription expression: "" or "*" for every
// message, or tags separated by "||" with spaces around them ignored. An
// empty tag ("A ||"), a "*" among tags, or a tag containing '|' or
// whitespace is an error wrapping ErrInvalidArgument.
func ParseFilter(expr string) (Filter, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "*" {
		return Filter{}, nil
	}
	var f Filter
	for part := range strings.SplitSeq(expr, "||") {
		tag := strings.TrimSpace(part)
		if err := checkTag(tag); err != nil {
			return Filter{}, fmt.Errorf("%w: subscription expression %q: %w", ErrInvalidArgument, expr, err)
		}
		if !slices.Contains(f.tags, tag) {
			f.tags = append(f.tags, tag)
			f.codes = append(f.codes, message.TagsCode(tag))
		}
	}
	return f, nil
}

func checkTag(tag string) error {
	switch {
	case tag == "":
		return errors.New("empty tag (want TagA || TagB)")
	case tag == "*":
		return errors.New(`"*" must be the whole expression`)
	case strings.ContainsAny(tag, "| \t\r\n"):
		return fmt.Errorf("tag %q contains '|' or whitespace", tag)
	}
	return nil
}

// MatchesAll reports whether f accepts every message.
func (f Filter) MatchesAll() bool { return f.tags == nil }

// Tags returns the tags f accepts, nil when it accepts everything.
func (f Filter) Tags() []string { return slices.Clone(f.tags) }

// Match reports whether a message with tag passes f.
func (f Filter) Match(tag string) bool { return f.tags == nil || slices.Contains(f.tags, tag) }

// storeFilter is the consume-queue prefilter: tags codes of f's tags. Tags
// sharing a code pass it; matchRecord tells them apart.
func (f Filter) storeFilter() store.Filter {
	if f.tags == nil {
		return nil
	}
	return func(code int64) bool { return slices.Contains(f.codes, code) }
}

// matchRecord reports whether an encoded record's TAGS passes f.
func (f Filter) matchRecord(rec []byte) bool {
	if f.tags == nil {
		return true
	}
	v, err := message.NewView(rec)
	if err != nil {
		return false
	}
	tag, _ := v.Property(message.PropTags)
	for _, t := range f.tags {
		if string(tag) == t {
			return true
		}
	}
	return false
}
