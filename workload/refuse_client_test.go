package workload_test

import (
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/workload"
)

// clientRefusesChallenge asserts the challenge is refused with the generic
// error and cause bit, and that the client is left failed: nothing was
// signed, and the HELLO_OK step is refused too.
func clientRefusesChallenge(t *testing.T, f *fixture, bit uint32) {
	t.Helper()
	r, err := f.cli.HandleChallenge(f.chalBody, f.now)
	if r != nil {
		t.Fatal("refusal returned a response")
	}
	wantAuthFailed(t, err, workload.ClientCause(f.cli), bit, f.cli)
	_, err = f.cli.HandleHelloOK(coordwire.TypeCoordHelloOK, []byte{1}, f.now)
	if !errors.Is(err, workload.ErrAuthenticationFailed) {
		t.Fatalf("failed client went on: %v", err)
	}
}

// serverGrant runs the server to a result with the fixture's response, and
// returns the COORD_HELLO_OK it would send, for editing.
func (f *fixture) serverHelloOK() *coordwire.CoordHelloOK {
	f.t.Helper()
	res, err := f.srv.HandleResponse(coordwire.TypeWorkloadResponse, f.respond(), f.now)
	if err != nil {
		f.t.Fatal(err)
	}
	return res.HelloOK(coordID, 7, coordwire.MinOperationResultRetentionSecs, testCert)
}

// clientRefusesHelloOK asserts a COORD_HELLO_OK body is refused.
func clientRefusesHelloOK(t *testing.T, f *fixture, t8 coordwire.FrameType, body []byte, bit uint32) {
	t.Helper()
	res, err := f.cli.HandleHelloOK(t8, body, f.now)
	if res != nil {
		t.Fatal("refusal returned a result")
	}
	wantAuthFailed(t, err, workload.ClientCause(f.cli), bit, f.cli)
}

