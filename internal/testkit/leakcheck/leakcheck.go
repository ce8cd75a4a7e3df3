// Package leakcheck finds secret bytes in captured text (logs, errors,
// panic messages, command output) for tests: the secret as raw bytes, in
// lowercase or uppercase hex, in standard, raw, URL-safe or raw URL-safe
// base64 at any byte alignment inside a larger encoded blob, or as a run
// of decimal or 0x-hex numbers (fmt's %v, %d and %#v of a byte array or
// slice, a JSON array of numbers). Render and Leaks turn a value into
// every text fmt, slog and encoding/json make of it; SecretLookingTypes
// finds the types of a package that must be in a leak test's table.
//
// It is test support: only _test.go files import it.
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
		if strings.Contains(text, string(s)) {
			return "secret #" + itoa(i) + " as raw bytes"
		}
		for form, needle := range Forms(s) {
			if strings.Contains(text, needle) {
				return "secret #" + itoa(i) + " as " + form
			}
		}
		if containsRun(numbers(text), s) {
			return "secret #" + itoa(i) + " as a run of numbers"
		}
	}
	return ""
}

// numbers returns the numbers written in text, in order: each maximal run
// of decimal digits, or 0x/0X followed by hex digits, that does not
// continue an identifier (the 8 of "uint8" is not a number). A number
// above 255 is -1, which matches no byte.
func numbers(text string) []int {
	var out []int
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	isHex := func(c byte) bool { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }
	isIdent := func(c byte) bool { return c == '_' || isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'z') }
	for i := 0; i < len(text); {
		c := text[i]
		if !isDigit(c) || (i > 0 && isIdent(text[i-1])) {
			i++
			continue
		}
		v, j := 0, i
		if c == '0' && i+2 < len(text) && text[i+1]|0x20 == 'x' && isHex(text[i+2]) {
			j = i + 2
			for ; j < len(text) && isHex(text[j]); j++ {
				d := int(text[j]|0x20) - 'a' + 10
				if isDigit(text[j]) {
					d = int(text[j] - '0')
				}
				if v >= 0 {
					v = v*16 + d
				}
				if v > 255 {
					v = -1
				}
			}
		} else {
			for ; j < len(text) && isDigit(text[j]); j++ {
				if v >= 0 {
					v = v*10 + int(text[j]-'0')
				}
				if v > 255 {
					v = -1
				}
			}
		}
		out = append(out, v)
		i = j
	}
	return out
}

// containsRun reports whether secret's bytes appear as consecutive
// numbers of nums.
func containsRun(nums []int, secret []byte) bool {
	for i := 0; i+len(secret) <= len(nums); i++ {
		match := true
		for j, b := range secret {
			if nums[i+j] != int(b) {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// WithoutFlag is args without the flag --name and the value after it:
// for refusal tests that give the same value another way (an
// environment variable) and check it is not echoed either.
func WithoutFlag(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--"+name {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}
