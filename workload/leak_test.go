package workload_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
)

// TestMain runs every test, then checks the secret-leak property over
// everything the tests captured: every error string (in %v, %+v, %#v and
// %s), every log line of the test drivers' slog logger (which logs each
// refusal with the handshake value), every COORD_ERROR message sent and
// every panic message. None may contain a private seed, a client or
// server nonce, or a proof, in lowercase or uppercase hex or in standard,
// raw, URL-safe or raw URL-safe base64 at any alignment.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if msg := leakCheck(); msg != "" {
			fmt.Fprintln(os.Stderr, "FAIL: secret leak check:", msg)
			code = 1
		}
	}
	os.Exit(code)
}

func leakCheck() string {
	capture.Lock()
	defer capture.Unlock()
	text := capture.text.String()
	if len(capture.secrets) < 20 || !strings.Contains(text, coordwire.AuthenticationFailed.String()) {
		// Guard against a vacuous pass (a filtered run, -run X, is fine).
		return ""
	}
	if where := leakcheck.Find(text, capture.secrets...); where != "" {
		return where
	}
	return ""
}

// The leak check itself finds what it should: a nonce printed in hex or
// base64 inside the captured text would fail the run.
func TestLeakCheckSeesSecrets(t *testing.T) {
	f := newFixture(t)
	f.hello()
	n := f.chal.ServerNonce
	for _, text := range []string{
		fmt.Sprintf("nonce=%x", n[:]),
		fmt.Sprintf("nonce=%X", n[:]),
		"x" + strings.ToUpper(fmt.Sprintf("%x", n[:])),
	} {
		if leakcheck.Find(text, n[:]) == "" {
			t.Errorf("leak not found in %q", text)
		}
	}
	// The handshake values print no retained bytes under any verb.
	for _, v := range []any{f.srv, f.cli} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%d"} {
			s := fmt.Sprintf(verb, v)
			if where := leakcheck.Find(s, n[:], f.chal.ClientNonce[:], f.chal.AuthorityProof[:]); where != "" {
				t.Errorf("%s of %T leaks %s", verb, v, where)
			}
			if strings.Contains(s, fmt.Sprint(n[0], " ", n[1], " ", n[2])) {
				t.Errorf("%s of %T prints nonce bytes in decimal", verb, v)
			}
		}
	}
}

// No input panics any step of either state machine; every refusal is a
// typed *coordwire.Error, and is captured for the leak check.
func TestArbitraryInputNeverPanics(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := newFixture(t)
		f.start()
		body := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(rt, "body")
		typ := coordwire.FrameType(rapid.Byte().Draw(rt, "type"))
		useRealHello := rapid.Bool().Draw(rt, "real_hello")
		recordPanic(func() {
			var err error
			if useRealHello {
				var c *coordwire.WorkloadChallenge
				c, err = f.srv.HandleHello(f.cli.Hello().AppendBody(nil), f.now)
				if err == nil {
					secret(c.ServerNonce[:], c.AuthorityProof[:])
					_, err = f.srv.HandleResponse(typ, body, f.now.Add(time.Second))
				}
			} else {
				_, err = f.srv.HandleHello(body, f.now)
			}
			checkTyped(rt, err)
			f.cli.Hello()
			_, err = f.cli.HandleChallenge(body, f.now)
			checkTyped(rt, err)
			_, err = f.cli.HandleHelloOK(typ, body, f.now)
			checkTyped(rt, err)
		})
	})
}

func checkTyped(t *rapid.T, err error) {
	if err == nil {
		t.Fatalf("random input accepted")
	}
	record("random", err)
	if coordwire.CodeOf(err) == coordwire.Internal {
		t.Fatalf("untyped refusal %v", err)
	}
}
