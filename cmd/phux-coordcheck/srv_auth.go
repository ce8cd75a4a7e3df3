package main

import (
	"context"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/internal/testkit/rawframe"
	"github.com/phuxcoord/coord/keystore"
)

// The server tests of §5 (handshake, version, authentication,
// capabilities), §6 (scopes) and §12 (the certificate in COORD_HELLO_OK).

// handshakeTest sends a (possibly mutated) COORD_HELLO, reads the
// challenge, answers with resp(challenge) and requires a fatal code.
func responseTest(name, desc string, code coordwire.ErrorCode, resp func(x *target, ch *coordwire.WorkloadChallenge) (*coordwire.WorkloadResponse, error)) serverTest {
	return serverTest{Name: name, Level: MUST, Desc: desc, Run: func(ctx context.Context, x *target) error {
		c, err := x.dial(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.Send(rawframe.NewHello()); err != nil {
			return err
		}
		ch, err := c.ReadChallenge(x.wait)
		if err != nil {
			return err
		}
		r, err := resp(x, ch)
		if err != nil {
			return err
		}
		if err := c.Send(r); err != nil {
			return err
		}
		return expectFatal(c, code, x.wait)
	}}
}

func future() uint64 { return uint64(time.Now().Add(time.Hour).Unix()) }

func authTests() []serverTest {
	return []serverTest{
		rawTest("coord/5/version/major-mismatch", MUST, "§5, inv. 3: a COORD_HELLO of another major version is fatal VERSION_INCOMPATIBLE", false,
			coordwire.VersionIncompatible, func(s *sess) error {
				return s.SendRaw(rawframe.Envelope(byte(coordwire.TypeCoordHello), helloBody(func(h *coordwire.CoordHello) { h.ProtocolMajor = 7 })))
			}),
		rawTest("coord/5/version/minor-mismatch", MUST, "§5: a COORD_HELLO of another minor version is fatal VERSION_INCOMPATIBLE", false,
			coordwire.VersionIncompatible, func(s *sess) error {
				return s.SendRaw(rawframe.Envelope(byte(coordwire.TypeCoordHello), helloBody(func(h *coordwire.CoordHello) { h.ProtocolMinor = 9 })))
			}),
		rawTest("coord/5/version/before-authority", MUST, "§5, inv. 3: version mismatch precedes authority parsing: a major mismatch with an undecodable workload_offer is still VERSION_INCOMPATIBLE", false,
			coordwire.VersionIncompatible, func(s *sess) error {
				b := helloBody(func(h *coordwire.CoordHello) { h.ProtocolMajor = 7 })
				return s.SendRaw(rawframe.Envelope(byte(coordwire.TypeCoordHello), withField(b, 13, coordwire.AppendFieldBytes(nil, 13, []byte{1, 2, 3}))))
			}),
		rawTest("coord/5/capabilities/required-absent", MUST, "§5: a required capability the server does not serve (bit 40) fails COORD_HELLO with CAPABILITY_REQUIRED", false,
			coordwire.CapabilityRequired, func(s *sess) error {
				return s.Send(helloMut(func(h *coordwire.CoordHello) {
					h.OfferedCapabilities = 1 << 40
					h.RequiredCapabilities = 1 << 40
				}))
			}),
		rawTestAny("coord/5/capabilities/required-not-offered", MUST, "§5: required bits must be a subset of the offer; otherwise COORD_HELLO fails (MALFORMED_MESSAGE, PROTOCOL_ERROR or CAPABILITY_REQUIRED)", false,
			[]coordwire.ErrorCode{coordwire.MalformedMessage, coordwire.ProtocolError, coordwire.CapabilityRequired}, func(s *sess) error {
				return s.Send(helloMut(func(h *coordwire.CoordHello) {
					h.OfferedCapabilities = 0
					h.RequiredCapabilities = coordwire.CapEventReplay
				}))
			}),
		{Name: "coord/5/capabilities/unknown-not-echoed", Level: MUST, Desc: "§5: unknown capability bits are ignored in the intersection and never echoed unless both offer them",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connect(ctx, connOpts{caps: allCaps | 1<<40})
				if err != nil {
					return err
				}
				defer s.Close()
				if s.ok.NegotiatedCapabilities&^allCaps != 0 {
					return failf("negotiated %#x echoes a bit the server cannot know", uint64(s.ok.NegotiatedCapabilities))
				}
				return nil
			}},
		{Name: "coord/5/capabilities/subset-of-offer", Level: MUST, Desc: "§5: negotiated capabilities are a subset of the client's offer (offer none: none negotiated)",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connect(ctx, connOpts{noCaps: true})
				if err != nil {
					return err
				}
				defer s.Close()
				if s.ok.NegotiatedCapabilities != 0 {
					return failf("negotiated %#x with an empty offer", uint64(s.ok.NegotiatedCapabilities))
				}
				return nil
			}},
		{Name: "coord/5/ping-before-hello", Level: MUST, Desc: "§5: COORD_PING is the only frame allowed before COORD_HELLO; it gets COORD_PONG with its nonce and the handshake proceeds",
			Run: func(ctx context.Context, x *target) error {
				c, err := x.dial(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				if err := c.Send(&coordwire.CoordPing{Nonce: 0xfeed}); err != nil {
					return err
				}
				p, err := rawframe.Expect[*coordwire.CoordPong](c, x.wait)
				if err != nil {
					return err
				}
				if p.Nonce != 0xfeed {
					return failf("PONG nonce %#x, want 0xfeed", p.Nonce)
				}
				if _, err := c.Handshake(x.clientConfig(connOpts{}), x.wait); err != nil {
					return failf("handshake after PING: %v", err)
				}
				return nil
			}},
		{Name: "coord/5/nothing-between-challenge-and-response", Level: MUST, Desc: "§5, B.2: nothing interleaves WORKLOAD_CHALLENGE and WORKLOAD_RESPONSE, COORD_PING included: the connection is refused and closed",
			Run: func(ctx context.Context, x *target) error {
				c, err := x.dial(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				if err := c.Send(rawframe.NewHello()); err != nil {
					return err
				}
				if _, err := c.ReadChallenge(x.wait); err != nil {
					return err
				}
				if err := c.Send(&coordwire.CoordPing{Nonce: 1}); err != nil {
					return err
				}
				f, err := c.Read(x.wait)
				if err == nil {
					e, ok := f.(*coordwire.CoordError)
					if !ok {
						return failf("got %v, want a refusal", describeFrame(f))
					}
					if e.Code != coordwire.ProtocolError && e.Code != coordwire.AuthenticationFailed {
						return failf("got COORD_ERROR %v, want PROTOCOL_ERROR or AUTHENTICATION_FAILED", e.Code)
					}
					return c.ExpectClosed(x.wait)
				}
				if rawframe.IsClosed(err) {
					return nil
				}
				return err
			}},
		responseTest("coord/5/auth/bad-proof", "§5, inv. 4: a WORKLOAD_RESPONSE whose proof does not verify is fatal AUTHENTICATION_FAILED", coordwire.AuthenticationFailed,
			func(x *target, ch *coordwire.WorkloadChallenge) (*coordwire.WorkloadResponse, error) {
				r := rawframe.SignResponse(ch, x.keys[0], rawframe.ScopeImage(coordwire.ScopeWorkRead), future())
				r.WorkloadProof[5] ^= 0x40
				return r, nil
			}),
		responseTest("coord/5/auth/unknown-key", "§5: a key the server's registry does not hold is fatal AUTHENTICATION_FAILED", coordwire.AuthenticationFailed,
			func(x *target, ch *coordwire.WorkloadChallenge) (*coordwire.WorkloadResponse, error) {
				k, err := keystore.WorkloadKeyFromSeed(make32(9))
				if err != nil {
					return nil, err
				}
				return rawframe.SignResponse(ch, k, rawframe.ScopeImage(coordwire.ScopeWorkRead), future()), nil
			}),
		responseTest("coord/5/auth/transcript-mismatch", "§5, inv. 4: a proof over another channel binding (an altered transcript) is fatal AUTHENTICATION_FAILED", coordwire.AuthenticationFailed,
			func(x *target, ch *coordwire.WorkloadChallenge) (*coordwire.WorkloadResponse, error) {
				alt := *ch
				alt.ChannelBinding[0] ^= 1
				return rawframe.SignResponse(&alt, x.keys[0], rawframe.ScopeImage(coordwire.ScopeWorkRead), future()), nil
			}),
		responseTest("coord/5/auth/nonce-replay", "§5, inv. 4: a proof over another server nonce (a replayed response) is fatal AUTHENTICATION_FAILED", coordwire.AuthenticationFailed,
			func(x *target, ch *coordwire.WorkloadChallenge) (*coordwire.WorkloadResponse, error) {
				alt := *ch
				alt.ServerNonce[3] ^= 1
				return rawframe.SignResponse(&alt, x.keys[0], rawframe.ScopeImage(coordwire.ScopeWorkRead), future()), nil
			}),
		responseTest("coord/5/auth/expired-request", "B.2: a requested expiry in the past is fatal AUTHENTICATION_FAILED", coordwire.AuthenticationFailed,
			func(x *target, ch *coordwire.WorkloadChallenge) (*coordwire.WorkloadResponse, error) {
				return rawframe.SignResponse(ch, x.keys[0], rawframe.ScopeImage(coordwire.ScopeWorkRead), uint64(time.Now().Add(-time.Hour).Unix())), nil
			}),
		responseTest("coord/6/scope/unknown-bit", "§6, inv. 4: a requested scope with an unknown bit (0x40) is fatal before the proof is checked", coordwire.AuthenticationFailed,
			func(x *target, ch *coordwire.WorkloadChallenge) (*coordwire.WorkloadResponse, error) {
				return rawframe.SignResponse(ch, x.keys[0], rawframe.ScopeImage(0x41), future()), nil
			}),
		responseTest("coord/6/scope/wrong-length", "§6: a requested scope image of 4 bytes (not exactly 8) is fatal", coordwire.AuthenticationFailed,
			func(x *target, ch *coordwire.WorkloadChallenge) (*coordwire.WorkloadResponse, error) {
				return rawframe.SignResponse(ch, x.keys[0], []byte{0, 0, 0, 1}, future()), nil
			}),
		responseTest("coord/6/scope/empty", "§6: an empty requested scope is refused", coordwire.AuthenticationFailed,
			func(x *target, ch *coordwire.WorkloadChallenge) (*coordwire.WorkloadResponse, error) {
				return rawframe.SignResponse(ch, x.keys[0], rawframe.ScopeImage(0), future()), nil
			}),
		{Name: "coord/5/hello-ok/fields", Level: MUST, Desc: "§5, §12: COORD_HELLO_OK repeats the challenge's incarnation, grants the key, advertises at least 30 days of result retention and carries a certificate valid under the witness pin for its coordinator, epoch and incarnation",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				ok, ch := s.ok, s.Challenge()
				if ok.IncarnationID != ch.ServerIncarnation {
					return failf("HELLO_OK incarnation differs from the challenge's")
				}
				if ok.OperationResultRetentionSecs < 2_592_000 {
					return failf("operation_result_retention_secs %d, below 2,592,000", ok.OperationResultRetentionSecs)
				}
				if ok.WorkloadGrant.AuthorityFingerprint != x.authorityPin {
					return failf("grant's authority fingerprint is not the pinned one")
				}
				if ok.WorkloadGrant.EffectiveScope == 0 {
					return failf("empty effective scope granted")
				}
				c := ok.ActivationCertificate
				if c.CoordinatorID != ok.CoordinatorID || c.AuthorityEpoch != ok.AuthorityEpoch || c.IncarnationID != ok.IncarnationID {
					return failf("certificate's coordinator/epoch/incarnation differ from COORD_HELLO_OK's")
				}
				if c.ExpiresAt-c.IssuedAt > 60 {
					return failf("certificate lasts %d s, above 60 (§12)", c.ExpiresAt-c.IssuedAt)
				}
				return nil
			}},
		{Name: "coord/6/scope/effective-is-intersection", Level: MUST, Desc: "§6: the effective scope is the intersection of the request and the key's grant: requesting WORK_READ alone grants WORK_READ alone",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connect(ctx, connOpts{scope: coordwire.ScopeWorkRead})
				if err != nil {
					return err
				}
				defer s.Close()
				if g := s.ok.WorkloadGrant.EffectiveScope; g != coordwire.ScopeWorkRead {
					return failf("effective scope %#x, want WORK_READ only", uint64(g))
				}
				return nil
			}},
		{Name: "coord/12/certificate-guard", Level: MUST, Desc: "§4, §12: a request carrying the guard derived from COORD_HELLO_OK's certificate (SHA-256 of its fencing token) is served",
			Run: func(ctx context.Context, x *target) error {
				s, err := x.connectDefault(ctx)
				if err != nil {
					return err
				}
				defer s.Close()
				g := cert.Guard(&s.ok.ActivationCertificate)
				m := &coordwire.GetOperationResult{RequestID: s.NextRequestID(), Guard: g, OperationID: coordwire.NewOperationID()}
				if err := s.Send(m); err != nil {
					return err
				}
				_, err = rawframe.ExpectReply[*coordwire.OperationResultFrame](s.Conn, m.RequestID, x.wait)
				return err
			}},
	}
}

func helloMut(mut func(h *coordwire.CoordHello)) *coordwire.CoordHello {
	h := rawframe.NewHello()
	mut(h)
	return h
}

func make32(b byte) []byte {
	s := make([]byte, 32)
	for i := range s {
		s[i] = b + byte(i)
	}
	return s
}
