package broker

import "time"

// SweepDLQ runs the dead-letter sweep now.
func (b *Broker) SweepDLQ() { b.delivery.SweepDLQ() }

// DLQKeepFrom returns the log offset the broker pins for its dead letters.
func (b *Broker) DLQKeepFrom() int64 { return b.dlqKeepFrom() }

// WithDLQSweepInterval returns c with the dead-letter sweep's period set.
func (c Config) WithDLQSweepInterval(d time.Duration) Config { c.dlqSweepInterval = d; return c }
