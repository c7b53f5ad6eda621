package message

// SetStateForTest sets the state of g's last id: Unix ms and counter.
func (g *UniqIDGenerator) SetStateForTest(ms int64, counter uint16) {
	g.state.Store(uint64(ms)<<16 | uint64(counter))
}
