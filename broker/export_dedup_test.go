package broker

// DedupRebuild returns where the rebuild of the duplication window at Open
// started reading the log and how many records it read.
func (b *Broker) DedupRebuild() (from int64, records int) {
	return b.dedup.rebuiltFrom, b.dedup.rebuiltRecords
}
