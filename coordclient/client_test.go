package coordclient_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/coordwire/edstrict"
)

// wantErr checks err's code and sentinel through the public error API.
func wantErr(t *testing.T, err error, code coordwire.ErrorCode, sentinel error) *coordclient.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v / %v", code, sentinel)
	}
	var e *coordclient.Error
	if !errors.As(err, &e) {
		t.Fatalf("%v (%T) is not a *coordclient.Error", err, err)
	}
	if code != 0 && coordwire.CodeOf(err) != code {
		t.Fatalf("CodeOf(%v) = %v, want %v", err, coordwire.CodeOf(err), code)
	}
	if code != 0 && !errors.Is(err, code) {
		t.Fatalf("errors.Is(%v, %v) = false", err, code)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Fatalf("errors.Is(%v, %v) = false", err, sentinel)
	}
	return e
}

func objectRef(t *testing.T, r *coordclient.Result) coordwire.ObjectRef {
	t.Helper()
	ref, ok := r.ObjectRef()
	if !ok {
		t.Fatalf("result %v has no OBJECT_REF", r.Tag())
	}
	return ref
}

func TestCommandOverUnixSocket(t *testing.T) {
	s := newServer(t)
	c := dial(t, s, config())
	ctx := tctx(t)
	id := coordwire.NewObjectiveID()
	r, err := c.Command(ctx, coordclient.CreateObjective(id, 1, []byte("goal")))
	if err != nil {
		t.Fatal(err)
	}
	want := coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id}
	if diff := cmp.Diff(want, objectRef(t, r)); diff != "" {
		t.Fatal(diff)
	}
	r, err = c.Command(ctx, coordclient.UpdateObjective(id, 1, []byte("goal 2"), coordclient.ObjectiveAt(id, 1)))
	if err != nil || !r.Succeeded() {
		t.Fatalf("update: %v %v", r, err)
	}
	sess := c.Session()
	s.mu.Lock()
	a := s.auth
	s.mu.Unlock()
	if sess.HelloOK.CoordinatorID != a.coord || sess.Guard != cert.Guard(&sess.Certificate) || !sess.Alive ||
		sess.HelloOK.WorkloadGrant.EffectiveScope != coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand {
		t.Fatalf("session %+v", sess)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCommandOverTLS13(t *testing.T) {
	s, cliTLS := newTLSServer(t)
	cfg := config()
	cfg.TLS = cliTLS
	c := dial(t, s, cfg)
	r, err := c.Command(tctx(t), coordclient.ChangeRetention(coordwire.MinOperationResultRetentionSecs, 1<<30, 1<<30))
	if err != nil || !r.None() {
		t.Fatalf("%v %v", r, err)
	}
}

// TLS below 1.3 or without the coordinator ALPN is refused.
func TestTLSRefusesOtherALPN(t *testing.T) {
	srvTLS, cliTLS := selfSignedTLS(t)
	srvTLS.NextProtos = []string{"h2"}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = nc.(interface{ Handshake() error }).Handshake(); time.Sleep(time.Second); nc.Close() }()
		}
	}()
	cfg := config()
	cfg.TLS = cliTLS
	_, err = coordclient.Dial(tctx(t), "tls:"+ln.Addr().String(), cfg)
	if err == nil {
		t.Fatal("dialled a server without the coordinator ALPN")
	}
}

