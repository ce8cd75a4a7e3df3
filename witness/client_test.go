package witness_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/redact"
	"github.com/phuxcoord/coord/witness"
)

// The witness public key is the pin: NewClient requires
// a valid Ed25519 key, copies it, and the grants carry it.
func TestClientPinIsTheWitnessPublicKey(t *testing.T) {
	coord := coordwire.NewCoordinatorID()
	identity := make([]byte, 32) // the identity point: small order
	identity[0] = 1
	for name, pin := range map[string]ed25519.PublicKey{
		"missing": nil, "short": make([]byte, 31), "long": make([]byte, 33), "small order": identity,
	} {
		if _, err := witness.NewClient(witness.ClientConfig{Address: "unix:/nonexistent", WitnessPublicKey: pin,
			CoordinatorID: coord}); !errors.Is(err, witness.ErrConfig) {
			t.Errorf("%s pin: %v", name, err)
		}
	}

	tw := startWitness(t, witness.Config{})
	pin := bytes.Clone(tw.id.PublicKey)
	c, err := witness.NewClient(witness.ClientConfig{Address: tw.addr, WitnessPublicKey: pin,
		CoordinatorID: coord, Authority: newSigner(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pin[0] ^= 1 // the caller's slice is not the client's pin
	g, err := c.Activate(ctxT(t), 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g.WitnessPublicKey(), tw.id.PublicKey) {
		t.Fatal("grant does not carry the pinned key")
	}
	g.WitnessPublicKey()[0] ^= 1 // nor is the grant's copy
	if _, err := c.Renew(ctxT(t), g); err != nil {
		t.Fatalf("renewal after the caller changed its copies of the pin: %v", err)
	}
	ct := g.Certificate()
	if ct.WitnessKeyID != edstrict.KeyID(tw.id.PublicKey) {
		t.Fatal("certificate key id is not edstrict.KeyID of the pin")
	}
	// What a client of the coordinator then checks, with the same pin.
	ok := &coordwire.CoordHelloOK{CoordinatorID: coord, AuthorityEpoch: ct.AuthorityEpoch,
		IncarnationID: ct.IncarnationID, ActivationCertificate: ct}
	if err := cert.VerifyHelloOK(ok, tw.id.PublicKey, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// fakeWitness answers one connection as a witness that presents hello and
// answers every request with reply(request).
func fakeWitness(t *testing.T, hello witness.Hello, reply func(*witness.Request) witness.Frame) func(context.Context) (net.Conn, error) {
	return func(context.Context) (net.Conn, error) {
		a, b := net.Pipe()
		go func() {
			defer b.Close()
			h := hello
			if err := witness.WriteFrame(b, &h); err != nil {
				return
			}
			for {
				f, err := witness.ReadFrame(b)
				if err != nil {
					return
				}
				req, ok := f.(*witness.Request)
				if !ok {
					t.Errorf("fake witness got %T", f)
					return
				}
				if err := witness.WriteFrame(b, reply(req)); err != nil {
					return
				}
			}
		}()
		return a, nil
	}
}

// A witness that presents the pinned key in WITNESS_HELLO but signs its
// certificates with another key is refused: certificates are verified
// with the pinned key, not with whatever key the connection showed.
func TestClientVerifiesCertificatesWithThePinnedKey(t *testing.T) {
	pinned, other := newSigner(t), newSigner(t)
	wid := coordwire.ActivationWitnessID{7}
	coord := coordwire.NewCoordinatorID()
	var hello witness.Hello
	hello.Protocol, hello.WitnessID, hello.Nonce = witness.ProtocolName, wid, redact.New([32]byte{9})
	copy(hello.WitnessPublicKey[:], pinned.Public())
	for _, tc := range []struct {
		name   string
		signer ed25519.PrivateKey
		want   error
	}{
		{"signed by another key", other.priv, cert.ErrWitnessKeyID},
		{"signed by the pinned key", pinned.priv, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := witness.NewClient(witness.ClientConfig{WitnessPublicKey: pinned.Public(), CoordinatorID: coord,
				Authority: newSigner(t),
				Dial: fakeWitness(t, hello, func(r *witness.Request) witness.Frame {
					ct, err := cert.Issue(cert.Grant{WitnessID: wid, CoordinatorID: coord, ActivationSequence: 1,
						AuthorityEpoch: r.AuthorityEpoch, IncarnationID: r.IncarnationID, FencingToken: [32]byte{5}},
						uint64(time.Now().Unix()), 30, tc.signer)
					if err != nil {
						t.Error(err)
					}
					return &witness.Granted{Certificate: ct}
				})})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Activate(ctxT(t), 1, coordwire.NewIncarnationID())
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, witness.ErrBadCertificate) || !errors.Is(err, tc.want) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

// lateCtx is a context at the instant between its deadline and its timer:
// the deadline has passed (or passes during a call) while Err is still
// nil and Done still open — where a context.WithDeadline is, on a loaded
// machine, until its timer runs.
type lateCtx struct {
	context.Context
	deadline time.Time
}

func (c lateCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// silentWitness listens on a real Unix socket, presents a valid
// WITNESS_HELLO for pin and never answers a request.
func silentWitness(t *testing.T, pin ed25519.PublicKey) string {
	path := filepath.Join(sockDir(t), "silent.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				h := witness.Hello{Protocol: witness.ProtocolName, WitnessID: coordwire.ActivationWitnessID{7}, Nonce: redact.New([32]byte{9})}
				copy(h.WitnessPublicKey[:], pin)
				if err := witness.WriteFrame(conn, &h); err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, conn)
			}()
		}
	}()
	return "unix:" + path
}

// A call whose context's deadline passes — before the call (the dial) or
// during it (the connection's deadline, the same instant) — fails with
// context.DeadlineExceeded even while ctx.Err() is still nil, never with
// the connection's I/O timeout: a caller that waits until its context ends
// (coordserver.NewStandby) must be able to tell that end from a witness
// failure.
func TestClientCallPastItsDeadlineIsTheContextsError(t *testing.T) {
	pin := newSigner(t)
	addr := silentWitness(t, pin.Public())
	for _, tc := range []struct {
		name  string
		after time.Duration // the deadline, from now
	}{{"deadline already passed", -time.Millisecond}, {"deadline passes while waiting for the reply", 100 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := witness.NewClient(witness.ClientConfig{Address: addr, WitnessPublicKey: pin.Public(),
				CoordinatorID: coordwire.NewCoordinatorID(), Authority: newSigner(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := lateCtx{context.Background(), time.Now().Add(tc.after)}
			if _, err := c.Status(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Status past its deadline: %v, want context.DeadlineExceeded", err)
			}
		})
	}
}
