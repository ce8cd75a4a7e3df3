//go:build unix

package keystore

import "time"

// SetKeyFDTimeout shortens LoadWorkloadKeyFD's pipe deadline for a test
// and returns the function that restores it.
func SetKeyFDTimeout(d time.Duration) (restore func()) {
	old := keyFDTimeout
	keyFDTimeout = d
	return func() { keyFDTimeout = old }
}