func TestHandshakeRefusals(t *testing.T) {
	cases := []struct {
		name     string
		setup    func(s *server, cfg *coordclient.Config)
		code     coordwire.ErrorCode
		sentinel error
		cause    error
	}{
		{"bad authority pin", func(s *server, cfg *coordclient.Config) {
			cfg.AuthorityFingerprint = edstrict.KeyID(otherKey.Public())
		}, coordwire.AuthenticationFailed, nil, nil},
		{"bad witness pin", func(s *server, cfg *coordclient.Config) {
			cfg.WitnessPublicKey = rogueKey.Public()
		}, coordwire.AuthenticationFailed, nil, cert.ErrWitnessKeyID},
		{"certificate from another witness", func(s *server, cfg *coordclient.Config) {
			s.set(func(s *server) { s.witness = rogueKey })
		}, coordwire.AuthenticationFailed, nil, cert.ErrWitnessKeyID},
		{"bad certificate signature", func(s *server, cfg *coordclient.Config) {
			s.set(func(s *server) {
				s.tamper = func(ok *coordwire.CoordHelloOK) { ok.ActivationCertificate.Signature[0] ^= 1 }
			})
		}, coordwire.AuthenticationFailed, nil, cert.ErrSignature},
		{"certificate epoch differs from HELLO_OK", func(s *server, cfg *coordclient.Config) {
			s.set(func(s *server) { s.tamper = func(ok *coordwire.CoordHelloOK) { ok.AuthorityEpoch++ } })
		}, coordwire.AuthenticationFailed, nil, cert.ErrHelloOKMismatch},
		{"certificate coordinator differs from HELLO_OK", func(s *server, cfg *coordclient.Config) {
			s.set(func(s *server) { s.tamper = func(ok *coordwire.CoordHelloOK) { ok.CoordinatorID[0] ^= 1 } })
		}, coordwire.AuthenticationFailed, nil, cert.ErrHelloOKMismatch},
		{"certificate incarnation differs from HELLO_OK", func(s *server, cfg *coordclient.Config) {
			s.set(func(s *server) {
				s.certTweak = func(c *coordwire.ActivationCertificate) { c.IncarnationID[0] ^= 1 }
			})
		}, coordwire.AuthenticationFailed, nil, cert.ErrHelloOKMismatch},
		{"expired certificate", func(s *server, cfg *coordclient.Config) {
			s.set(func(s *server) {
				s.certTweak = func(c *coordwire.ActivationCertificate) { c.IssuedAt -= 100; c.ExpiresAt -= 100 }
			})
		}, coordwire.StaleAuthority, coordclient.ErrStaleAuthority, cert.ErrExpired},
		{"certificate lifetime above 60 s", func(s *server, cfg *coordclient.Config) {
			s.set(func(s *server) {
				s.certTweak = func(c *coordwire.ActivationCertificate) { c.ExpiresAt = c.IssuedAt + 61 }
			})
		}, coordwire.AuthenticationFailed, nil, cert.ErrLifetime},
		{"unregistered workload key", func(s *server, cfg *coordclient.Config) {
			cfg.WorkloadKey = rogueKey
		}, coordwire.AuthenticationFailed, nil, nil},
		{"grant scope wider than requested", func(s *server, cfg *coordclient.Config) {
			s.set(func(s *server) {
				s.tamper = func(ok *coordwire.CoordHelloOK) { ok.WorkloadGrant.EffectiveScope |= coordwire.ScopeAdmin }
			})
		}, coordwire.AuthenticationFailed, nil, nil},
		// §5 names VERSION_INCOMPATIBLE for a major.minor mismatch and
		// §3.2 MALFORMED_MESSAGE for a zero or over-hard-cap limit; only
		// the checks without a code in the spec stay the generic refusal.
		{"HELLO_OK of another minor version", func(s *server, cfg *coordclient.Config) {
			s.set(func(s *server) { s.tamper = func(ok *coordwire.CoordHelloOK) { ok.ProtocolMinor = 2 } })
		}, coordwire.VersionIncompatible, nil, nil},
		{"HELLO_OK selecting zero page records", func(s *server, cfg *coordclient.Config) {
			s.set(func(s *server) { s.tamper = func(ok *coordwire.CoordHelloOK) { ok.Limits.MaxPageRecords = 0 } })
		}, coordwire.MalformedMessage, nil, nil},
		{"HELLO_OK selecting typed payload bytes over the hard cap", func(s *server, cfg *coordclient.Config) {
			s.set(func(s *server) {
				s.tamper = func(ok *coordwire.CoordHelloOK) {
					ok.Limits.MaxTypedPayloadBytes = coordwire.HardMaxTypedPayloadBytes + 1
				}
			})
		}, coordwire.MalformedMessage, nil, nil},
		{"HELLO_OK selecting more than the offer", func(s *server, cfg *coordclient.Config) {
			s.set(func(s *server) { s.tamper = func(ok *coordwire.CoordHelloOK) { ok.Limits.MaxEventCreditCount++ } })
		}, coordwire.AuthenticationFailed, nil, nil},
		{"required capability missing", func(s *server, cfg *coordclient.Config) {
			s.set(func(s *server) {
				s.tamper = func(ok *coordwire.CoordHelloOK) { ok.NegotiatedCapabilities = 0 }
			})
			cfg.OfferedCapabilities, cfg.RequiredCapabilities = coordwire.CapSignals, coordwire.CapSignals
		}, coordwire.AuthenticationFailed, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t)
			cfg := config()
			tc.setup(s, &cfg)
			c, err := coordclient.Dial(tctx(t), s.addr, cfg)
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			e := wantErr(t, err, tc.code, tc.sentinel)
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Fatalf("%v does not match %v", err, tc.cause)
			}
			if errors.Is(err, coordclient.ErrQuarantined) {
				t.Fatalf("%v is a quarantine", err)
			}
			if e.Op != "handshake" {
				t.Fatalf("op %q", e.Op)
			}
		})
	}
}

