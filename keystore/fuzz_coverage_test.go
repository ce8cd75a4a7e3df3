//go:build unix

package keystore

import (
	"errors"
	"testing"
)

// TestFuzzSeedsReachEveryRegistryCheck: the seed corpus of
// FuzzParseRegistry holds accepted files (so mutation starts inside a
// valid registry) and a refusal by every check of the parser: each
// RegistryError field and each sentinel.
func TestFuzzSeedsReachEveryRegistryCheck(t *testing.T) {
	accepted := 0
	fields := map[string]bool{}
	sentinels := map[error]bool{}
	all := []error{ErrMalformedRegistry, ErrDuplicateKey, ErrKeyIDMismatch, ErrInvalidScope, ErrInvalidPublicKey}
	for _, s := range registrySeeds(t) {
		re := checkRegistryInput(t, s.build())
		if re == nil {
			accepted++
			continue
		}
		fields[re.Field] = true
		for _, e := range all {
			if errors.Is(re, e) {
				sentinels[e] = true
			}
		}
	}
	if accepted < 2 {
		t.Errorf("only %d accepted seeds", accepted)
	}
	for _, f := range []string{"header", "record", "key_id", "public_key", "ceiling", "expires", "revoked"} {
		if !fields[f] {
			t.Errorf("no seed is refused at field %q", f)
		}
	}
	for _, e := range all {
		if !sentinels[e] {
			t.Errorf("no seed is refused with %v", e)
		}
	}
}
