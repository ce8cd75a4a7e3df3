//go:build !windows

package coordffi_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/keystore"
)

// TestBridgeWaitingRequestHoldsNoOther: a request that waits (an open
// whose server accepts and never answers its handshake) does not hold
// the requests after it: "version", sent after it, is answered first, and
// the open ends at its timeout_ms with its own error.
func TestBridgeWaitingRequestHoldsNoOther(t *testing.T) {
	dir, err := os.MkdirTemp("", "bw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() }) // held open, never answered
		}
	}()
	keyFile := filepath.Join(dir, "k.key")
	if _, err := keystore.GenerateWorkloadKey(keyFile); err != nil {
		t.Fatal(err)
	}
	wpub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	fp, wk := strings.Repeat("ab", 32), hex.EncodeToString(wpub)
	s := serve(t)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"open","params":{"timeout_ms":3000,"config":{"address":"unix:` + sock +
		`","key_file":"` + keyFile + `","authority_fingerprint":"` + fp + `","witness_public_key":"` + wk + `"}}}`)
	time.Sleep(100 * time.Millisecond) // the open is waiting on the handshake
	start := time.Now()
	s.send(`{"jsonrpc":"2.0","id":2,"method":"version"}`)
	if m := s.reply(); m["id"] != float64(2) || m["result"] == nil {
		t.Fatalf("first reply %v, want version's (id 2)", m)
	} else if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("version answered after %v: it waited for the open", d)
	}
	if m := s.reply(); m["id"] != float64(1) || m["error"] == nil {
		t.Fatalf("second reply %v, want the open's error (id 1)", m)
	}
}
