package broker

// SweepLimits runs the limits' sweep now (it runs every few seconds).
func (b *Broker) SweepLimits() { b.limits.Sweep() }
