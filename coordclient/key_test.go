package coordclient_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire/edstrict"
)

func TestLoadKeyReader(t *testing.T) {
	seed := bytes.Repeat([]byte{7}, 32)
	k, err := coordclient.LoadKeyReader(bytes.NewReader(seed))
	if err != nil {
		t.Fatal(err)
	}
	want := ed25519.NewKeyFromSeed(seed)
	if !bytes.Equal(k.Public(), want.Public().(ed25519.PublicKey)) || k.KeyID() != edstrict.KeyID(k.Public()) {
		t.Fatal("wrong key")
	}
	msg := []byte("m")
	if !bytes.Equal(k.Sign(msg), ed25519.Sign(want, msg)) {
		t.Fatal("wrong signature")
	}
	for _, n := range []int{0, 31, 33, 64} {
		_, err := coordclient.LoadKeyReader(bytes.NewReader(make([]byte, n)))
		if !errors.Is(err, coordclient.ErrMalformedKey) {
			t.Errorf("%d bytes: %v", n, err)
		}
	}
	// A reader that errors is not mistaken for a short key.
	_, err = coordclient.LoadKeyReader(io.MultiReader(bytes.NewReader(seed[:5]), errReader{}))
	if err == nil || errors.Is(err, coordclient.ErrMalformedKey) {
		t.Fatalf("failing reader: %v", err)
	}
	if _, err := k.MarshalJSON(); !errors.Is(err, coordclient.ErrNotSerializable) {
		t.Fatal(err)
	}
	if s := k.String(); !strings.HasPrefix(s, "WorkloadKey(sha256:") {
		t.Fatal(s)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("device gone") }