// A certificate whose issued_at is a little ahead of the client's clock
// (witness clock ahead) is accepted; one already expired by it is not.
func TestHandshakeClockTolerance(t *testing.T) {
	s := newServer(t)
	cfg := config()
	cfg.Now = func() time.Time { return time.Now().Add(-2 * time.Second) }
	c := dial(t, s, cfg)
	c.Close()
	cfg.Now = func() time.Time { return time.Now().Add(40 * time.Second) }
	_, err := coordclient.Dial(tctx(t), s.addr, cfg)
	wantErr(t, err, coordwire.StaleAuthority, coordclient.ErrStaleAuthority)
}

func TestAuthorityMemory(t *testing.T) {
	cases := []struct {
		name   string
		first  func(*authority)
		second func(*authority)
		ok     bool
		reason string
	}{
		{"reconnect to the same activation", nil, func(a *authority) {}, true, ""},
		{"higher epoch and activation (restart)", nil, func(a *authority) {
			a.epoch++
			a.seq++
			a.incarnation = coordwire.NewIncarnationID()
			a.token = newToken()
		}, true, ""},
		{"lower epoch", func(a *authority) { a.epoch, a.seq = 5, 5 }, func(a *authority) { a.epoch, a.seq = 4, 6 }, false, "client.quarantined.lower_epoch"},
		{"lower activation sequence", func(a *authority) { a.epoch, a.seq = 5, 5 }, func(a *authority) { a.epoch, a.seq = 6, 4 }, false, "client.quarantined.lower_activation"},
		{"only the epoch advanced", func(a *authority) { a.epoch, a.seq = 5, 5 }, func(a *authority) { a.epoch = 6 }, false, "client.quarantined.inconsistent_advance"},
		{"changed coordinator id", nil, func(a *authority) {
			a.coord = coordwire.NewCoordinatorID()
			a.epoch++
			a.seq++
		}, false, "client.quarantined.coordinator_id"},
		{"same epoch, another incarnation", nil, func(a *authority) { a.incarnation = coordwire.NewIncarnationID() }, false, "client.quarantined.same_activation_differs"},
		{"same epoch, another token", nil, func(a *authority) { a.token = newToken() }, false, "client.quarantined.same_activation_differs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t)
			if tc.first != nil {
				s.setAuthority(tc.first)
			}
			mem := &coordclient.AuthorityMemory{}
			cfg := config()
			cfg.Authority = mem
			c := dial(t, s, cfg)
			before := c.Authority()
			if st, ok := mem.State(); !ok || st != before {
				t.Fatalf("memory %+v %v, want %+v", st, ok, before)
			}
			s.mu.Lock()
			orig := s.auth
			s.mu.Unlock()
			s.setAuthority(tc.second)
			waitDead(t, c)
			// The same Client reconnects on its next call...
			_, err := c.Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil))
			// ...and a new Client sharing the memory dials.
			c2, derr := coordclient.Dial(tctx(t), s.addr, cfg)
			if tc.ok {
				if err != nil || derr != nil {
					t.Fatalf("refused: %v / %v", err, derr)
				}
				c2.Close()
				st, _ := mem.State()
				if st != c.Authority() {
					t.Fatalf("memory %+v, client %+v", st, c.Authority())
				}
				return
			}
			for _, err := range []error{err, derr} {
				e := wantErr(t, err, coordwire.AuthenticationFailed, coordclient.ErrQuarantined)
				var q *coordclient.Error
				errors.As(mem.Quarantined(), &q)
				if q == nil || q.Reason != tc.reason {
					t.Fatalf("quarantine %v, want reason %s (%v)", mem.Quarantined(), tc.reason, e)
				}
			}
			if st, _ := mem.State(); st != before {
				t.Fatalf("memory changed to %+v", st)
			}
			// Sticky: the first authority is refused too until Reset.
			s.setAuthority(func(a *authority) { *a = orig })
			if _, err := coordclient.Dial(tctx(t), s.addr, cfg); !errors.Is(err, coordclient.ErrQuarantined) {
				t.Fatalf("after quarantine: %v", err)
			}
			mem.Reset()
			c3, err := coordclient.Dial(tctx(t), s.addr, cfg)
			if err != nil {
				t.Fatalf("after Reset: %v", err)
			}
			c3.Close()
		})
	}
}

