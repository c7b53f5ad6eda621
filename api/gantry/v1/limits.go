package gantryv1

// MaxCommitOffsetsEntries is the most entries one CommitOffsetsRequest
// may carry: a broker refuses a larger request as a whole
// (INVALID_ARGUMENT), and a client splits its commits to fit. It bounds
// what one call makes the broker do, and covers the queues one consumer
// usually holds on one broker.
const MaxCommitOffsetsEntries = 1024