func TestClientRefuses(t *testing.T) {
	t.Run("nonce_echo_mismatch", func(t *testing.T) {
		// A validly signed challenge for another client nonce (a replayed
		// or relayed challenge).
		f := newFixture(t)
		f.hello()
		f.signChallenge(f.auth, func(c *coordwire.WorkloadChallenge) { c.ClientNonce[0] ^= 1 })
		clientRefusesChallenge(t, f, workload.CauseNonce)
	})
	t.Run("reused_nonce_server_equals_client", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		f.signChallenge(f.auth, func(c *coordwire.WorkloadChallenge) { c.ServerNonce = c.ClientNonce })
		clientRefusesChallenge(t, f, workload.CauseNonce)
	})
	t.Run("reused_nonce_replayed_challenge", func(t *testing.T) {
		// A challenge recorded from an earlier connection, replayed to a
		// new client handshake (new client nonce).
		f := newFixture(t)
		f.hello()
		old := f.chalBody
		f.start()
		f.cli.Hello()
		f.chalBody = old
		clientRefusesChallenge(t, f, workload.CauseNonce)
	})
	t.Run("wrong_service", func(t *testing.T) {
		for _, svc := range []string{"phux-terminal", "phux-coordinator ", "", "PHUX-COORDINATOR"} {
			f := newFixture(t)
			f.hello()
			f.signChallenge(f.auth, func(c *coordwire.WorkloadChallenge) { c.Service = svc })
			clientRefusesChallenge(t, f, workload.CauseService)
		}
	})
	t.Run("wrong_version", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		f.signChallenge(f.auth, func(c *coordwire.WorkloadChallenge) { c.NegotiatedMinor = 2 })
		clientRefusesChallenge(t, f, workload.CauseVersion)
	})
	t.Run("other_profile", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		i := len(coordwire.AppendUvarint(nil, 1)) + 2 + 4 // field 1 header + U32 length
		f.chalBody[i+len(coordwire.WorkloadProfile)-1] = '9'
		clientRefusesChallenge(t, f, workload.CauseOffer)
	})
	t.Run("wrong_authority_key", func(t *testing.T) {
		// Pin mismatch: another key signs a perfectly good challenge.
		f := newFixture(t)
		f.hello()
		f.signChallenge(otherKey, func(*coordwire.WorkloadChallenge) {})
		clientRefusesChallenge(t, f, workload.CausePin)
		// The local caller learns it was the pin; the error stays generic.
		if !f.cli.AuthorityMismatch() {
			t.Fatal("AuthorityMismatch() = false for a challenge under another authority key")
		}
	})
	t.Run("binding_mismatch", func(t *testing.T) {
		// A challenge from another connection: its binding is that
		// connection's, not this client's.
		f := newFixture(t)
		f.srvCfg.Binding = fixedUDS(1000, 1000, 4243)
		f.hello()
		clientRefusesChallenge(t, f, workload.CauseBinding)
		if f.cli.AuthorityMismatch() {
			t.Fatal("AuthorityMismatch() = true for a binding mismatch under the pinned key")
		}
	})
	t.Run("binding_kind_mismatch", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		f.signChallenge(f.auth, func(c *coordwire.WorkloadChallenge) { c.ChannelBindingKind = coordwire.BindingTLSExporter })
		clientRefusesChallenge(t, f, workload.CauseBinding)
	})
	t.Run("tampered_authority_proof", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		f.chal.AuthorityProof[40] ^= 4
		f.chalBody = f.chal.AppendBody(nil)
		clientRefusesChallenge(t, f, workload.CauseProof)
	})
	t.Run("tampered_transcript", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		f.chal.ServerIncarnation[3] ^= 1 // the proof covers the incarnation
		f.chalBody = f.chal.AppendBody(nil)
		clientRefusesChallenge(t, f, workload.CauseProof)
	})
	t.Run("small_order_authority_key", func(t *testing.T) {
		// The operator pinned the identity point as "authority key": S = 0,
		// R = identity verifies any transcript under crypto/ed25519.
		f := newFixture(t)
		f.cliCfg.PinnedAuthorityFingerprint = edstrict.KeyID(identityEnc)
		f.hello()
		c := *f.chal
		copy(c.AuthorityPublicKey[:], identityEnc)
		c.AuthorityProof = [64]byte{0: 1}
		if !ed25519.Verify(identityEnc, workload.ServerTranscript(&c), c.AuthorityProof[:]) {
			t.Fatal("crypto/ed25519 should accept the forgery")
		}
		f.setChallenge(&c)
		clientRefusesChallenge(t, f, workload.CauseProof)
	})
	t.Run("noncanonical_authority_key", func(t *testing.T) {
		for _, a := range [][]byte{identityNonCanonical, identitySignBit} {
			f := newFixture(t)
			f.cliCfg.PinnedAuthorityFingerprint = edstrict.KeyID(a)
			f.hello()
			c := *f.chal
			copy(c.AuthorityPublicKey[:], a)
			c.AuthorityProof = [64]byte{0: 1}
			f.setChallenge(&c)
			clientRefusesChallenge(t, f, workload.CauseProof)
		}
	})
	t.Run("noncanonical_R_authority_proof", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		c := *f.chal
		copy(c.AuthorityProof[:], f.auth.signWithR(identityNonCanonical, workload.ServerTranscript(&c)))
		f.setChallenge(&c)
		clientRefusesChallenge(t, f, workload.CauseProof)
	})
	t.Run("small_order_R_authority_proof", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		c := *f.chal
		copy(c.AuthorityProof[:], f.auth.signWithR(identityEnc, workload.ServerTranscript(&c)))
		if !ed25519.Verify(f.auth.Public(), workload.ServerTranscript(&c), c.AuthorityProof[:]) {
			t.Fatal("crypto/ed25519 should accept")
		}
		f.setChallenge(&c)
		clientRefusesChallenge(t, f, workload.CauseProof)
	})
	t.Run("S_not_below_L_authority_proof", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		c := *f.chal
		copy(c.AuthorityProof[:], addL(c.AuthorityProof[:]))
		f.setChallenge(&c)
		clientRefusesChallenge(t, f, workload.CauseProof)
	})
	t.Run("requested_expiry_passed", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		f.now = f.cliCfg.RequestedExpiry
		clientRefusesChallenge(t, f, workload.CauseExpiry)
	})
	t.Run("second_challenge", func(t *testing.T) {
		// A frame in the wrong step: PROTOCOL_ERROR (§5, §7).
		f := newFixture(t)
		f.hello()
		f.respond()
		_, err := f.cli.HandleChallenge(f.chalBody, f.now)
		wantUnexpectedFrame(t, err, workload.ClientCause(f.cli), f.cli)
	})
	t.Run("challenge_before_hello", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		f.cli, _ = workload.NewClientHandshake(f.cliCfg)
		_, err := f.cli.HandleChallenge(f.chalBody, f.now)
		wantUnexpectedFrame(t, err, workload.ClientCause(f.cli), f.cli)
	})

	// COORD_HELLO_OK.
	t.Run("hello_ok_without_challenge", func(t *testing.T) {
		// A downgrade to a proofless handshake.
		f := newFixture(t)
		f.hello()
		ok := f.serverHelloOK()
		c2, _ := workload.NewClientHandshake(f.cliCfg)
		c2.Hello()
		f.cli = c2
		_, err := f.cli.HandleHelloOK(coordwire.TypeCoordHelloOK, ok.AppendBody(nil), f.now)
		wantUnexpectedFrame(t, err, workload.ClientCause(f.cli), f.cli)
		if workload.ClientCause(f.cli)&workload.CauseOffer == 0 {
			t.Fatal("a downgrade is not recorded as one")
		}
	})
	t.Run("hello_ok_missing_grant", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		full := f.serverHelloOK().AppendBody(nil)
		// Rebuild the body without field 14.
		var body []byte
		d := coordwire.NewTLVReader(full)
		for d.Next() {
			if d.FieldID() != 14 {
				body = append(body, d.RawField()...)
			}
		}
		clientRefusesHelloOK(t, f, coordwire.TypeCoordHelloOK, body, workload.CauseOffer)
	})
	t.Run("hello_ok_other_frame", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		f.serverHelloOK()
		_, err := f.cli.HandleHelloOK(coordwire.TypeCoordPing, (&coordwire.CoordPing{Nonce: 2}).AppendBody(nil), f.now)
		wantUnexpectedFrame(t, err, workload.ClientCause(f.cli), f.cli)
	})
	// §5 names VERSION_INCOMPATIBLE for a major.minor mismatch, decided
	// before anything else is parsed; §3.2 makes a zero or over-hard-cap
	// limit malformed. Only the checks the spec names no code for are the
	// generic refusal.
	for _, tc := range []struct {
		name string
		edit func(m *coordwire.CoordHelloOK)
		code coordwire.ErrorCode
		bit  uint32
	}{
		{"minor", func(m *coordwire.CoordHelloOK) { m.ProtocolMinor = 3 }, coordwire.VersionIncompatible, workload.CauseVersion},
		{"major", func(m *coordwire.CoordHelloOK) { m.ProtocolMajor = 1 }, coordwire.VersionIncompatible, workload.CauseVersion},
		{"version_before_decode", func(m *coordwire.CoordHelloOK) { m.ProtocolMinor, m.OperationResultRetentionSecs = 2, 1 }, coordwire.VersionIncompatible, workload.CauseVersion},
		{"zero_frame", func(m *coordwire.CoordHelloOK) { m.Limits.MaxFrameBytes = 0 }, coordwire.MalformedMessage, workload.CauseGrant},
		{"zero_credit_count", func(m *coordwire.CoordHelloOK) { m.Limits.MaxEventCreditCount = 0 }, coordwire.MalformedMessage, workload.CauseGrant},
		{"over_cap_records", func(m *coordwire.CoordHelloOK) { m.Limits.MaxPageRecords = coordwire.HardMaxPageRecords + 1 }, coordwire.MalformedMessage, workload.CauseGrant},
	} {
		t.Run("hello_ok_"+tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.hello()
			m := f.serverHelloOK()
			tc.edit(m)
			res, err := f.cli.HandleHelloOK(coordwire.TypeCoordHelloOK, m.AppendBody(nil), f.now)
			record(t.Name(), err, f.cli)
			if res != nil || coordwire.CodeOf(err) != tc.code || errors.Is(err, workload.ErrAuthenticationFailed) {
				t.Fatalf("got %v, want %v", err, tc.code)
			}
			if workload.ClientCause(f.cli)&tc.bit == 0 {
				t.Fatalf("cause %#x", workload.ClientCause(f.cli))
			}
		})
	}
	for _, tc := range []struct {
		name string
		edit func(f *fixture, m *coordwire.CoordHelloOK)
		bit  uint32
	}{
		{"wrong_incarnation", func(f *fixture, m *coordwire.CoordHelloOK) { m.IncarnationID[0] ^= 1 }, workload.CauseIncarnation},
		{"grant_wrong_key_id", func(f *fixture, m *coordwire.CoordHelloOK) { m.WorkloadGrant.KeyID[0] ^= 1 }, workload.CauseGrant},
		{"grant_wrong_fingerprint", func(f *fixture, m *coordwire.CoordHelloOK) {
			m.WorkloadGrant.AuthorityFingerprint = edstrict.KeyID(otherKey.Public())
		}, workload.CausePin},
		{"grant_scope_beyond_request", func(f *fixture, m *coordwire.CoordHelloOK) {
			m.WorkloadGrant.EffectiveScope |= coordwire.ScopeAdmin
		}, workload.CauseGrant},
		{"grant_expired", func(f *fixture, m *coordwire.CoordHelloOK) { m.WorkloadGrant.ExpiresAt = uint64(f.now.Unix()) }, workload.CauseExpiry},
		{"grant_beyond_request", func(f *fixture, m *coordwire.CoordHelloOK) { m.WorkloadGrant.ExpiresAt += 1 }, workload.CauseExpiry},
		{"limits_beyond_offer", func(f *fixture, m *coordwire.CoordHelloOK) { m.Limits.MaxFrameBytes = coordwire.HardMaxFrameBytes }, workload.CauseGrant},
		{"limits_page_over_frame", func(f *fixture, m *coordwire.CoordHelloOK) {
			m.Limits.MaxFrameBytes, m.Limits.MaxPageBytes, m.Limits.MaxTypedPayloadBytes = 4096, 3585, 3584
		}, workload.CauseGrant},
		{"limits_typed_over_frame", func(f *fixture, m *coordwire.CoordHelloOK) {
			m.Limits.MaxFrameBytes, m.Limits.MaxPageBytes, m.Limits.MaxTypedPayloadBytes = 4096, 3584, 3585
		}, workload.CauseGrant},
		{"limits_credit_below_one_event", func(f *fixture, m *coordwire.CoordHelloOK) {
			m.Limits.MaxEventCreditBytes = uint32(m.Limits.MaxEventFrameBytes() - 1)
		}, workload.CauseGrant},
		{"capability_not_offered", func(f *fixture, m *coordwire.CoordHelloOK) { m.NegotiatedCapabilities |= coordwire.CapAdministration }, workload.CauseGrant},
		{"required_capability_missing", func(f *fixture, m *coordwire.CoordHelloOK) { m.NegotiatedCapabilities = 0 }, workload.CauseGrant},
	} {
		t.Run("hello_ok_"+tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.hello()
			m := f.serverHelloOK()
			tc.edit(f, m)
			clientRefusesHelloOK(t, f, coordwire.TypeCoordHelloOK, m.AppendBody(nil), tc.bit)
			if got, want := f.cli.AuthorityMismatch(), tc.bit == workload.CausePin; got != want {
				t.Fatalf("AuthorityMismatch() = %v, want %v", got, want)
			}
		})
	}
	t.Run("hello_ok_twice", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		body := f.serverHelloOK().AppendBody(nil)
		if _, err := f.cli.HandleHelloOK(coordwire.TypeCoordHelloOK, body, f.now); err != nil {
			t.Fatal(err)
		}
		clientRefusesHelloOK(t, f, coordwire.TypeCoordHelloOK, body, workload.CauseState)
	})
	t.Run("hello_ok_after_expiry", func(t *testing.T) {
		f := newFixture(t)
		f.hello()
		body := f.serverHelloOK().AppendBody(nil)
		f.now = f.now.Add(2 * time.Hour)
		clientRefusesHelloOK(t, f, coordwire.TypeCoordHelloOK, body, workload.CauseExpiry)
	})
}

