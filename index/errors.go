package index

import "errors"

var (
	// ErrClosed is returned by calls on a closed Store.
	ErrClosed = errors.New("index: closed")
	// ErrOutOfOrder means Put was given a phyOffset below the newest indexed
	// one: entries must arrive in non-decreasing phyOffset order.
	ErrOutOfOrder = errors.New("index: phyOffset below the indexed end")
	// ErrNegativeOffset means Put was given a negative phyOffset.
	ErrNegativeOffset = errors.New("index: negative phyOffset")
)
