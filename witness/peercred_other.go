//go:build unix && !linux && !darwin && !freebsd

package witness

// peerUID is unknown on this platform: the admin socket refuses every
// peer (the operator must use a platform with peer credentials).
func peerUID(fd int) int { return -1 }
