package coordclient

// LastStagedBytes is what staging the Mirror's last snapshot held beyond
// the published state, as charged against MaxStagedBytes.
func LastStagedBytes(m *Mirror) int64 { return m.lastStaged.Load() }

// QueueState is a subscription's queued events, the events consumed since
// its last credit refill, and the credit (count, bytes) the server may
// still use by the client's account.
func QueueState(s *Subscription) (queued int, sinceRefill, creditCount, creditBytes uint64) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.st.n, s.usedCount, s.st.balCount, s.st.balBytes
}
