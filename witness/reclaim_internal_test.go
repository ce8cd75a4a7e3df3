package witness

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/atomicfile"
	"github.com/phuxcoord/coord/internal/redact"
)

// legacyJunkState writes, in a fresh state directory, the version-1 state
// file that n first-use ACTIVATEs of fresh CoordinatorIds (one each, never
// renewed, never relinquished) leave once every lease has expired: the
// table-filling attack of §12's witness as the previous build recorded it.
func legacyJunkState(t testing.TB, dir string, n int) (ids []coordwire.CoordinatorID) {
	t.Helper()
	if _, err := Init(dir); err != nil {
		t.Fatal(err)
	}
	st, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	past := uint64(time.Now().Add(-time.Hour).Unix())
	for i := range n {
		var tok, hold, fp [32]byte
		rand.Read(tok[:])
		rand.Read(hold[:])
		rand.Read(fp[:])
		r := &record{ID: coordwire.NewCoordinatorID(), Pinned: true, Fingerprint: fp, LastEpoch: 1, Sequence: 1,
			Lease: &lease{Token: redact.New(tok), HolderSHA256: redact.New(hold), Incarnation: coordwire.NewIncarnationID(),
				IssuedAt: past + uint64(i%60), ExpiresAt: past + uint64(i%60) + 30}}
		st.Records[r.ID] = r
		ids = append(ids, r.ID)
	}
	if err := atomicfile.WriteFile(dir, StateFileName, encodeLegacyState(st)); err != nil {
		t.Fatal(err)
	}
	return ids
}

