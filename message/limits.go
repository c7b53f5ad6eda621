package message

// Size limits. The broker and the client size every limit on messages,
// requests and responses from MaxBodyBytes, so that whatever a broker
// accepts, every client can read back (docs/BROKER.md, "Size limits").
const (
	// MaxBodyBytes is the largest message body: RocketMQ's default
	// maxMessageSize, 4 MiB. A broker's maxMessageSize may be lower,
	// never higher.
	MaxBodyBytes = 4 << 20

	// MaxRecordOverhead is the most a record takes besides its body: the
	// fixed fields with two IPv6 hosts, the longest topic and the most
	// properties the layout carries (33,009 bytes).
	MaxRecordOverhead = MinRecordSize + 2*hostV6Extra + MaxTopicLen + MaxPropertiesLen

	// MaxRecordBytes is the largest record: a body of MaxBodyBytes with
	// the most overhead (4,227,313 bytes).
	MaxRecordBytes = MaxBodyBytes + MaxRecordOverhead

	// MaxBatchBytes bounds the records of one send request in total (a
	// batch, or a producer's concurrent sends coalesced into one request):
	// one largest record, as RocketMQ bounds a batch by maxMessageSize in
	// total. A broker with a lower maxMessageSize bounds a request by
	// BatchLimit of it.
	MaxBatchBytes = MaxRecordBytes

	// MaxEnvelopeBytes is the largest gRPC message a broker or a client
	// reads: a send request or a pull response carries at most
	// MaxRecordBytes of records, plus 64 KiB for its other fields
	// (4,292,849 bytes).
	MaxEnvelopeBytes = MaxRecordBytes + 64<<10
)

// BatchLimit is the most bytes of records one send request may carry on a
// broker whose largest body is maxBody: a record of that body with the
// most overhead.
func BatchLimit(maxBody int) int { return maxBody + MaxRecordOverhead }
