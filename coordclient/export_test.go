package coordclient

// LastStagedBytes is what staging the Mirror's last snapshot held beyond
// the published state, as charged against MaxStagedBytes.
func LastStagedBytes(m *Mirror) int64 { return m.lastStaged.Load() }
