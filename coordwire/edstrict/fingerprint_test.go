package edstrict_test

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordwire/edstrict"
)

func TestFingerprintRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var fp [32]byte
		copy(fp[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "fp"))
		s := edstrict.FormatFingerprint(fp)
		if len(s) != 71 || !strings.HasPrefix(s, "sha256:") || strings.ToLower(s) != s {
			t.Fatalf("bad form %q", s)
		}
		got, err := edstrict.ParseFingerprint(s)
		if err != nil || got != fp {
			t.Fatalf("round trip: %x %v", got, err)
		}
	})
}

func TestParseFingerprintStrict(t *testing.T) {
	good := "sha256:" + strings.Repeat("0a", 32)
	if _, err := edstrict.ParseFingerprint(good); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		"",
		strings.Repeat("0a", 32),
		"SHA256:" + strings.Repeat("0a", 32),
		"sha256:" + strings.Repeat("0A", 32),
		"sha256:" + strings.Repeat("0a", 31),
		"sha256:" + strings.Repeat("0a", 32) + "0",
		"sha256:" + strings.Repeat("0a", 32) + "\n",
		" " + good,
		good + " ",
		"sha256: " + strings.Repeat("0a", 32)[1:],
		"sha256:" + strings.Repeat("0g", 32),
		"sha512:" + strings.Repeat("0a", 32),
		"sha256:" + strings.Repeat("0a", 31) + "+a",
	} {
		if _, err := edstrict.ParseFingerprint(bad); !errors.Is(err, edstrict.ErrMalformedFingerprint) {
			t.Errorf("ParseFingerprint(%q): err = %v, want ErrMalformedFingerprint", bad, err)
		}
		if _, err := edstrict.ParseFingerprint(bad); edstrict.Reason(err) != "malformed_fingerprint" {
			t.Errorf("ParseFingerprint(%q): reason %q", bad, edstrict.Reason(err))
		}
	}
}
