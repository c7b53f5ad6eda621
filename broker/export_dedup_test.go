package broker

import (
	"testing"
	"time"
)

// DedupSettle waits until the store has indexed the records of every
// recent send and the broker has forgotten them, so that the next send of
// their keys is answered from the store's index alone.
func (b *Broker) DedupSettle(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := b.dedup.Unindexed()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker: %d recent keys not indexed after 5s", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// DedupKeys returns how many keys the broker's de-duplication table holds:
// claimed or recent, and registered by retries.
func (b *Broker) DedupKeys() (keys, retried int) { return b.dedup.Held() }
