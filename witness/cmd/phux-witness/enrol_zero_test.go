//go:build unix

package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/witness"
)

// TestEnrolRefusesZeroFingerprint: an all-zero --fingerprint parses as
// sha256: and 64 hex digits but is no key's, so a coordinator enrolled
// under it could never activate; it is a usage error (status 2) naming
// the flag and where the right value comes from, before any connection.
func TestEnrolRefusesZeroFingerprint(t *testing.T) {
	state := filepath.Join(t.TempDir(), "w")
	if _, err := witness.Init(state); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"enrol", "--state-dir", state, "--coordinator", strings.Repeat("ab", 16),
		"--fingerprint", "sha256:" + strings.Repeat("0", 64)}, &out, &errb)
	if code != 2 || out.Len() != 0 || !strings.HasPrefix(errb.String(), "phux-witness: --fingerprint: ") ||
		!strings.Contains(errb.String(), "phux-coordd init") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 naming --fingerprint", code, out.String(), errb.String())
	}
}
