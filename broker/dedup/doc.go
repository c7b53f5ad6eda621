// Package dedup answers a repeated user send with its original's result
// instead of storing it again: a send whose message key (its
// IDEMPOTENCY_KEY, else its UNIQ_KEY) was stored for the topic within the
// duplication window is a duplicate (docs/BROKER.md, "De-duplication of
// sends").
//
// It owns the Table: the claims of the sends in flight, the keys of the
// sends landed but not yet indexed by the store, and the keys retries
// registered (firstattempt.go). The memory of older keys is the store's
// key index, which the table reads through Store; the package writes no
// file of its own, and nothing is rebuilt at Open (the store has indexed
// every record before the broker takes a send).
//
// Send runs one send through the table; the broker calls it from Send and
// SendRecords with a put function that stores the messages of the send
// that are no duplicates (Flight.Stored).
//
// # Concurrency
//
// A Table's methods and Send are safe for concurrent use and start no
// goroutine. Its mutex is a leaf: it is never held while the store is
// called or while a send waits (for another send of the same key, for
// first attempts to land, for the dispatcher).
package dedup
