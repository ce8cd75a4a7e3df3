package leakcheck

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
)

// MinSecretDraw is the shortest secret Secret mints.
const MinSecretDraw = 16

// Secret returns n random bytes from crypto/rand (n at least
// MinSecretDraw), shaped so that where a test puts one of its spellings
// cannot change which path the test takes: the hex spelling and the
// unpadded base64 spellings (standard and URL-safe alphabets) consist of
// ASCII letters and digits only and begin with a letter. So no spelling
// is read as a flag (a leading '-'), as a number, as a flag's "=value",
// as several words or path elements ('/', whitespace, NUL), nor changes
// between the two base64 alphabets ('+', '/', '-', '_'). A test that puts
// a padded base64 spelling somewhere must allow for its '=' (none when n
// is a multiple of 3).
//
// The shape is drawn by rejection (about one draw in twenty is kept), so
// about 4 bits of the 8n are spent on it: the secret stays unguessable,
// and a test that finds it in an output has found a leak, not a chance
// match.
func Secret(n int) []byte {
	if n < MinSecretDraw {
		panic("leakcheck: Secret shorter than MinSecretDraw")
	}
	b := make([]byte, n)
	for {
		_, _ = rand.Read(b) // crypto/rand.Read never returns an error (Go 1.24+)
		if shaped(b) {
			return b
		}
	}
}

// shaped reports whether every spelling of b Secret promises is letters
// and digits beginning with a letter.
func shaped(b []byte) bool {
	return len(b) > 0 && alnumFromLetter(hex.EncodeToString(b)) && alnumFromLetter(base64.RawStdEncoding.EncodeToString(b)) &&
		alnumFromLetter(base64.RawURLEncoding.EncodeToString(b))
}

func alnumFromLetter(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}