// A witness key other than the remembered one quarantines, even when the
// configured pin was changed to it.
func TestAuthorityMemoryWitnessChange(t *testing.T) {
	s := newServer(t)
	cfg := config()
	c := dial(t, s, cfg)
	st := c.Authority()
	c.Close()
	st.WitnessKeyID = edstrict.KeyID(rogueKey.Public())
	cfg.Authority = coordclient.NewAuthorityMemory(&st)
	_, err := coordclient.Dial(tctx(t), s.addr, cfg)
	wantErr(t, err, coordwire.AuthenticationFailed, coordclient.ErrQuarantined)
}

func TestRenewal(t *testing.T) {
	s := newServer(t)
	s.set(func(s *server) { s.lifetime = 3 })
	c := dial(t, s, config())
	ctx := tctx(t)
	first := c.Session().Certificate
	for i := 0; i < 4; i++ { // past the first certificate's expiry
		time.Sleep(time.Second)
		s.renew(nil)
	}
	time.Sleep(300 * time.Millisecond)
	sess := c.Session()
	if !sess.Alive || sess.Certificate.ExpiresAt <= first.ExpiresAt {
		t.Fatalf("renewal not applied: alive %v expires %d → %d", sess.Alive, first.ExpiresAt, sess.Certificate.ExpiresAt)
	}
	if sess.Guard != cert.Guard(&first) {
		t.Fatal("renewal changed the guard")
	}
	if _, err := c.Command(ctx, coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil)); err != nil {
		t.Fatal(err)
	}
	if n := acceptedConns(s); n != 1 {
		t.Fatalf("%d connections, want 1 (renewals keep the connection)", n)
	}
}

