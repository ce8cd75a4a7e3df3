// Package leakcheck finds secret bytes in captured text (logs, errors,
// panic messages, command output) for tests: the secret in lowercase or
// uppercase hex, or in standard, raw, URL-safe or raw URL-safe base64 at
// any byte alignment inside a larger encoded blob.
package leakcheck

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// MinSecretLen is the shortest secret Find looks for; shorter ones would
// match by chance.
const MinSecretLen = 8

// Forms returns the encodings of secret that Find searches for, each
// labelled ("hex", "HEX", "base64/std@0", …). For base64 it returns, for
// each of the three alignments the secret can have inside a larger encoded
// blob, the run of characters determined by the secret's bytes alone.
func Forms(secret []byte) map[string]string {
	out := map[string]string{
		"hex": hex.EncodeToString(secret),
		"HEX": strings.ToUpper(hex.EncodeToString(secret)),
	}
	encs := []struct {
		name string
		enc  *base64.Encoding
	}{
		{"base64/std", base64.StdEncoding},
		{"base64/raw", base64.RawStdEncoding},
		{"base64/url", base64.URLEncoding},
		{"base64/rawurl", base64.RawURLEncoding},
	}
	for _, e := range encs {
		// The whole secret as encoded on its own (with padding if any).
		out[e.name] = e.enc.EncodeToString(secret)
		// Inside a blob, the secret starts at offset 0, 1 or 2 of a 3-byte
		// group; skip to the next group boundary and take whole groups.
		for skip := 0; skip < 3; skip++ {
			rest := secret[skip:]
			rest = rest[:len(rest)/3*3]
			if len(rest) < 6 {
				continue
			}
			out[e.name+"@"+string(rune('0'+skip))] = base64.RawStdEncoding.EncodeToString(rest)
			if e.enc == base64.URLEncoding || e.enc == base64.RawURLEncoding {
				out[e.name+"@"+string(rune('0'+skip))] = base64.RawURLEncoding.EncodeToString(rest)
			}
		}
	}
	return out
}

// Find reports the first form in which any of secrets appears in text, as
// "secret #i as <form>", or "" if none does. Secrets shorter than
// MinSecretLen are ignored.
func Find(text string, secrets ...[]byte) string {
	for i, s := range secrets {
		if len(s) < MinSecretLen {
			continue
		}
		for form, needle := range Forms(s) {
			if strings.Contains(text, needle) {
				return "secret #" + itoa(i) + " as " + form
			}
		}
	}
	return ""
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
