package redact_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/phuxcoord/coord/internal/redact"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
)

var seed = [32]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
	17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28}

func TestSecretNeverRenders(t *testing.T) {
	s := redact.New(seed)
	for _, l := range leakcheck.Leaks(s, seed[:]) {
		t.Errorf("Secret leaks through %s", l)
	}
	for _, l := range leakcheck.Leaks(&s, seed[:]) {
		t.Errorf("*Secret leaks through %s", l)
	}
	sl := redact.New(seed[:])
	for _, l := range leakcheck.Leaks(sl, seed[:]) {
		t.Errorf("Secret[[]byte] leaks through %s", l)
	}
	if _, err := s.MarshalBinary(); !errors.Is(err, redact.ErrNotSerializable) {
		t.Errorf("MarshalBinary: %v, want ErrNotSerializable", err)
	}
	if _, err := s.GobEncode(); !errors.Is(err, redact.ErrNotSerializable) {
		t.Errorf("GobEncode: %v, want ErrNotSerializable", err)
	}
	j, err := json.Marshal(struct{ S redact.Secret[[32]byte] }{s})
	if err != nil || string(j) != `{"S":"[redacted]"}` {
		t.Errorf("json: %s, %v", j, err)
	}
}

// A plain pointer does not hide a secret from fmt: an unsupported verb
// makes fmt dereference it. This is why Secret holds a function value.
func TestPlainPointerLeaks(t *testing.T) {
	type hidden struct{ p *[32]byte }
	v := seed
	verb := "%s"
	if leakcheck.Find(fmt.Sprintf(verb, hidden{&v}), seed[:]) == "" {
		t.Skip("fmt no longer dereferences pointers under a bad verb")
	}
	type boxed struct{ s redact.Secret[[32]byte] }
	for _, verb := range leakcheck.Verbs {
		if where := leakcheck.Find(fmt.Sprintf(verb, boxed{redact.New(seed)}), seed[:]); where != "" {
			t.Errorf("%s of a Secret in an unexported field leaks %s", verb, where)
		}
	}
}

func TestRevealAndPtr(t *testing.T) {
	var zero redact.Secret[[32]byte]
	if !zero.IsZero() || zero.Ptr() != nil || zero.Reveal() != ([32]byte{}) {
		t.Error("zero Secret is not empty")
	}
	s := redact.New(seed)
	if s.IsZero() || s.Reveal() != seed {
		t.Error("Reveal does not return the value")
	}
	s.Ptr()[0] = 0
	c := s // copies share the value
	if c.Reveal()[0] != 0 {
		t.Error("Ptr does not update in place")
	}
}

func ExampleSecret() {
	nonce := redact.New([4]byte{1, 2, 3, 4})
	fmt.Printf("%v %x %d\n", nonce, nonce, nonce)
	fmt.Println(nonce.Reveal())
	// Output:
	// [redacted] [redacted] [redacted]
	// [1 2 3 4]
}