// waitDead waits until the client noticed that its connection closed.
func waitDead(t *testing.T, c *coordclient.Client) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.Session().Alive {
		if time.Now().After(deadline) {
			t.Fatal("connection still alive")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func acceptedConns(s *server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Without a renewal the client closes the connection at expiry; the next
// call reconnects.
func TestCloseAtExpiry(t *testing.T) {
	s := newServer(t)
	s.set(func(s *server) { s.lifetime = 1 })
	c := dial(t, s, config())
	deadline := time.Now().Add(3 * time.Second)
	for c.Session().Alive {
		if time.Now().After(deadline) {
			t.Fatal("connection outlived its certificate")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.set(func(s *server) { s.lifetime = 30 })
	if _, err := c.Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil)); err != nil {
		t.Fatal(err)
	}
	if n := acceptedConns(s); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

func TestBadRenewalRefused(t *testing.T) {
	cases := []struct {
		name  string
		tweak func(c *coordwire.ActivationCertificate) *testKey
	}{
		{"another token", func(c *coordwire.ActivationCertificate) *testKey { c.FencingToken[0] ^= 1; return witnessKey }},
		{"another incarnation", func(c *coordwire.ActivationCertificate) *testKey { c.IncarnationID[0] ^= 1; return witnessKey }},
		{"earlier expiry", func(c *coordwire.ActivationCertificate) *testKey {
			c.IssuedAt -= 10
			c.ExpiresAt -= 5
			return witnessKey
		}},
		{"another witness key", func(c *coordwire.ActivationCertificate) *testKey { return rogueKey }},
		{"bad signature", func(c *coordwire.ActivationCertificate) *testKey { return nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t)
			c := dial(t, s, config())
			next := c.Session().Certificate
			k := tc.tweak(&next)
			if k != nil {
				cert.Sign(&next, k.priv)
			} else {
				next.Signature[5] ^= 1
			}
			s.renew(&next)
			deadline := time.Now().Add(3 * time.Second)
			for c.Session().Alive {
				if time.Now().After(deadline) {
					t.Fatal("bad renewal accepted")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if c.Session().Certificate != (coordwire.ActivationCertificate{}) && c.Session().Certificate == next {
				t.Fatal("bad certificate became current")
			}
		})
	}
}

func TestConcurrentCommandsOneConnection(t *testing.T) {
	s := newServer(t)
	s.set(func(s *server) {
		s.delay = func(m *coordwire.CoordCommand) time.Duration {
			return time.Duration(m.OperationID[0]%20) * time.Millisecond // replies out of order
		}
	})
	cfg := config()
	cfg.MaxOutstanding = 16
	c := dial(t, s, cfg)
	ctx := tctx(t)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := coordwire.NewObjectiveID()
			r, err := c.Command(ctx, coordclient.CreateObjective(id, 1, []byte(fmt.Sprint(i))))
			if err != nil {
				errs <- err
				return
			}
			if ref, _ := r.ObjectRef(); ref.ID != id {
				errs <- fmt.Errorf("reply for %x delivered to %v", ref.ID, id)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	cmds, _, maxPending := s.counts()
	if cmds != n || maxPending < 2 || maxPending > 16 || acceptedConns(s) != 1 {
		t.Fatalf("commands %d, most outstanding %d (want 2..16), connections %d", cmds, maxPending, acceptedConns(s))
	}
}

// A lost reply is answered by a lookup of the same id on a new
// connection, and the id being admitted, by the same command once more,
// which the coordinator answers as an exact duplicate (nothing admitted
// twice).
func TestLostReplyLooksUpSameID(t *testing.T) {
	s := newServer(t)
	var dropped coordwire.OperationID
	s.set(func(s *server) {
		s.dropReply = func(m *coordwire.CoordCommand) bool {
			if dropped.IsZero() {
				dropped = m.OperationID
				return true
			}
			return false
		}
	})
	c := dial(t, s, config())
	id := coordwire.NewObjectiveID()
	cmd := coordclient.CreateObjective(id, 1, []byte("x"))
	r, err := c.Command(tctx(t), cmd)
	if err != nil {
		t.Fatal(err)
	}
	if ref := objectRef(t, r); ref.ID != id || dropped != cmd.OperationID() || r.OperationID != cmd.OperationID() {
		t.Fatalf("result %v for op %v, dropped %v", ref, r.OperationID, dropped)
	}
	cmds, lookups, _ := s.counts()
	if cmds != 2 || lookups != 1 || acceptedConns(s) != 2 {
		t.Fatalf("commands %d lookups %d connections %d, want 2 1 2", cmds, lookups, acceptedConns(s))
	}
}

// A lookup after a lost reply refused with a fatal AUTHORITY_FENCED (the
// authority ended meanwhile) is the lookup's refusal: the command's
// outcome stays unknown (ErrConnectionLost), never "fenced, nothing
// admitted" — the command was admitted before its reply was lost.
func TestLostReplyThenFencedLookupIsUnknown(t *testing.T) {
	s := newServer(t)
	c := dial(t, s, config())
	var once sync.Once
	s.set(func(s *server) {
		s.fenceLookups = 1 << 20
		s.dropReply = func(m *coordwire.CoordCommand) bool {
			drop := false
			once.Do(func() { drop = true })
			return drop
		}
	})
	_, err := c.Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("admitted, reply lost")))
	if !errors.Is(err, coordclient.ErrConnectionLost) {
		t.Fatalf("Command = %v, want ErrConnectionLost (the outcome is unknown)", err)
	}
}

// §8 "another digest conflicts", after a lost reply too: the id of a
// command whose reply was lost holds another command (the id was reused
// with another payload). The lookup answers that command's SUCCEEDED,
// which is not this command's outcome: Command confirms with the same
// command, and the coordinator's OPERATION_CONFLICT is what it returns.
// (Found by the robustness test's history check: the client used to
// return the lookup's SUCCEEDED for a command never admitted.)
func TestLostReplyOfAReusedIDIsAConflict(t *testing.T) {
	s := newServer(t)
	c := dial(t, s, config())
	obj := coordwire.NewObjectiveID()
	first := coordclient.CreateObjective(obj, 1, []byte("first"))
	stored, err := c.Command(tctx(t), first)
	if err != nil {
		t.Fatal(err)
	}
	second := coordclient.UpdateObjective(obj, 1, []byte("second")).WithOperationID(first.OperationID())
	var once sync.Once
	s.set(func(s *server) {
		s.dropReply = func(m *coordwire.CoordCommand) bool {
			drop := false
			once.Do(func() { drop = true })
			return drop
		}
	})
	r, err := c.Command(tctx(t), second)
	wantErr(t, err, coordwire.OperationConflict, coordclient.ErrOperationConflict)
	if r != nil {
		t.Fatalf("a conflict returned the result %+v (the stored one: %+v)", r.Operation, stored.Operation)
	}
	if cmds, lookups, _ := s.counts(); cmds != 3 || lookups != 1 {
		t.Fatalf("commands %d lookups %d, want 3 1", cmds, lookups)
	}
	// A tombstone names its command's digest: no resend is needed.
	end := coordclient.EndBinding(coordwire.NewBindingID(), coordwire.EndCompleted)
	if _, err := c.Command(tctx(t), end); err != nil && !errors.Is(err, coordclient.ErrTombstoned) {
		t.Fatal(err)
	}
	other := coordclient.EndBinding(coordwire.NewBindingID(), coordwire.EndCompleted).WithOperationID(end.OperationID())
	once = sync.Once{}
	_, err = c.Command(tctx(t), other)
	wantErr(t, err, coordwire.OperationConflict, coordclient.ErrOperationConflict)
	if cmds, lookups, _ := s.counts(); cmds != 5 || lookups != 2 {
		t.Fatalf("commands %d lookups %d, want 5 2", cmds, lookups)
	}
}

// When the lookup says UNKNOWN the client does not resend on its own;
// submitting the same Cmd again is the caller's decision and uses the
// same id.
func TestUnknownAfterLossIsNotResent(t *testing.T) {
	s := newServer(t)
	s.set(func(s *server) { s.loseNext = true })
	c := dial(t, s, config())
	cmd := coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil)
	r, err := c.Command(tctx(t), cmd)
	wantErr(t, err, 0, coordclient.ErrUnknownOperation)
	if r == nil || r.Tag() != coordwire.OperationUnknown {
		t.Fatalf("result %v", r)
	}
	if cmds, lookups, _ := s.counts(); cmds != 1 || lookups != 1 {
		t.Fatalf("commands %d lookups %d, want 1 1", cmds, lookups)
	}
	r, err = c.Command(tctx(t), cmd)
	if err != nil || r.OperationID != cmd.OperationID() {
		t.Fatalf("explicit resend: %v %v", r, err)
	}
}

func TestOutcomes(t *testing.T) {
	s := newServer(t)
	c := dial(t, s, config())
	ctx := tctx(t)

	// Exact duplicate: the stored result.
	cmd := coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("a"))
	r1, err := c.Command(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Command(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r1.Operation, r2.Operation); diff != "" {
		t.Fatalf("duplicate differs: %s", diff)
	}
	// Same id, other payload: conflict, request-scoped.
	other := coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("b")).WithOperationID(cmd.OperationID())
	_, err = c.Command(ctx, other)
	e := wantErr(t, err, coordwire.OperationConflict, coordclient.ErrOperationConflict)
	if !e.Remote {
		t.Fatal("conflict not marked remote")
	}
	// REJECTED carries the stored code.
	_, err = c.Command(ctx, coordclient.CancelRun(coordwire.NewRunID()))
	wantErr(t, err, coordwire.NotFound, coordclient.ErrRejected)
	// INDETERMINATE.
	r, err := c.Command(ctx, coordclient.PauseRun(coordwire.NewRunID()))
	wantErr(t, err, 0, coordclient.ErrIndeterminate)
	if r.Tag() != coordwire.OperationIndeterminate {
		t.Fatal(r.Tag())
	}
	// PENDING, then WaitFinal.
	pcmd := coordclient.ResumeRun(coordwire.NewRunID())
	r, err = c.Command(ctx, pcmd)
	if err != nil || r.Tag() != coordwire.OperationPending {
		t.Fatalf("%v %v", r, err)
	}
	time.AfterFunc(200*time.Millisecond, func() { s.finish(pcmd.OperationID()) })
	r, err = c.WaitFinal(ctx, pcmd.OperationID())
	if err != nil || !r.Succeeded() || !r.None() {
		t.Fatalf("WaitFinal: %v %v", r, err)
	}
	// STARTED and DOCUMENT payloads decode to their types.
	start := coordwire.StartRun{ObjectiveID: coordwire.NewObjectiveID(), RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(),
		ExecutorSchema: 1, PendingBindingID: coordwire.NewPendingBindingID(), OwnerIncarnation: coordwire.NewIncarnationID(), TerminalGroup: []byte("g")}
	r, err = c.Command(ctx, coordclient.StartRun(start))
	if got, ok := r.Started(); err != nil || !ok || got.RunID != start.RunID || got.WorkSessionID != start.WorkSessionID || !got.BindingID.IsZero() {
		t.Fatalf("STARTED: %+v %v", got, err)
	}
	r, err = c.Command(ctx, coordclient.AckSignal(coordwire.NewSignalID(), "noted"))
	if doc, ok := r.Document(); err != nil || !ok || doc.Schema != 1 || string(doc.Payload) != "noted" {
		t.Fatalf("DOCUMENT: %+v %v", doc, err)
	}
	// TOMBSTONED keeps the final state.
	r, err = c.Command(ctx, coordclient.EndBinding(coordwire.NewBindingID(), coordwire.EndReason(0)))
	wantErr(t, err, 0, coordclient.ErrTombstoned)
	if r.Operation.FinalState != coordwire.OperationSucceeded || !r.Final() {
		t.Fatalf("tombstone %+v", r.Operation)
	}
	// Lookup of a never-admitted id.
	_, err = c.OperationResult(ctx, coordwire.NewOperationID())
	wantErr(t, err, 0, coordclient.ErrUnknownOperation)
	// The connection survived every request-scoped outcome.
	if acceptedConns(s) != 1 || !c.Session().Alive {
		t.Fatal("a request-scoped outcome closed the connection")
	}
}

func TestStaleAuthorityThenRetry(t *testing.T) {
	s := newServer(t)
	c := dial(t, s, config())
	s.set(func(s *server) { s.staleNext = true })
	cmd := coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil)
	_, err := c.Command(tctx(t), cmd)
	wantErr(t, err, coordwire.StaleAuthority, coordclient.ErrStaleAuthority)
	r, err := c.Command(tctx(t), cmd)
	if err != nil || r.OperationID != cmd.OperationID() {
		t.Fatalf("retry: %v %v", r, err)
	}
}

func TestCancellation(t *testing.T) {
	s := newServer(t)
	s.set(func(s *server) {
		s.delay = func(m *coordwire.CoordCommand) time.Duration {
			if m.Kind == coordwire.CommandCreateObjective {
				return time.Second
			}
			return 0
		}
	})
	c := dial(t, s, config())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Command(ctx, coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 900*time.Millisecond {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
	wantErr(t, err, 0, nil)
	// The late reply is discarded; the connection keeps working.
	if _, err := c.Command(tctx(t), coordclient.ChangeRetention(coordwire.MinOperationResultRetentionSecs, 1, 1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if err := c.Ping(tctx(t)); err != nil || acceptedConns(s) != 1 {
		t.Fatalf("after the late reply: %v, %d connections", err, acceptedConns(s))
	}

	// Dial honours its context against a server that never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			defer nc.Close()
		}
	}()
	_, cliTLS := selfSignedTLS(t)
	cfg := config()
	cfg.TLS = cliTLS
	dctx, dcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer dcancel()
	start = time.Now()
	if _, err := coordclient.Dial(dctx, "tls:"+ln.Addr().String(), cfg); err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("Dial: %v after %v", err, time.Since(start))
	}
}

// Close ends calls in progress with ErrClosed and waits for the client's
// goroutines.
func TestCloseDuringCommand(t *testing.T) {
	s := newServer(t)
	s.set(func(s *server) { s.delay = func(*coordwire.CoordCommand) time.Duration { return 2 * time.Second } })
	c := dial(t, s, config())
	done := make(chan error, 1)
	go func() {
		_, err := c.Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		wantErr(t, err, 0, coordclient.ErrClosed)
	case <-time.After(time.Second):
		t.Fatal("Command outlived Close")
	}
	_, err := c.Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil))
	wantErr(t, err, 0, coordclient.ErrClosed)
}

