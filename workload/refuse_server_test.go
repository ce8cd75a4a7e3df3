package workload_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/workload"
)

// TestInMemoryHandshake is the fixture's happy path, so that every refusal
// below differs from a success in exactly one respect.
func TestInMemoryHandshake(t *testing.T) {
	f := newFixture(t)
	f.hello()
	s, c := f.finish(f.respond())
	if s.Scope != coordwire.ScopeWorkRead || c.Scope != coordwire.ScopeWorkRead {
		t.Fatalf("scope %v / %v", s.Scope, c.Scope)
	}
	if s.Grant.ExpiresAt != uint64(t0.Add(time.Hour).Unix()) {
		t.Fatalf("expires_at %d", s.Grant.ExpiresAt)
	}
	if f.chal.ServerNonce == ([32]byte{}) || f.chal.ServerNonce == f.chal.ClientNonce {
		t.Fatal("server nonce zero or equal to the client nonce")
	}
	// A response exactly ResponseTimeout after the challenge is in time.
	f = newFixture(t)
	f.hello()
	f.now = f.now.Add(workload.ResponseTimeout)
	f.finish(f.respond())
}

// The grant never outlives the registry entry or a scheduled revocation.
func TestGrantExpiryIsMinimum(t *testing.T) {
	f := newFixture(t)
	id := edstrict.KeyID(f.work.Public())
	e := f.reg[id]
	e.Expires = t0.Add(30 * time.Minute)
	f.reg[id] = e
	f.hello()
	s, _ := f.finish(f.respond())
	if s.Grant.ExpiresAt != uint64(t0.Add(30*time.Minute).Unix()) {
		t.Fatalf("expires_at %d, want registry expiry", s.Grant.ExpiresAt)
	}
	f = newFixture(t)
	e.Expires, e.Revoked = t0.Add(24*time.Hour), t0.Add(10*time.Minute)
	f.reg[id] = e
	f.hello()
	s, _ = f.finish(f.respond())
	if s.Grant.ExpiresAt != uint64(t0.Add(10*time.Minute).Unix()) {
		t.Fatalf("expires_at %d, want scheduled revocation", s.Grant.ExpiresAt)
	}
}

// serverRefuses asserts the response is refused with the generic error and
// cause bit, and that the server is left failed: a valid response after it
// is refused too (no state change: nothing granted, challenge consumed).
func serverRefuses(t *testing.T, f *fixture, t8 coordwire.FrameType, body []byte, bit uint32) {
	t.Helper()
	res, err := f.srv.HandleResponse(t8, body, f.now)
	if res != nil {
		t.Fatal("refusal returned a result")
	}
	wantAuthFailed(t, err, workload.ServerCause(f.srv), bit, f.srv)
	res, err = f.srv.HandleResponse(coordwire.TypeWorkloadResponse, f.craft(f.work, nil, nil), f.now)
	if res != nil || !errors.Is(err, workload.ErrAuthenticationFailed) {
		t.Fatalf("failed server accepted a later response: %v", err)
	}
	record(t.Name(), err, f.srv)
}

