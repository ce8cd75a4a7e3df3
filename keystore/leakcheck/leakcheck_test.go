package leakcheck_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/keystore/leakcheck"
)

func TestFindsEveryEncodingAtEveryAlignment(t *testing.T) {
	secret := []byte("0123456789abcdefghijklmnopqrstuv")
	for pre := 0; pre < 6; pre++ {
		blob := append(bytes.Repeat([]byte{0xff}, pre), secret...)
		blob = append(blob, 0xee, 0xdd)
		for name, text := range map[string]string{
			"hex":    hex.EncodeToString(blob),
			"HEX":    strings.ToUpper(hex.EncodeToString(blob)),
			"std":    base64.StdEncoding.EncodeToString(blob),
			"raw":    base64.RawStdEncoding.EncodeToString(blob),
			"url":    base64.URLEncoding.EncodeToString(blob),
			"rawurl": base64.RawURLEncoding.EncodeToString(blob),
		} {
			if leakcheck.Find("x "+text+" y", secret) == "" {
				t.Errorf("prefix %d, %s: not found", pre, name)
			}
		}
	}
	if f := leakcheck.Find("nothing here", secret); f != "" {
		t.Errorf("false positive: %s", f)
	}
}

func ExampleFind() {
	secret := []byte("a very secret 32-byte seed value")
	log := "error: key " + base64.StdEncoding.EncodeToString(secret) + " refused"
	fmt.Println(leakcheck.Find(log, secret) != "")
	fmt.Println(leakcheck.Find("error: key refused", secret) != "")
	// Output:
	// true
	// false
}