// pipeClient is a client of srv over an in-process pipe (a local
// connection: first-use pins allowed).
func pipeClient(t *testing.T, srv *Server, coord coordwire.CoordinatorID, admin bool) *Client {
	t.Helper()
	cfg := ClientConfig{WitnessPublicKey: srv.Identity().PublicKey, CoordinatorID: coord,
		Dial: func(context.Context) (net.Conn, error) {
			a, b := net.Pipe()
			srv.ServeConn(context.Background(), b, admin)
			return a, nil
		}}
	if !admin {
		cfg.Authority = testSigner{newTestKey(t)}
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// §12 witness table: 4,096 first-use ACTIVATEs of fresh CoordinatorIds
// that were never renewed no longer lock the table once their leases
// have expired — after a restart of the witness (Open over the file) a
// new coordinator activates, and the table stays at its cap. (Before,
// the new coordinator was refused TABLE_FULL for good.)
func TestJunkTableReclaimedAfterExpiryAndRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	ids := legacyJunkState(t, dir, MaxCoordinators)
	srv, err := Open(Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		if _, err := pipeClient(t, srv, coordwire.NewCoordinatorID(), false).Activate(ctx, 1, coordwire.NewIncarnationID()); err != nil {
			t.Fatalf("new coordinator %d after every junk lease expired: %v", i, err)
		}
	}
	if n := len(srv.st.Records); n != MaxCoordinators {
		t.Fatalf("%d records, want the cap %d", n, MaxCoordinators)
	}
	gone := 0
	for _, id := range ids {
		if srv.st.Records[id] == nil {
			gone++
		}
	}
	if gone != 3 {
		t.Fatalf("%d junk records reclaimed, want 3", gone)
	}
}

// encodeLegacyState encodes s as the version-1 state file the previous
// build wrote.
func encodeLegacyState(s *state) []byte { return encodeStateVersion(s, stateVersion1) }

// fakeClock is a whole-second clock shared by a test's witness and
// clients.
type fakeClock struct{ sec atomic.Int64 }

func (c *fakeClock) Now() time.Time          { return time.Unix(c.sec.Load(), 0) }
func (c *fakeClock) advance(d time.Duration) { c.sec.Add(int64(d / time.Second)) }

// testCoord is one coordinator of the reclamation tests: its id and
// authority key stay the same across witness restarts and reclamation.
type testCoord struct {
	id  coordwire.CoordinatorID
	key testSigner
}

func newTestCoord(t *testing.T) testCoord {
	return testCoord{coordwire.NewCoordinatorID(), testSigner{newTestKey(t)}}
}

// clientOf is a client of srv for tc over a pipe, on clk.
func clientOf(t *testing.T, srv *Server, tc testCoord, clk *fakeClock) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{WitnessPublicKey: srv.Identity().PublicKey, CoordinatorID: tc.id, Authority: tc.key, Now: clk.Now,
		Dial: func(context.Context) (net.Conn, error) {
			a, b := net.Pipe()
			srv.ServeConn(context.Background(), b, false)
			return a, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// §12: a record the witness reclaims is remembered in its bucket's
// floor, so the coordinator that comes back — after a restart of the
// witness too — is refused its old epoch, learns the floor from STATUS
// (no record), and is granted an epoch and activation sequence strictly
// above its old certificate's. An established record (an activation
// renewed past EstablishAfter) is never reclaimed, nor is a live one: a
// table of those is TABLE_FULL.
func TestSection12ReclaimedCoordinatorReturnsAboveItsOldCertificate(t *testing.T) {
	clk := &fakeClock{}
	clk.sec.Store(time.Now().Unix())
	dir := filepath.Join(t.TempDir(), "state")
	if _, err := Init(dir); err != nil {
		t.Fatal(err)
	}
	cfg := Config{StateDir: dir, Now: clk.Now, MaxCoordinators: 3, EstablishAfter: time.Minute, FirstUsePinsPerMinute: 1000}
	srv, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Close() }()
	ctx := context.Background()

	x, e := newTestCoord(t), newTestCoord(t)
	gx, err := clientOf(t, srv, x, clk).Activate(ctx, 5, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	old := gx.Certificate()
	if err := clientOf(t, srv, x, clk).Relinquish(ctx, gx); err != nil {
		t.Fatal(err)
	}
	// e holds one activation for more than EstablishAfter.
	clk.advance(time.Second)
	ec := clientOf(t, srv, e, clk)
	ge, err := ec.Activate(ctx, 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		clk.advance(20 * time.Second)
		if ge, err = ec.Renew(ctx, ge); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := ec.Status(ctx); err != nil || st.Reclaimable {
		t.Fatalf("after 80 s of one activation: %+v %v; want established", st, err)
	}
	if err := ec.Relinquish(ctx, ge); err != nil {
		t.Fatal(err)
	}
	// Two strangers fill the table; the second reclaims x (relinquished
	// first, not established), not e (established, relinquished later).
	a1, a2 := newTestCoord(t), newTestCoord(t)
	if _, err := clientOf(t, srv, a1, clk).Activate(ctx, 1, coordwire.NewIncarnationID()); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Second)
	if _, err := clientOf(t, srv, a2, clk).Activate(ctx, 1, coordwire.NewIncarnationID()); err != nil {
		t.Fatal(err)
	}
	if srv.st.Records[x.id] != nil || srv.st.Records[e.id] == nil || len(srv.st.Records) != 3 {
		t.Fatalf("after the table filled: x kept %v, e kept %v, %d records", srv.st.Records[x.id] != nil, srv.st.Records[e.id] != nil, len(srv.st.Records))
	}

	// A restart of the witness.
	srv.Close()
	if srv, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	xc := clientOf(t, srv, x, clk)
	st, err := xc.Status(ctx)
	if err != nil || !st.NoRecord || st.LastAuthorityEpoch < uint64(old.AuthorityEpoch) || st.ActivationSequence < uint64(old.ActivationSequence) {
		t.Fatalf("STATUS of the reclaimed coordinator: %+v %v; want no record and its floor ≥ epoch %d, sequence %d",
			st, err, old.AuthorityEpoch, old.ActivationSequence)
	}
	// a1 and a2 are live, e established: nothing to reclaim.
	next := coordwire.AuthorityEpoch(max(uint64(old.AuthorityEpoch), st.LastAuthorityEpoch) + 1)
	if _, err := xc.Activate(ctx, next, coordwire.NewIncarnationID()); !errors.Is(err, TableFull) {
		t.Fatalf("activation into a table of live and established records: %v", err)
	}
	clk.advance(31 * time.Second) // a1's and a2's leases expire
	if _, err := xc.Activate(ctx, old.AuthorityEpoch, coordwire.NewIncarnationID()); !errors.Is(err, EpochNotGreater) {
		t.Fatalf("the reclaimed coordinator's old epoch again: %v", err)
	}
	gx2, err := xc.Activate(ctx, next, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	c2 := gx2.Certificate()
	if c2.AuthorityEpoch <= old.AuthorityEpoch || c2.ActivationSequence <= old.ActivationSequence {
		t.Fatalf("returned with epoch %d, sequence %d; its old certificate had %d, %d",
			c2.AuthorityEpoch, c2.ActivationSequence, old.AuthorityEpoch, old.ActivationSequence)
	}
	if srv.st.Records[a1.id] != nil || srv.st.Records[e.id] == nil {
		t.Fatalf("reclaimed the wrong record: a1 kept %v, e kept %v", srv.st.Records[a1.id] != nil, srv.st.Records[e.id] != nil)
	}
	if got := srv.Refusals(); !slices.ContainsFunc(got, func(r RefusalCount) bool {
		return r.Code == TableFull && r.Total == 1 && r.Message != "request refused"
	}) {
		t.Fatalf("reclamations counted: %+v", got)
	}
}

// A coordinator that is not established and pinned by first use may not
// jump more than MaxFirstUseEpochStep above its last epoch (its bucket's
// floor for a new one): its record is reclaimable, and its epoch would
// become the floor of every CoordinatorId of the bucket. An enrolled
// coordinator may.
func TestFirstUseEpochStepBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if _, err := Init(dir); err != nil {
		t.Fatal(err)
	}
	srv, err := Open(Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	clk := &fakeClock{}
	clk.sec.Store(time.Now().Unix())
	tc := newTestCoord(t)
	c := clientOf(t, srv, tc, clk)
	if _, err := c.Activate(ctx, MaxFirstUseEpochStep+1, coordwire.NewIncarnationID()); !errors.Is(err, EpochTooFar) {
		t.Fatalf("first use at epoch 2^20+1: %v", err)
	}
	if len(srv.st.Records) != 0 {
		t.Fatal("a refused first use made a record")
	}
	if _, err := c.Activate(ctx, math.MaxUint64, coordwire.NewIncarnationID()); !errors.Is(err, EpochTooFar) {
		t.Fatalf("first use at epoch 2^64-1: %v", err)
	}
	g, err := c.Activate(ctx, MaxFirstUseEpochStep, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Relinquish(ctx, g); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Activate(ctx, 2*MaxFirstUseEpochStep+1, coordwire.NewIncarnationID()); !errors.Is(err, EpochTooFar) {
		t.Fatalf("second activation 2^20+1 above the first: %v", err)
	}
	en := newTestCoord(t)
	if err := pipeClient(t, srv, en.id, true).Enrol(ctx, sha256.Sum256(en.key.Public())); err != nil {
		t.Fatal(err)
	}
	if _, err := clientOf(t, srv, en, clk).Activate(ctx, math.MaxUint64-1, coordwire.NewIncarnationID()); err != nil {
		t.Fatalf("an enrolled coordinator far above: %v", err)
	}
}

// A version-1 state file, written by the previous build
// (testdata/state-v1.bin: coordinator 01 enrolled and never activated,
// 02 activated once by first use and left to expire, 03 activated and
// relinquished, 04 activated twice, 05 activated and then revoked with
// --unpin), loads: version 1 is read as that build wrote it (re-encoding
// it as version 1 gives the same bytes), only 02 — the record a
// never-relinquished first use leaves — migrates as reclaimable, every
// other record is kept, the next write is version 2, and the daemon's
// decisions go on from it.
func TestStateVersion1Migrates(t *testing.T) {
	v1, err := os.ReadFile("testdata/state-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	st, err := decodeState(v1)
	if err != nil {
		t.Fatal(err)
	}
	if again := encodeStateVersion(st, stateVersion1); !bytes.Equal(again, v1) {
		t.Fatal("the version-1 encoder does not give the previous build's bytes")
	}
	type class struct{ FirstUse, Established, Activated, Pinned bool }
	want := map[byte]class{
		1: {Pinned: true},
		2: {FirstUse: true, Activated: true, Pinned: true},
		3: {Activated: true, Pinned: true},
		4: {Activated: true, Pinned: true},
		5: {Activated: true},
	}
	got := map[byte]class{}
	for id, r := range st.Records {
		got[id[0]] = class{r.FirstUse, r.Established, r.Activated, r.Pinned}
		if l := r.Lease; l != nil && (l.ActivatedAt != l.IssuedAt || r.LastActive != l.ExpiresAt) {
			t.Errorf("record %x: activated_at %d, last_active %d; want the lease's issued_at %d and expires_at %d",
				id[0], l.ActivatedAt, r.LastActive, l.IssuedAt, l.ExpiresAt)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("migrated records (-want +got):\n%s", diff)
	}
	if len(st.Floors) != 0 {
		t.Fatalf("floors from a version-1 file: %v", st.Floors)
	}
	// Version 2 round-trips the migrated state exactly.
	v2 := encodeState(st)
	st2, err := decodeState(v2)
	if err != nil || !bytes.Equal(encodeState(st2), v2) {
		t.Fatalf("version 2 of the migrated state: %v", err)
	}

	dir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(dir, StateFileName, v1); err != nil {
		t.Fatal(err)
	}
	srv, err := Open(Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	s2, err := pipeClient(t, srv, coordwire.CoordinatorID{2}, true).Status(ctx)
	if err != nil || !s2.Reclaimable || s2.LastAuthorityEpoch != 3 || s2.ActivationSequence != 1 {
		t.Fatalf("STATUS of 02 after the migration: %+v %v", s2, err)
	}
	s4, err := pipeClient(t, srv, coordwire.CoordinatorID{4}, true).Status(ctx)
	if err != nil || s4.Reclaimable || s4.LastAuthorityEpoch != 2 || s4.ActivationSequence != 2 {
		t.Fatalf("STATUS of 04 after the migration: %+v %v", s4, err)
	}
	if err := pipeClient(t, srv, coordwire.CoordinatorID{1}, true).Forget(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pipeClient(t, srv, coordwire.CoordinatorID{3}, true).Forget(ctx); !errors.Is(err, Activated) {
		t.Fatalf("forget of 03, which activated: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, StateFileName))
	if err != nil || binary.BigEndian.Uint16(b[len(stateMagic):]) != StateVersion {
		t.Fatalf("the first write after the migration: version %x, %v", b[len(stateMagic):len(stateMagic)+2], err)
	}
}