func TestConfigValidation(t *testing.T) {
	f := newFixture(t)
	bad := []func(c *workload.ServerConfig){
		func(c *workload.ServerConfig) { c.AuthorityKey = nil },
		func(c *workload.ServerConfig) { c.Incarnation = coordwire.IncarnationID{} },
		func(c *workload.ServerConfig) { c.Limits = coordwire.Limits{MaxFrameBytes: 1} },
	}
	for i, edit := range bad {
		c := f.srvCfg
		edit(&c)
		if _, err := workload.NewServerHandshake(c); err == nil {
			t.Errorf("server config %d accepted", i)
		}
	}
	badC := []func(c *workload.ClientConfig){
		func(c *workload.ClientConfig) { c.WorkloadKey = nil },
		func(c *workload.ClientConfig) { c.PinnedAuthorityFingerprint = [32]byte{} },
		func(c *workload.ClientConfig) { c.RequestedScope = 0 },
		func(c *workload.ClientConfig) { c.RequestedScope = 0x40 },
		func(c *workload.ClientConfig) { c.Binding = workload.Binding{} },
		func(c *workload.ClientConfig) { c.RequiredCapabilities = coordwire.CapAdministration },
		func(c *workload.ClientConfig) { c.Limits = coordwire.Limits{MaxFrameBytes: 1} },
	}
	for i, edit := range badC {
		c := f.cliCfg
		edit(&c)
		if _, err := workload.NewClientHandshake(c); err == nil {
			t.Errorf("client config %d accepted", i)
		}
	}
}