// A request is never sent under a certificate that expired by the client's
// clock: the connection is closed (COORD_ERROR STALE_AUTHORITY first) and
// the command is not written.
func TestNoRequestUnderExpiredCertificate(t *testing.T) {
	s := newServer(t)
	var mu sync.Mutex
	skew := time.Duration(0)
	cfg := config()
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(skew) }
	c := dial(t, s, cfg)
	mu.Lock()
	skew = time.Minute
	mu.Unlock()
	_, err := c.Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil))
	wantErr(t, err, coordwire.StaleAuthority, coordclient.ErrStaleAuthority)
	if cmds, _, _ := s.counts(); cmds != 0 {
		t.Fatalf("%d commands reached the server", cmds)
	}
	waitErrs(t, s, coordwire.StaleAuthority)
}

func waitErrs(t *testing.T, s *server, want coordwire.ErrorCode) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		for _, c := range s.errs() {
			if c == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server got COORD_ERROR %v, want %v", s.errs(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Frames the client never asked for close the connection with
// PROTOCOL_ERROR.
func TestUnexpectedFramesAreFatal(t *testing.T) {
	cases := map[string]coordwire.Frame{
		"reply for no request":                &coordwire.CoordCommandResult{RequestID: 77, Operation: coordwire.OperationResult{Tag: coordwire.OperationUnknown}},
		"event":                               &coordwire.Ack{RequestID: 1},
		"request-scoped error for no request": &coordwire.CoordError{RequestID: 9, Code: coordwire.NotFound, Message: "x"},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			s := newServer(t)
			s.set(func(s *server) {
				s.afterHello = func(c *sconn) {
					time.AfterFunc(50*time.Millisecond, func() { _ = c.send(f) })
				}
			})
			c := dial(t, s, config())
			waitDead(t, c)
			waitErrs(t, s, coordwire.ProtocolError)
		})
	}
}

