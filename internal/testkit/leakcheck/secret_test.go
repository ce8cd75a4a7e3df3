package leakcheck

import (
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
)

// Every spelling of a minted secret is letters and digits, beginning
// with a letter; padded base64 differs only by its '=' padding; no two
// secrets are alike.
func TestSecretSpellingsCannotChangeAPath(t *testing.T) {
	word := regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)
	seen := map[string]bool{}
	for _, n := range []int{MinSecretDraw, 31, 32, 33, 64} {
		for range 500 {
			s := Secret(n)
			if len(s) != n {
				t.Fatalf("Secret(%d) has %d bytes", n, len(s))
			}
			if seen[string(s)] {
				t.Fatalf("Secret(%d) repeated a value", n)
			}
			seen[string(s)] = true
			for _, sp := range []string{hex.EncodeToString(s), strings.ToUpper(hex.EncodeToString(s)),
				base64.RawStdEncoding.EncodeToString(s), base64.RawURLEncoding.EncodeToString(s),
				strings.TrimRight(base64.StdEncoding.EncodeToString(s), "="), strings.TrimRight(base64.URLEncoding.EncodeToString(s), "=")} {
				if !word.MatchString(sp) {
					t.Fatalf("Secret(%d) spelled %q", n, sp)
				}
			}
		}
	}
}

// The shape test refuses each spelling that could change a path: a
// leading '-', '+', '/' or '_' in base64, a leading digit in hex or
// base64, and '+', '/', '-' or '_' anywhere in base64.
func TestSecretShapeRefusals(t *testing.T) {
	good := make([]byte, 32)
	for i := range good {
		good[i] = 0xa5 // hex "a5…", base64 "paWl…"
	}
	if !shaped(good) {
		t.Fatalf("a letters-and-digits value refused: %x", good)
	}
	for name, edit := range map[string]func(b []byte){
		"base64 begins with '+' or '-'": func(b []byte) { b[0] = 0xf8 },
		"base64 begins with '/' or '_'": func(b []byte) { b[0] = 0xfc },
		"base64 begins with a digit":    func(b []byte) { b[0] = 0xd0 },
		"hex begins with a digit":       func(b []byte) { b[0] = 0x95 },
		"base64 holds '+' or '-'":       func(b []byte) { b[3] = 0xf8 },
		"base64 holds '/' or '_'":       func(b []byte) { b[4], b[5] = b[4]|0x0f, b[5]|0xc0 },
		"empty":                         func(b []byte) {},
	} {
		b := append([]byte(nil), good...)
		edit(b)
		if name == "empty" {
			b = nil
		}
		if shaped(b) {
			t.Errorf("%s: %x accepted", name, b)
		}
	}
}

// Secret refuses to mint a value short enough to be matched by chance.
func TestSecretTooShortPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Secret(MinSecretDraw-1) did not panic")
		}
	}()
	Secret(MinSecretDraw - 1)
}