func TestServerRefuses(t *testing.T) {
	t.Run("version_mismatch", func(t *testing.T) {
		f := newFixture(t)
		f.start()
		// Version 0.2, then field 13 with garbage: a known field id with an
		// undefined wire type and bytes that decode as nothing.
		body := coordwire.AppendFieldU16(nil, 1, 0)
		body = coordwire.AppendFieldU16(body, 2, 2)
		garbage := append(coordwire.AppendUvarint(nil, 13), 0xee, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x99)
		body = append(body, garbage...)
		var probe coordwire.CoordHello
		if err := probe.DecodeBody(body); !errors.Is(err, coordwire.MalformedMessage) {
			t.Fatalf("the garbage decodes: %v", err)
		}
		ch, err := f.srv.HandleHello(body, f.now)
		record(t.Name(), err, f.srv)
		if ch != nil || !errors.Is(err, coordwire.VersionIncompatible) {
			t.Fatalf("got %v, want VERSION_INCOMPATIBLE before the offer is parsed", err)
		}
		// Major mismatch too.
		f2 := newFixture(t)
		f2.start()
		h := f2.cli.Hello()
		h.ProtocolMajor = 1
		if _, err := f2.srv.HandleHello(h.AppendBody(nil), f2.now); !errors.Is(err, coordwire.VersionIncompatible) {
			t.Fatalf("major: got %v", err)
		}
		// Failed: a good HELLO afterwards is refused.
		_, err = f.srv.HandleHello(f.cli.Hello().AppendBody(nil), f.now)
		wantAuthFailed(t, err, workload.ServerCause(f.srv), workload.CauseState, f.srv)
	})
	t.Run("missing_offer", func(t *testing.T) {
		f := newFixture(t)
		f.start()
		full := f.cli.Hello().AppendBody(nil)
		// Cut field 13 (the last one) off the body.
		cut := bytes.Clone(full[:len(full)-(2+1+coordwire.WorkloadOfferSize)])
		var probe coordwire.CoordHello
		if err := probe.DecodeBody(cut); !errors.Is(err, coordwire.MalformedMessage) {
			t.Fatalf("cut body: %v", err)
		}
		ch, err := f.srv.HandleHello(cut, f.now)
		if ch != nil {
			t.Fatal("challenge issued")
		}
		wantAuthFailed(t, err, workload.ServerCause(f.srv), workload.CauseOffer, f.srv)
	})
	t.Run("other_profile", func(t *testing.T) {
		f := newFixture(t)
		f.start()
		body := f.cli.Hello().AppendBody(nil)
		i := bytes.Index(body, []byte(coordwire.WorkloadProfile))
		body[i+len(coordwire.WorkloadProfile)-1] = '2' // phux-workload/v2
		_, err := f.srv.HandleHello(body, f.now)
		wantAuthFailed(t, err, workload.ServerCause(f.srv), workload.CauseOffer, f.srv)
	})
	t.Run("reused_nonce", func(t *testing.T) {
		// A response captured on one connection, replayed with the same
		// HELLO (same client nonce) on a new connection: the new server
		// nonce makes the old proof worthless.
		f := newFixture(t)
		f.hello()
		old := f.respond()
		helloBody := f.cli.Hello().AppendBody(nil)
		f.srv, _ = workload.NewServerHandshake(f.srvCfg)
		c, err := f.srv.HandleHello(helloBody, f.now)
		if err != nil {
			t.Fatal(err)
		}
		secret(c.ServerNonce[:], c.AuthorityProof[:])
		if c.ServerNonce == f.chal.ServerNonce {
			t.Fatal("server nonce reused")
		}
		f.chal = c
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, old, workload.CauseProof)
	})
	t.Run("consumed_challenge", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		body := f.respond()
		f.finish(body)
		res, err := f.srv.HandleResponse(coordwire.TypeWorkloadResponse, body, f.now)
		if res != nil {
			t.Fatal("granted twice")
		}
		wantAuthFailed(t, err, workload.ServerCause(f.srv), workload.CauseState, f.srv)
	})
	t.Run("second_response", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		bad := f.craft(f.work, func(r *coordwire.WorkloadResponse) { r.RequestedExpiry = 1 }, nil)
		if _, err := f.srv.HandleResponse(coordwire.TypeWorkloadResponse, bad, f.now); err == nil {
			t.Fatal("bad response accepted")
		}
		// The retry with a good response is a second response.
		res, err := f.srv.HandleResponse(coordwire.TypeWorkloadResponse, f.respond(), f.now)
		if res != nil {
			t.Fatal("second response granted")
		}
		wantAuthFailed(t, err, workload.ServerCause(f.srv), workload.CauseState, f.srv)
	})
	t.Run("second_hello", func(t *testing.T) {
		// §5: nothing interleaves CHALLENGE/RESPONSE; a second HELLO is
		// a frame in the wrong step (PROTOCOL_ERROR), and the machine is
		// failed afterwards.
		f := newFixture(t)
		f.hello()
		_, err := f.srv.HandleHello(f.cli.Hello().AppendBody(nil), f.now)
		wantUnexpectedFrame(t, err, workload.ServerCause(f.srv), f.srv)
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, f.respond(), workload.CauseState)
	})
	t.Run("response_before_hello", func(t *testing.T) {
		f := newFixture(t)
		f.start()
		res, err := f.srv.HandleResponse(coordwire.TypeWorkloadResponse, []byte{1}, f.now)
		if res != nil {
			t.Fatal("result")
		}
		wantUnexpectedFrame(t, err, workload.ServerCause(f.srv), f.srv)
	})
	t.Run("wrong_incarnation", func(t *testing.T) {
		// The client answered a challenge naming another incarnation (from
		// a previous process of this coordinator).
		f := newFixture(t)
		f.hello()
		f.signChallenge(f.auth, func(c *coordwire.WorkloadChallenge) { c.ServerIncarnation[0] ^= 1 })
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, f.respond(), workload.CauseProof)
	})
	t.Run("challenge_from_another_connection", func(t *testing.T) {
		// Two connections; the client answers connection A's challenge on
		// connection B. B rebuilds the transcript from its own nonces and
		// binding, so the proof does not verify.
		fa, fb := newFixture(t), newFixture(t)
		fb.srvCfg.Binding = fixedUDS(1000, 1000, 5555)
		fa.hello()
		fb.hello()
		serverRefuses(t, fb, coordwire.TypeWorkloadResponse, fa.respond(), workload.CauseProof)
	})
	t.Run("wrong_binding_in_transcript", func(t *testing.T) {
		// A client that signs over another binding value than the retained one.
		f := newFixture(t)
		f.hello()
		c := *f.chal
		c.ChannelBinding[0] ^= 1
		r := &coordwire.WorkloadResponse{KeyID: edstrict.KeyID(f.work.Public()), RequestedExpiry: uint64(t0.Add(time.Hour).Unix())}
		img := coordwire.ScopeWorkRead.Image()
		r.RequestedScope = img[:]
		copy(r.WorkloadProof[:], f.work.Sign(workload.ClientTranscript(&c, r)))
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, r.AppendBody(nil), workload.CauseProof)
	})
	t.Run("binding_unavailable", func(t *testing.T) {
		f := newFixture(t)
		f.srvCfg.Binding = workload.Binding{}
		f.start()
		_, err := f.srv.HandleHello(f.cli.Hello().AppendBody(nil), f.now)
		wantAuthFailed(t, err, workload.ServerCause(f.srv), workload.CauseBinding, f.srv)
	})
	t.Run("wrong_key_id_unregistered", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		body := f.craft(f.work, func(r *coordwire.WorkloadResponse) { r.KeyID[31] ^= 1 }, nil)
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, body, workload.CauseUnknownKey)
	})
	t.Run("wrong_key_id_registry_mismatch", func(t *testing.T) {
		// The registry files the key under an id that is not its SHA-256:
		// the constant-time id comparison catches it even though the
		// proof is good.
		f := newFixture(t)
		id := edstrict.KeyID(f.work.Public())
		e := f.reg[id]
		delete(f.reg, id)
		alias := edstrict.KeyID(otherKey.Public())
		f.reg[alias] = e
		f.hello()
		body := f.craft(f.work, func(r *coordwire.WorkloadResponse) { r.KeyID = alias }, nil)
		res, err := f.srv.HandleResponse(coordwire.TypeWorkloadResponse, body, f.now)
		if res != nil {
			t.Fatal("granted")
		}
		// The proof itself is good: only the id check catches it.
		wantAuthFailed(t, err, workload.ServerCause(f.srv), workload.CauseKeyID, f.srv)
		if c := workload.ServerCause(f.srv); c != workload.CauseKeyID {
			t.Fatalf("cause %#x, want only the key id check", c)
		}
	})
	t.Run("wrong_signing_key", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, f.craft(otherKey, nil, nil), workload.CauseProof)
	})
	t.Run("expired_requested_expiry", func(t *testing.T) {
		for _, exp := range []uint64{0, uint64(t0.Unix()) - 1, uint64(t0.Unix())} {
			f := newFixture(t)
			f.hello()
			body := f.craft(f.work, func(r *coordwire.WorkloadResponse) { r.RequestedExpiry = exp }, nil)
			serverRefuses(t, f, coordwire.TypeWorkloadResponse, body, workload.CauseExpiry)
		}
	})
	for _, sc := range []struct {
		name string
		img  []byte
	}{
		{"scope_unknown_bit", []byte{0, 0, 0, 0, 0, 0, 0, 0x41}},
		{"scope_high_bit", []byte{0x80, 0, 0, 0, 0, 0, 0, 0x01}},
		{"scope_wrong_length_7", []byte{0, 0, 0, 0, 0, 0, 1}},
		{"scope_wrong_length_9", []byte{0, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"scope_wrong_length_0", []byte{}},
		{"scope_zero", make([]byte, 8)},
	} {
		t.Run(sc.name, func(t *testing.T) {
			f := newFixture(t)
			f.hello()
			// Properly signed: only the scope check can refuse it.
			body := f.craft(f.work, func(r *coordwire.WorkloadResponse) { r.RequestedScope = sc.img }, nil)
			serverRefuses(t, f, coordwire.TypeWorkloadResponse, body, workload.CauseScope)
			if c := workload.ServerCause(f.srv); c&workload.CauseProof != 0 {
				t.Fatalf("proof was valid, cause %#x", c)
			}
		})
	}
	// Strict Ed25519: the registry key A and the proof's R and S.
	t.Run("noncanonical_A", func(t *testing.T) {
		for _, a := range [][]byte{identityNonCanonical, identitySignBit} {
			f := newFixture(t)
			id := f.reg.add(a, coordwire.KnownScopes, t0.Add(time.Hour))
			f.hello()
			// S = 0, R = identity: the group equation holds for any message.
			body := f.craft(f.work, func(r *coordwire.WorkloadResponse) { r.KeyID = id },
				func(r *coordwire.WorkloadResponse) { r.WorkloadProof = [64]byte{0: 1} })
			serverRefuses(t, f, coordwire.TypeWorkloadResponse, body, workload.CauseBadKey)
		}
	})
	t.Run("small_order_A", func(t *testing.T) {
		f := newFixture(t)
		id := f.reg.add(identityEnc, coordwire.KnownScopes, t0.Add(time.Hour))
		f.hello()
		var proof [64]byte
		proof[0] = 1 // R = identity, S = 0
		r := &coordwire.WorkloadResponse{KeyID: id, RequestedExpiry: uint64(t0.Add(time.Hour).Unix()), WorkloadProof: proof}
		img := coordwire.ScopeWorkRead.Image()
		r.RequestedScope = img[:]
		if !ed25519.Verify(identityEnc, workload.ClientTranscript(f.chal, r), proof[:]) {
			t.Fatal("crypto/ed25519 should accept this forgery; the case would prove nothing")
		}
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, r.AppendBody(nil), workload.CauseBadKey)
	})
	t.Run("small_order_R", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		var r0 coordwire.WorkloadResponse
		body := f.craft(f.work, nil, func(r *coordwire.WorkloadResponse) {
			sig := f.work.signWithR(identityEnc, workload.ClientTranscript(f.chal, r))
			copy(r.WorkloadProof[:], sig)
			r0 = *r
		})
		if !ed25519.Verify(f.work.Public(), workload.ClientTranscript(f.chal, &r0), r0.WorkloadProof[:]) {
			t.Fatal("crypto/ed25519 should accept the small-order-R signature")
		}
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, body, workload.CauseProof)
	})
	t.Run("noncanonical_R", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		body := f.craft(f.work, nil, func(r *coordwire.WorkloadResponse) {
			copy(r.WorkloadProof[:], f.work.signWithR(identityNonCanonical, workload.ClientTranscript(f.chal, r)))
		})
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, body, workload.CauseProof)
	})
	t.Run("S_not_below_L", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		body := f.craft(f.work, nil, func(r *coordwire.WorkloadResponse) {
			copy(r.WorkloadProof[:], addL(r.WorkloadProof[:]))
		})
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, body, workload.CauseProof)
	})
	t.Run("tampered_proof", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		body := f.craft(f.work, nil, func(r *coordwire.WorkloadResponse) { r.WorkloadProof[5] ^= 0x10 })
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, body, workload.CauseProof)
	})
	t.Run("invalid_key_in_registry", func(t *testing.T) {
		for _, pub := range [][]byte{notOnCurve(t), make([]byte, 31), nil} {
			f := newFixture(t)
			id := f.reg.add(pub, coordwire.KnownScopes, t0.Add(time.Hour))
			f.hello()
			body := f.craft(f.work, func(r *coordwire.WorkloadResponse) { r.KeyID = id }, nil)
			serverRefuses(t, f, coordwire.TypeWorkloadResponse, body, workload.CauseBadKey)
		}
	})
	t.Run("revoked_key", func(t *testing.T) {
		for _, at := range []time.Time{t0.Add(-time.Second), t0} {
			f := newFixture(t)
			id := edstrict.KeyID(f.work.Public())
			e := f.reg[id]
			e.Revoked = at
			f.reg[id] = e
			f.hello()
			serverRefuses(t, f, coordwire.TypeWorkloadResponse, f.respond(), workload.CauseKeyUnusable)
		}
	})
	t.Run("expired_registry_entry", func(t *testing.T) {
		for _, at := range []time.Time{t0.Add(-time.Second), t0, {}} {
			f := newFixture(t)
			id := edstrict.KeyID(f.work.Public())
			e := f.reg[id]
			e.Expires = at
			f.reg[id] = e
			f.hello()
			serverRefuses(t, f, coordwire.TypeWorkloadResponse, f.respond(), workload.CauseKeyUnusable)
		}
	})
	t.Run("registry_expiry_within_this_second", func(t *testing.T) {
		// Usable now, but whole-second expires_at would not be in the future.
		f := newFixture(t)
		f.now = t0.Add(300 * time.Millisecond)
		id := edstrict.KeyID(f.work.Public())
		e := f.reg[id]
		e.Expires = t0.Add(800 * time.Millisecond)
		f.reg[id] = e
		f.hello()
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, f.respond(), workload.CauseExpiry)
	})
	t.Run("no_registry", func(t *testing.T) {
		f := newFixture(t)
		f.srvCfg.Registry = nil
		f.hello()
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, f.respond(), workload.CauseUnknownKey)
	})
	t.Run("empty_intersection", func(t *testing.T) {
		f := newFixture(t)
		id := edstrict.KeyID(f.work.Public())
		e := f.reg[id]
		e.Ceiling = coordwire.ScopeAdmin
		f.reg[id] = e
		f.hello()
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, f.respond(), workload.CauseEmptyScope)
	})
	t.Run("response_after_5s", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		body := f.respond()
		f.now = f.now.Add(workload.ResponseTimeout + time.Nanosecond)
		serverRefuses(t, f, coordwire.TypeWorkloadResponse, body, workload.CauseLate)
	})
	t.Run("interleaved_frame", func(t *testing.T) {
		// §5: COORD_PING only before COORD_HELLO; after the challenge any
		// frame but the response is in the wrong step (PROTOCOL_ERROR),
		// and the challenge is consumed.
		for _, fr := range []coordwire.Frame{&coordwire.CoordPing{Nonce: 1}, &coordwire.CoordPong{Nonce: 1}, &coordwire.CoordHello{}, &coordwire.Ack{RequestID: 1}} {
			f := newFixture(t)
			f.hello()
			res, err := f.srv.HandleResponse(fr.Type(), fr.AppendBody(nil), f.now)
			if res != nil {
				t.Fatal("result")
			}
			wantUnexpectedFrame(t, err, workload.ServerCause(f.srv), f.srv)
			_, err = f.srv.HandleResponse(coordwire.TypeWorkloadResponse, f.respond(), f.now)
			wantAuthFailed(t, err, workload.ServerCause(f.srv), workload.CauseState, f.srv)
		}
	})
	t.Run("malformed_response", func(t *testing.T) {
		// ADDENDUM B.2: a profile frame that does not decode strictly is
		// MALFORMED_MESSAGE, and the challenge is consumed.
		f := newFixture(t)
		f.hello()
		body := append(f.respond(), coordwire.AppendFieldU8(nil, 5, 0)...) // unknown field 5
		res, err := f.srv.HandleResponse(coordwire.TypeWorkloadResponse, body, f.now)
		record(t.Name(), err, f.srv)
		if res != nil || !errors.Is(err, coordwire.MalformedMessage) {
			t.Fatalf("got %v, want MALFORMED_MESSAGE", err)
		}
		_, err = f.srv.HandleResponse(coordwire.TypeWorkloadResponse, f.craft(f.work, nil, nil), f.now)
		wantAuthFailed(t, err, workload.ServerCause(f.srv), workload.CauseState, f.srv)
	})
	t.Run("hello_limits_and_capabilities", func(t *testing.T) {
		// Not authentication failures: the codec's own refusals, and fatal.
		f := newFixture(t)
		f.cliCfg.RequiredCapabilities = coordwire.CapTerminalBindings // server does not offer it
		f.start()
		ch, err := f.srv.HandleHello(f.cli.Hello().AppendBody(nil), f.now)
		record(t.Name(), err, f.srv)
		if ch != nil || !errors.Is(err, coordwire.CapabilityRequired) {
			t.Fatalf("got %v, want CAPABILITY_REQUIRED", err)
		}
		f = newFixture(t)
		f.start()
		h := f.cli.Hello()
		h.Limits.MaxFrameBytes = 0
		ch, err = f.srv.HandleHello(h.AppendBody(nil), f.now)
		record(t.Name(), err, f.srv)
		if ch != nil || !errors.Is(err, coordwire.MalformedMessage) {
			t.Fatalf("got %v, want MALFORMED_MESSAGE", err)
		}
		_, err = f.srv.HandleHello(f.cli.Hello().AppendBody(nil), f.now)
		wantAuthFailed(t, err, workload.ServerCause(f.srv), workload.CauseState, f.srv)
	})
}