// A fatal COORD_ERROR without a request id closes the connection; the next
// call reconnects.
func TestFatalErrorWithoutRequestID(t *testing.T) {
	s := newServer(t)
	s.set(func(s *server) {
		s.afterHello = func(c *sconn) {
			time.AfterFunc(50*time.Millisecond, func() {
				_ = c.send(&coordwire.CoordError{Code: coordwire.AuthorityFenced, Message: "fenced"})
				c.nc.Close()
			})
		}
	})
	c := dial(t, s, config())
	waitDead(t, c)
	s.set(func(s *server) { s.afterHello = nil })
	if _, err := c.Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil)); err != nil {
		t.Fatal(err)
	}
}

// The coordinator restarts (higher epoch, new incarnation) while a
// command's reply is in flight: the client reconnects, the remembered
// authority accepts the higher epoch, and the same id is looked up under
// the new guard.
func TestLostReplyAcrossRestart(t *testing.T) {
	s := newServer(t)
	var once sync.Once
	s.set(func(s *server) {
		s.dropReply = func(m *coordwire.CoordCommand) bool {
			dropped := false
			once.Do(func() { // under s.mu: the next handshake presents a new activation
				s.auth.epoch++
				s.auth.seq++
				s.auth.incarnation = coordwire.NewIncarnationID()
				s.auth.token = newToken()
				dropped = true
			})
			return dropped
		}
	})
	mem := &coordclient.AuthorityMemory{}
	cfg := config()
	cfg.Authority = mem
	c := dial(t, s, cfg)
	before, _ := mem.State()
	cmd := coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil)
	r, err := c.Command(tctx(t), cmd)
	if err != nil || !r.Succeeded() {
		t.Fatalf("%v %v", r, err)
	}
	after, _ := mem.State()
	if after.AuthorityEpoch != before.AuthorityEpoch+1 || after.IncarnationID == before.IncarnationID || c.Authority() != after {
		t.Fatalf("authority %+v → %+v", before, after)
	}
	if cmds, lookups, _ := s.counts(); cmds != 2 || lookups != 1 {
		t.Fatalf("commands %d lookups %d, want 2 1 (the lookup, then the same command confirming)", cmds, lookups)
	}
}

// A call with a context that is already done returns its error at once and
// never touches a healthy connection: without the up-front check the
// select could take a slot, start the write and close the connection.
func TestAlreadyCancelledContextLeavesConnectionAlone(t *testing.T) {
	s := newServer(t)
	c := dial(t, s, config())
	if err := c.Ping(tctx(t)); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 200; i++ {
		_, err := c.Command(done, coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, nil))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("call %d: %v, want context.Canceled", i, err)
		}
	}
	if err := c.Ping(tctx(t)); err != nil || acceptedConns(s) != 1 {
		t.Fatalf("after cancelled calls: %v, %d connections", err, acceptedConns(s))
	}
}
