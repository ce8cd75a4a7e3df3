package witness_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/internal/redact"
	"github.com/phuxcoord/coord/witness"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func wantCode(t *testing.T, err error, code witness.ErrorCode) {
	t.Helper()
	if !errors.Is(err, code) {
		t.Fatalf("got %v, want %v", err, code)
	}
}

func TestActivateRenewRelinquish(t *testing.T) {
	tw := startWitness(t, witness.Config{Lifetime: 20 * time.Second})
	ctx := ctxT(t)
	coord := coordwire.NewCoordinatorID()
	key := newSigner(t)
	c := tw.client(t, coord, key)

	inc := coordwire.NewIncarnationID()
	g, err := c.Activate(ctx, 5, inc)
	if err != nil {
		t.Fatal(err)
	}
	ct := g.Certificate()
	if ct.AuthorityEpoch != 5 || ct.ActivationSequence != 1 || ct.IncarnationID != inc || ct.CoordinatorID != coord {
		t.Fatalf("certificate fields: %+v", ct)
	}
	if cert.Lifetime(&ct) != 20 {
		t.Fatalf("lifetime %d", cert.Lifetime(&ct))
	}
	if err := cert.Verify(&ct, tw.id.PublicKey, tw.id.KeyID, time.Now()); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.LeaseLive() || st.LastAuthorityEpoch != 5 || st.ActivationSequence != 1 ||
		st.LeaseTokenSHA256 != g.Guard().FencingTokenSHA256 || st.AuthorityFingerprint != fingerprint(key) {
		t.Fatalf("status %+v", st)
	}

	// While the lease lives, no further activation, whatever the epoch.
	_, err = c.Activate(ctx, 6, coordwire.NewIncarnationID())
	wantCode(t, err, witness.LeaseHeld)

	g2, err := c.Renew(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if g2.Guard() != g.Guard() || g2.Certificate().IncarnationID != inc {
		t.Fatal("renewal changed the activation")
	}
	if err := c.Relinquish(ctx, g2); err != nil {
		t.Fatal(err)
	}
	// A lost reply is retried: relinquishing a spent token succeeds again.
	if err := c.Relinquish(ctx, g2); err != nil {
		t.Fatal(err)
	}
	_, err = c.Renew(ctx, g2)
	wantCode(t, err, witness.NoLease)

	_, err = c.Activate(ctx, 5, coordwire.NewIncarnationID())
	wantCode(t, err, witness.EpochNotGreater)
	g3, err := c.Activate(ctx, 6, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	if g3.Certificate().ActivationSequence != 2 || g3.Certificate().FencingToken == g.Certificate().FencingToken {
		t.Fatalf("next activation: seq %d", g3.Certificate().ActivationSequence)
	}
	// The old token is stale.
	_, err = c.Renew(ctx, g2)
	wantCode(t, err, witness.NoLease)
}

func TestCopiedStoreAndKeyCannotActivate(t *testing.T) {
	tw := startWitness(t, witness.Config{})
	ctx := ctxT(t)
	coord := coordwire.NewCoordinatorID()
	key := newSigner(t)
	a := tw.client(t, coord, key)
	g, err := a.Activate(ctx, 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	// The copy has the same CoordinatorId, the same authority key and
	// everything the store holds (epoch, sequence, incarnation, token
	// hash — even the certificate with its token), but not the holder
	// secret that lives only in A's memory.
	b := tw.client(t, coord, key)
	_, err = b.Activate(ctx, 2, coordwire.NewIncarnationID())
	wantCode(t, err, witness.LeaseHeld)
	stolen := witness.WithoutHolderSecret(g)
	_, err = b.Renew(ctx, stolen)
	wantCode(t, err, witness.TokenMismatch)
	err = b.Relinquish(ctx, stolen)
	wantCode(t, err, witness.TokenMismatch)
	if _, err := a.Renew(ctx, g); err != nil {
		t.Fatalf("the holder cannot renew after the copy's attempts: %v", err)
	}
}

func TestExpiryAllowsNextActivation(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	tw := startWitness(t, witness.Config{Lifetime: 10 * time.Second, Now: clk.Now})
	ctx := ctxT(t)
	coord := coordwire.NewCoordinatorID()
	key := newSigner(t)
	mk := func() *witness.Client {
		c, err := witness.NewClient(witness.ClientConfig{Address: tw.addr, WitnessPublicKey: tw.id.PublicKey,
			CoordinatorID: coord, Authority: key, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := mk(), mk()
	ga, err := a.Activate(ctx, 3, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(9 * time.Second)
	_, err = b.Activate(ctx, 4, coordwire.NewIncarnationID())
	wantCode(t, err, witness.LeaseHeld)
	clk.Add(time.Second) // now == expires_at: expired
	_, err = a.Renew(ctx, ga)
	wantCode(t, err, witness.NoLease)
	gb, err := b.Activate(ctx, 4, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	if gb.Certificate().AuthorityEpoch != 4 || gb.Certificate().ActivationSequence != ga.Certificate().ActivationSequence+1 {
		t.Fatalf("epoch %d seq %d", gb.Certificate().AuthorityEpoch, gb.Certificate().ActivationSequence)
	}
	// The expired holder's token is spent: it can neither renew nor
	// relinquish the new lease.
	_, err = a.Renew(ctx, ga)
	wantCode(t, err, witness.NoLease)
}

func TestOtherCoordinatorKeyRefused(t *testing.T) {
	tw := startWitness(t, witness.Config{})
	ctx := ctxT(t)
	coord := coordwire.NewCoordinatorID()
	if _, err := tw.client(t, coord, newSigner(t)).Activate(ctx, 1, coordwire.NewIncarnationID()); err != nil {
		t.Fatal(err)
	}
	other := tw.client(t, coord, newSigner(t))
	before := stateBytes(t, tw)
	_, err := other.Activate(ctx, 100, coordwire.NewIncarnationID())
	wantCode(t, err, witness.FingerprintMismatch)
	_, err = other.Status(ctx)
	wantCode(t, err, witness.FingerprintMismatch)
	if !bytes.Equal(stateBytes(t, tw), before) {
		t.Fatal("a refused activation changed the durable witness state")
	}
}

// stateBytes returns the witness's state file as it is on disk now.
func stateBytes(t *testing.T, tw *testWitness) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tw.dir, witness.StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWrongWitnessPin(t *testing.T) {
	tw := startWitness(t, witness.Config{})
	c := newClient(t, tw.addr, newSigner(t).Public(), coordwire.NewCoordinatorID(), newSigner(t))
	if _, err := c.Activate(ctxT(t), 1, coordwire.NewIncarnationID()); !errors.Is(err, witness.ErrWitnessPin) {
		t.Fatalf("got %v", err)
	}
}

// rawConn is a hand-driven witness connection for forgery tests.
type rawConn struct {
	t     *testing.T
	c     net.Conn
	hello *witness.Hello
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("unix", addr[5:])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	f, err := witness.ReadFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	return &rawConn{t: t, c: c, hello: f.(*witness.Hello)}
}

func (r *rawConn) send(req *witness.Request) witness.Frame {
	r.t.Helper()
	if err := witness.WriteFrame(r.c, req); err != nil {
		r.t.Fatal(err)
	}
	f, err := witness.ReadFrame(r.c)
	if err != nil {
		r.t.Fatal(err)
	}
	return f
}

func signed(req *witness.Request, key edSigner, nonce redact.Secret[[32]byte]) *witness.Request {
	copy(req.AuthorityPublicKey[:], key.Public())
	req.Signature = redact.New([64]byte(key.Sign(req.SigningImage(nil, nonce.Reveal()))))
	return req
}

// renewUnknown is a RENEW for coord, which the witness has no record of,
// as request seq on its connection: refused with UNKNOWN_COORDINATOR
// (STATUS is not: it answers the floor of a coordinator without a record).
func renewUnknown(coord coordwire.CoordinatorID, seq uint64) *witness.Request {
	return &witness.Request{Op: witness.TypeRenew, CoordinatorID: coord, AuthorityEpoch: 1, IncarnationID: coordwire.IncarnationID{1},
		ActivationSequence: 1, FencingTokenSHA256: [32]byte{1}, HolderSecret: redact.New([32]byte{2}), RequestSeq: seq}
}

func wantErrFrame(t *testing.T, f witness.Frame, code witness.ErrorCode) {
	t.Helper()
	e, ok := f.(*witness.ErrorFrame)
	if !ok || e.Code != code {
		t.Fatalf("got %T %+v, want ERROR %v", f, f, code)
	}
}

func (r *rawConn) closed() bool {
	r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	_, err := r.c.Read(b[:])
	return err != nil
}

func TestForgedAndReplayedRequests(t *testing.T) {
	tw := startWitness(t, witness.Config{})
	coord := coordwire.NewCoordinatorID()
	key := newSigner(t)
	activate := func(seq uint64, epoch uint64) *witness.Request {
		return &witness.Request{Op: witness.TypeActivate, CoordinatorID: coord, AuthorityEpoch: coordwire.AuthorityEpoch(epoch),
			IncarnationID: coordwire.NewIncarnationID(), HolderSecretSHA256: [32]byte{9}, RequestSeq: seq}
	}
	before := stateBytes(t, tw)

	t.Run("bad signature", func(t *testing.T) {
		r := dialRaw(t, tw.addr)
		req := signed(activate(1, 1), key, r.hello.Nonce)
		req.Signature.Ptr()[10] ^= 1
		wantErrFrame(t, r.send(req), witness.BadSignature)
		if !r.closed() {
			t.Fatal("connection stays open after a bad signature")
		}
	})
	t.Run("tampered field", func(t *testing.T) {
		r := dialRaw(t, tw.addr)
		req := signed(activate(1, 1), key, r.hello.Nonce)
		req.AuthorityEpoch++
		wantErrFrame(t, r.send(req), witness.BadSignature)
	})
	t.Run("nonce of another connection", func(t *testing.T) {
		r1 := dialRaw(t, tw.addr)
		r2 := dialRaw(t, tw.addr)
		if r1.hello.Nonce.Reveal() == r2.hello.Nonce.Reveal() {
			t.Fatal("nonce reused across connections")
		}
		req := signed(activate(1, 1), key, r1.hello.Nonce)
		wantErrFrame(t, r2.send(req), witness.BadSignature)
	})
	t.Run("replayed on the same connection", func(t *testing.T) {
		r := dialRaw(t, tw.addr)
		req := signed(&witness.Request{Op: witness.TypeStatus, CoordinatorID: coord, RequestSeq: 1}, key, r.hello.Nonce)
		if st, ok := r.send(req).(*witness.Status); !ok || !st.NoRecord {
			t.Fatalf("STATUS of a coordinator without a record: %+v", st)
		}
		wantErrFrame(t, r.send(req), witness.ProtocolViolation)
	})
	t.Run("unsigned", func(t *testing.T) {
		r := dialRaw(t, tw.addr)
		wantErrFrame(t, r.send(&witness.Request{Op: witness.TypeStatus, CoordinatorID: coord, RequestSeq: 1}), witness.BadSignature)
	})
	t.Run("admin request on coordinator socket", func(t *testing.T) {
		r := dialRaw(t, tw.addr)
		wantErrFrame(t, r.send(&witness.Request{Op: witness.TypeRevoke, CoordinatorID: coord, RequestSeq: 1}), witness.NotAdmin)
	})
	t.Run("small-order authority key", func(t *testing.T) {
		r := dialRaw(t, tw.addr)
		req := activate(1, 1)
		req.AuthorityPublicKey[0] = 1 // the identity point
		wantErrFrame(t, r.send(req), witness.BadSignature)
	})
	// No refusal above wrote anything durable.
	if after := stateBytes(t, tw); !bytes.Equal(after, before) {
		t.Fatal("a refused request changed the durable witness state")
	}
	t.Run("valid after all that", func(t *testing.T) {
		r := dialRaw(t, tw.addr)
		f := r.send(signed(activate(1, 1), key, r.hello.Nonce))
		g, ok := f.(*witness.Granted)
		if !ok {
			t.Fatalf("got %+v", f)
		}
		if err := cert.Verify(&g.Certificate, tw.id.PublicKey, tw.id.KeyID, time.Now()); err != nil {
			t.Fatal(err)
		}
		// A second signed request on the same connection needs seq 2.
		f = r.send(signed(&witness.Request{Op: witness.TypeStatus, CoordinatorID: coord, RequestSeq: 2}, key, r.hello.Nonce))
		if _, ok := f.(*witness.Status); !ok {
			t.Fatalf("got %+v", f)
		}
	})
}

func TestEnvelopeLimits(t *testing.T) {
	tw := startWitness(t, witness.Config{})
	for _, tc := range []struct {
		name string
		hdr  []byte
		code witness.ErrorCode
	}{
		{"over 16 KiB", binary.BigEndian.AppendUint32(nil, witness.MaxFrameBytes+1), witness.FrameTooLarge},
		{"huge", []byte{0xff, 0xff, 0xff, 0xff}, witness.FrameTooLarge},
		{"zero length", []byte{0, 0, 0, 0}, witness.Malformed},
		{"unknown type", []byte{0, 0, 0, 1, 0x7f}, witness.ProtocolViolation},
		{"reply type from client", []byte{0, 0, 0, 1, byte(witness.TypeGranted)}, witness.Malformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, tw.addr)
			if _, err := r.c.Write(tc.hdr); err != nil {
				t.Fatal(err)
			}
			f, err := witness.ReadFrame(r.c)
			if err != nil {
				t.Fatal(err)
			}
			wantErrFrame(t, f, tc.code)
			if !r.closed() {
				t.Fatal("connection stays open")
			}
		})
	}
}

func TestRevokeAndEnrol(t *testing.T) {
	tw := startWitness(t, witness.Config{RequireEnrolment: true})
	ctx := ctxT(t)
	coord := coordwire.NewCoordinatorID()
	key := newSigner(t)
	c := tw.client(t, coord, key)
	_, err := c.Activate(ctx, 1, coordwire.NewIncarnationID())
	wantCode(t, err, witness.UnknownCoordinator)

	adm := tw.adminClient(t, coord)
	if err := adm.Enrol(ctx, fingerprint(key)); err != nil {
		t.Fatal(err)
	}
	g, err := c.Activate(ctx, 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	st, err := adm.Status(ctx) // unsigned STATUS on the admin socket
	if err != nil || !st.LeaseLive() {
		t.Fatalf("status %+v %v", st, err)
	}
	if err := adm.Revoke(ctx, false); err != nil {
		t.Fatal(err)
	}
	_, err = c.Renew(ctx, g)
	wantCode(t, err, witness.Revoked)
	st, err = adm.Status(ctx)
	if err != nil || st.HasLease || !st.Revoked {
		t.Fatalf("status %+v %v", st, err)
	}
	// After revocation the next activation needs a greater epoch.
	_, err = c.Activate(ctx, 1, coordwire.NewIncarnationID())
	wantCode(t, err, witness.EpochNotGreater)
	if _, err := c.Activate(ctx, 2, coordwire.NewIncarnationID()); err != nil {
		t.Fatal(err)
	}
	// Replacing the key while the lease lives is refused; revoke+unpin,
	// then enrol the new key.
	newKey := newSigner(t)
	wantCode(t, adm.Enrol(ctx, fingerprint(newKey)), witness.LeaseHeld)
	if err := adm.Revoke(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := adm.Enrol(ctx, fingerprint(newKey)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Activate(ctx, 3, coordwire.NewIncarnationID())
	wantCode(t, err, witness.FingerprintMismatch)
	if _, err := tw.client(t, coord, newKey).Activate(ctx, 3, coordwire.NewIncarnationID()); err != nil {
		t.Fatal(err)
	}
}

// Config.MaxConns and ReservedConns: a new connection over the
// unauthenticated share evicts the oldest unauthenticated one (ERROR
// BUSY); an authenticated connection keeps its slot; with every slot
// authenticated a new connection gets ERROR BUSY instead of HELLO.
func TestMaxConns(t *testing.T) {
	tw := startWitness(t, witness.Config{MaxConns: 3, ReservedConns: 1, AuthTimeout: 5 * time.Second})
	coord := coordwire.NewCoordinatorID()
	key := newSigner(t)
	// An authenticated connection: it pins coord.
	a := dialRaw(t, tw.addr)
	if f := a.send(signed(&witness.Request{Op: witness.TypeActivate, CoordinatorID: coord, AuthorityEpoch: 1,
		IncarnationID: coordwire.NewIncarnationID(), HolderSecretSHA256: [32]byte{1}, RequestSeq: 1}, key, a.hello.Nonce)); f.Type() != witness.TypeGranted {
		t.Fatalf("got %+v", f)
	}
	u1 := dialRaw(t, tw.addr)
	u2 := dialRaw(t, tw.addr)
	// Over the unauthenticated share of 2, a newcomer cannot evict a
	// connection younger than AuthTimeout/10 (0.5 s) …
	c, err := net.Dial("unix", tw.addr[5:])
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	f, err := witness.ReadFrame(c)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	wantErrFrame(t, f, witness.Busy)
	// … but evicts the oldest (u1) once it is older.
	time.Sleep(600 * time.Millisecond)
	u3 := dialRaw(t, tw.addr)
	u1.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err = witness.ReadFrame(u1.c)
	if err != nil {
		t.Fatal(err)
	}
	wantErrFrame(t, f, witness.Busy)
	// The authenticated connection is never evicted.
	if f := a.send(signed(&witness.Request{Op: witness.TypeStatus, CoordinatorID: coord, RequestSeq: 2}, key, a.hello.Nonce)); f.Type() != witness.TypeStatusOK {
		t.Fatalf("got %+v", f)
	}
	// u2 and u3 authenticate: every slot is authenticated, and a new
	// connection gets BUSY.
	for i, u := range []*rawConn{u2, u3} {
		if f := u.send(signed(&witness.Request{Op: witness.TypeStatus, CoordinatorID: coord, RequestSeq: 1}, key, u.hello.Nonce)); f.Type() != witness.TypeStatusOK {
			t.Fatalf("%d: got %+v", i, f)
		}
	}
	c, err = net.Dial("unix", tw.addr[5:])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	f, err = witness.ReadFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	wantErrFrame(t, f, witness.Busy)
	// A slot frees up once a connection ends.
	a.c.Close()
	for i := 0; ; i++ {
		c, err := net.Dial("unix", tw.addr[5:])
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		f, err := witness.ReadFrame(c)
		c.Close()
		if err == nil && f.Type() == witness.TypeHello {
			break
		}
		if i > 100 {
			t.Fatal("slot never freed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A connection that has not authenticated is closed after its refusal
// budget (Config.UnauthRefusals) or its hard lifetime
// (Config.AuthTimeout), whatever it sends; an authenticated one is not.
func TestUnauthenticatedConnectionBudget(t *testing.T) {
	tw := startWitness(t, witness.Config{UnauthRefusals: 2, AuthTimeout: 500 * time.Millisecond})
	unknown := coordwire.NewCoordinatorID()
	key := newSigner(t)
	status := func(r *rawConn, coord coordwire.CoordinatorID, seq uint64) witness.Frame {
		return r.send(signed(renewUnknown(coord, seq), key, r.hello.Nonce))
	}
	r := dialRaw(t, tw.addr)
	wantErrFrame(t, status(r, unknown, 1), witness.UnknownCoordinator)
	wantErrFrame(t, status(r, unknown, 2), witness.UnknownCoordinator)
	if !r.closed() {
		t.Fatal("an unauthenticated connection outlived its refusal budget")
	}
	// Hard lifetime: a request just before it does not extend it.
	r = dialRaw(t, tw.addr)
	time.Sleep(300 * time.Millisecond)
	wantErrFrame(t, status(r, unknown, 1), witness.UnknownCoordinator)
	r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	f, err := witness.ReadFrame(r.c)
	if err != nil {
		t.Fatal(err)
	}
	wantErrFrame(t, f, witness.Busy)
	if time.Since(start) > 2*time.Second {
		t.Fatal("the hard lifetime was extended by a request")
	}
	// Authenticated: refusals (LEASE_HELD) and time do not close it.
	coord := coordwire.NewCoordinatorID()
	a := dialRaw(t, tw.addr)
	activate := func(seq uint64) witness.Frame {
		return a.send(signed(&witness.Request{Op: witness.TypeActivate, CoordinatorID: coord, AuthorityEpoch: coordwire.AuthorityEpoch(seq),
			IncarnationID: coordwire.NewIncarnationID(), HolderSecretSHA256: [32]byte{1}, RequestSeq: seq}, key, a.hello.Nonce))
	}
	if f := activate(1); f.Type() != witness.TypeGranted {
		t.Fatalf("got %+v", f)
	}
	for seq := uint64(2); seq < 5; seq++ {
		wantErrFrame(t, activate(seq), witness.LeaseHeld)
	}
	time.Sleep(700 * time.Millisecond)
	wantErrFrame(t, activate(5), witness.LeaseHeld)
}

// Config.Hook sees every point of a durable write, the stages inside the
// atomic file write included, in order, once per decision.
func TestHookPointsInOrder(t *testing.T) {
	var mu sync.Mutex
	var got []witness.HookPoint
	tw := startWitness(t, witness.Config{Hook: func(p witness.HookPoint) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	}})
	c := tw.client(t, coordwire.NewCoordinatorID(), newSigner(t))
	g, err := c.Activate(ctxT(t), 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Relinquish(ctxT(t), g); err != nil {
		t.Fatal(err)
	}
	one := []witness.HookPoint{witness.HookBeforeWrite, witness.HookTempWritten, witness.HookTempSynced,
		witness.HookRenamed, witness.HookAfterWrite}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(append(one, one...), got); diff != "" {
		t.Fatalf("hook points (-want +got):\n%s", diff)
	}
}

// Open refuses negative limits, a reserve that leaves no slot for an
// unauthenticated connection and a table above MaxCoordinators.
func TestOpenRefusesBadLimits(t *testing.T) {
	dir := filepath.Join(sockDir(t), "state")
	if _, err := witness.Init(dir); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []witness.Config{
		{MaxConns: -1}, {ReservedConns: -1}, {UnauthRefusals: -1}, {MaxUnauthPerHost: -1}, {FirstUsePinsPerMinute: -1}, {LogBurst: -1},
		{IdleTimeout: -time.Second}, {AuthTimeout: -time.Second}, {LogInterval: -time.Second},
		{MaxConns: 4, ReservedConns: 4}, {ReservedConns: 256},
		{EstablishAfter: -time.Second}, {MaxCoordinators: -1}, {MaxCoordinators: witness.MaxCoordinators + 1},
	} {
		cfg.StateDir = dir
		if srv, err := witness.Open(cfg); !errors.Is(err, witness.ErrConfig) {
			if err == nil {
				srv.Close()
			}
			t.Fatalf("%+v: %v", cfg, err)
		}
	}
	srv, err := witness.Open(witness.Config{StateDir: dir, MaxConns: 4, ReservedConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
}

// hostConn is one end of a net.Pipe that claims a TCP remote address, as
// a TLS connection from that host would.
type hostConn struct {
	net.Conn
	remote net.Addr
}

func (c hostConn) RemoteAddr() net.Addr { return c.remote }

// Config.MaxUnauthPerHost: a flood from one address churns only its own
// unauthenticated connections; another host's stay served.
func TestUnauthenticatedPerHostCap(t *testing.T) {
	dir := filepath.Join(sockDir(t), "state")
	if _, err := witness.Init(dir); err != nil {
		t.Fatal(err)
	}
	srv, err := witness.Open(witness.Config{StateDir: dir, MaxConns: 8, ReservedConns: 2, MaxUnauthPerHost: 2,
		AuthTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dial := func(ip string) (net.Conn, witness.Frame) {
		a, b := net.Pipe()
		srv.ServeConn(context.Background(), hostConn{b, &net.TCPAddr{IP: net.ParseIP(ip), Port: 4000}}, false)
		a.SetDeadline(time.Now().Add(5 * time.Second))
		f, err := witness.ReadFrame(a)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a, f
	}
	wantHello := func(f witness.Frame) {
		t.Helper()
		if f.Type() != witness.TypeHello {
			t.Fatalf("got %+v, want HELLO", f)
		}
	}
	a1, f := dial("192.0.2.1")
	wantHello(f)
	_, f = dial("192.0.2.1")
	wantHello(f)
	_, f = dial("192.0.2.1") // over the host's cap, its connections young
	wantErrFrame(t, f, witness.Busy)
	b1, f := dial("198.51.100.7")
	wantHello(f)
	b2, f := dial("198.51.100.7")
	wantHello(f)
	time.Sleep(600 * time.Millisecond) // older than AuthTimeout/10
	_, f = dial("192.0.2.1")           // evicts a1, not a B connection
	wantHello(f)
	f, err = witness.ReadFrame(a1)
	if err != nil {
		t.Fatal(err)
	}
	wantErrFrame(t, f, witness.Busy)
	for _, c := range []net.Conn{b1, b2} {
		c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		var one [1]byte
		if _, err := c.Read(one[:]); !isTimeout(err) {
			t.Fatalf("another host's connection was touched: %v", err)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
