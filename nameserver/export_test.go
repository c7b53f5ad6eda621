package nameserver

// Expire runs one expiry scan at the registry's clock and returns how many
// brokers it dropped.
func (r *Registry) Expire() int { return r.expire(r.cfg.Now()) }
