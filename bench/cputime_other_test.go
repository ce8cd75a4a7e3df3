//go:build !linux

package bench

import "time"

// threadCPU is unavailable off Linux; the comparison falls back to wall time.
func threadCPU() (time.Duration, bool) { return 0, false }
