package coordserver_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/backup"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
	"github.com/phuxcoord/coord/internal/testkit/pgtest"
	"github.com/phuxcoord/coord/internal/testkit/storeengines"
	"github.com/phuxcoord/coord/keystore"
)

const (
	movedScope = coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand | coordwire.ScopeTerminalControl | coordwire.ScopeSignalAck | coordwire.ScopeAdmin
	movedCaps  = coordwire.CapTerminalBindings | coordwire.CapSignals | coordwire.CapArtifactManifests | coordwire.CapAdministration
)

// offsetClock is a server clock the test moves (the retention sweeper
// reads it).
type offsetClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}
func (c *offsetClock) set(d time.Duration) {
	c.mu.Lock()
	c.offset = d
	c.mu.Unlock()
}

// populated is what populateThroughServer made, for the checks after a
// restore.
type populated struct {
	final   map[coordwire.OperationID]coordwire.OperationResult // SUCCEEDED or REJECTED
	tombed  []coordwire.OperationID
	pending []coordwire.OperationID
	key     *keystore.WorkloadKey // the client's, whose principal admitted every operation
}

// populateThroughServer runs a coordinator on st, with a terminal owner,
// and fills the store through it with every kind of state a coordinator
// holds: objectives at several revisions; results retained and
// tombstoned by the retention sweeper (on a clock moved 31 days ahead);
// a retention change (the RETENTION ADMIN record, every operation's
// promised retention); Runs whose bindings are active with retained
// source facts, ended by a CLOSED fact (sealed evidence: an artifact,
// its manifest and an EVIDENCE record, the ended binding's facts
// retained) and ended by a cancel (a KILL effect, then its CLOSED); a spawn rejected (an
// EXECUTION_FAILED signal, acknowledged); a registered artifact
// manifest; an event log pruned by its byte retention; and two START_RUNs
// left PENDING, one with its SPAWN effect DISPATCHED (the owner holds it)
// and one READY behind it. ACTIVATION and CREDENTIAL ADMIN records come
// with the activation and the workload key. The coordinator is then shut
// down (it relinquishes its lease), leaving the store as it was.
func populateThroughServer(t *testing.T, e *env, st coordstore.Store) populated {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ad := newMemAdapter("group-1")
	reg := coordserver.OwnerRegistration{Fingerprint: [32]byte{0xf0, 2}, Incarnation: coordwire.NewIncarnationID(), Adapter: ad}
	clock := &offsetClock{}
	cfg := e.config(st)
	cfg.Capabilities |= movedCaps
	cfg.Owner = &reg
	cfg.Now = clock.Now
	cfg.SweepInterval = 10 * time.Millisecond
	cfg.CommandWait = -1
	srv, path := e.serve(cfg)
	k := e.addKey(movedScope, time.Now().Add(365*24*time.Hour)) // valid on the moved clock too
	cl, err := coordclient.Dial(ctx, "unix:"+path, coordclient.Config{
		WorkloadKey: k, AuthorityFingerprint: e.auth.Fingerprint(), WitnessPublicKey: e.w.id.PublicKey,
		Scope: movedScope, OfferedCapabilities: movedCaps, RequiredCapabilities: movedCaps,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p := populated{final: map[coordwire.OperationID]coordwire.OperationResult{}, key: k}
	final := func(cmd *coordclient.Cmd, want coordwire.OperationTag) *coordclient.Result {
		t.Helper()
		r, err := cl.Command(ctx, cmd)
		if err == nil && !r.Final() {
			r, err = cl.WaitFinal(ctx, cmd.OperationID())
		}
		if r == nil || r.Tag() != want || (err != nil && want == coordwire.OperationSucceeded) { // a REJECTED result comes with its error
			t.Fatalf("%v: %v %v, want %v", cmd.Kind(), r, err, want)
		}
		p.final[cmd.OperationID()] = r.Operation
		return r
	}
	view := func(f func(tx coordstore.ReadTx) error) {
		t.Helper()
		if err := st.View(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	tag := func(id coordwire.OperationID) coordwire.OperationTag {
		t.Helper()
		var r coordwire.OperationResult
		view(func(tx coordstore.ReadTx) error {
			op, err := tx.Operation(id)
			if err != nil {
				return err
			}
			return r.Decode(op.Result)
		})
		return r.Tag
	}

	// Results the sweeper tombstones: 31 days later on the server's clock.
	for range 2 {
		cmd := coordclient.CreateObjective(coordwire.NewObjectiveID(), coordwire.RecordSchemaVersion, []byte(`{"old":true}`))
		final(cmd, coordwire.OperationSucceeded)
		delete(p.final, cmd.OperationID())
		p.tombed = append(p.tombed, cmd.OperationID())
	}
	clock.set(31 * 24 * time.Hour)
	for _, id := range p.tombed {
		eventually(t, "the sweeper to tombstone a 31-day-old result", func() bool { return tag(id) == coordwire.OperationTombstoned })
	}
	clock.set(0)

	final(coordclient.ChangeRetention(40*86400, 0, 0), coordwire.OperationSucceeded)
	obj := coordwire.NewObjectiveID()
	final(coordclient.CreateObjective(obj, coordwire.RecordSchemaVersion, []byte(`{"n":1}`)), coordwire.OperationSucceeded)
	final(coordclient.UpdateObjective(obj, coordwire.RecordSchemaVersion, []byte(`{"n":2}`), coordclient.ObjectiveAt(obj, 1)), coordwire.OperationSucceeded)
	startRun := func() (*coordclient.Cmd, coordwire.StartRun) {
		sr := coordwire.StartRun{
			ObjectiveID: obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(),
			ExecutorSchema: 1, ExecutorDocument: []byte(`{"argv":["true"]}`), PendingBindingID: coordwire.NewPendingBindingID(),
			OwnerAuthorityFingerprint: reg.Fingerprint, OwnerIncarnation: reg.Incarnation, TerminalGroup: []byte("group-1"),
		}
		return coordclient.StartRun(sr), sr
	}
	fact := func(sr coordwire.StartRun, seq uint64, pl coordwire.SourceFactPayload) {
		t.Helper()
		f := coordwire.TerminalSourceFact{
			Source: coordwire.TerminalSourceRef{BindingID: coordwire.BindingID(sr.PendingBindingID), OwnerAuthorityFingerprint: reg.Fingerprint,
				OwnerIncarnation: reg.Incarnation, Sequence: coordwire.SourceSequence(seq)},
			Kind: pl.Kind, Schema: 1, Payload: pl.Append(nil),
		}
		if _, err := srv.Owner().AdmitSourceFact(ctx, f); err != nil {
			t.Fatalf("source fact %d: %v", seq, err)
		}
	}

	// An active binding with retained facts.
	cmd, active := startRun()
	final(cmd, coordwire.OperationSucceeded)
	fact(active, 1, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
	fact(active, 2, coordwire.SourceFactPayload{Kind: coordwire.SourceAttention, Attention: coordwire.AttentionBell})
	// A binding ended by its CLOSED fact: evidence sealed, facts retained.
	cmd, closed := startRun()
	final(cmd, coordwire.OperationSucceeded)
	fact(closed, 1, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
	fact(closed, 2, coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true})
	// A Run cancelled: a KILL effect, then the killed process's CLOSED
	// ends its binding Cancelled.
	cmd, cancelled := startRun()
	final(cmd, coordwire.OperationSucceeded)
	fact(cancelled, 1, coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
	final(coordclient.CancelRun(cancelled.RunID), coordwire.OperationSucceeded)
	fact(cancelled, 2, coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: -9})
	// A spawn rejected: an EXECUTION_FAILED signal, then acknowledged.
	ad.mu.Lock()
	ad.rejectSpawn = true
	ad.mu.Unlock()
	cmd, _ = startRun()
	final(cmd, coordwire.OperationRejected)
	ad.mu.Lock()
	ad.rejectSpawn = false
	ad.mu.Unlock()
	var sig coordwire.SignalID
	view(func(tx coordstore.ReadTx) error {
		from := coordstore.ObjectKey{Kind: coordwire.ObjectKindSignal}
		for o, err := range tx.Objects(&from) {
			if err != nil || o.Key.Kind != coordwire.ObjectKindSignal {
				return err
			}
			var s coordwire.SignalRecord
			if err := s.DecodeTLV(o.Payload); err != nil {
				return err
			}
			if s.Kind == coordwire.SignalExecutionFailed {
				sig = coordwire.SignalID(o.Key.ID)
			}
		}
		return nil
	})
	if sig.IsZero() {
		t.Fatal("no EXECUTION_FAILED signal after a rejected spawn")
	}
	final(coordclient.AckSignal(sig, "seen"), coordwire.OperationSucceeded)
	// A manifest registered for the active Run's work session.
	doc := coordwire.ArtifactManifestDoc{WorkSessionID: active.WorkSessionID, MediaType: "text/plain", Size: 3, ContentSHA256: [32]byte{3}}
	final(coordclient.RegisterArtifactManifest(coordwire.NewArtifactID(), 1, 1, doc.AppendTLV(nil)), coordwire.OperationSucceeded)
	// The event log pruned to its byte retention.
	final(coordclient.ChangeRetention(40*86400, 8<<10, 0), coordwire.OperationSucceeded)
	eventually(t, "the sweeper to prune the event log", func() bool {
		var oldest uint64
		view(func(tx coordstore.ReadTx) error {
			var err error
			oldest, err = tx.OldestRetainedSequence()
			return err
		})
		return oldest > 1
	})

	// PENDING START_RUNs: one DISPATCHED (the owner holds it), one READY.
	ad.mu.Lock()
	ad.hold, ad.held, ad.onCancel = make(chan struct{}), make(chan struct{}), "intent"
	ad.mu.Unlock()
	for i := range 2 {
		cmd, _ := startRun()
		r, err := cl.Command(ctx, cmd)
		if err != nil || r.Tag() != coordwire.OperationPending {
			t.Fatalf("held START_RUN: %v %v", r, err)
		}
		p.pending = append(p.pending, cmd.OperationID())
		if i == 0 {
			<-ad.held
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	return p
}

// authorityDigest is the §9 whole-authority snapshot digest of a cut of
// st (its meta's authority, its EventCut, every record), with the cut's
// EventCut and oldest retained event.
type authorityDigest struct {
	Digest         [32]byte
	EventCut       uint64
	OldestRetained uint64
	Records        uint64
}

func digestOf(t *testing.T, st coordstore.Store) authorityDigest {
	t.Helper()
	ctx := context.Background()
	cut, err := st.OpenCut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()
	m := cut.Meta()
	h := digest.NewSnapshotHasher(digest.SnapshotHeader{CoordinatorID: m.CoordinatorID, Epoch: coordwire.AuthorityEpoch(m.AuthorityEpoch),
		ActivationSequence: coordwire.ActivationSequence(m.ActivationSequence), BaseEventCut: coordwire.EventCut(cut.EventCut())}, cut.RecordCount())
	for o, err := range cut.Objects(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		r := o.SnapshotRecord()
		h.Add(&r)
	}
	d, err := h.Sum()
	if err != nil {
		t.Fatal(err)
	}
	return authorityDigest{Digest: d, EventCut: cut.EventCut(), OldestRetained: cut.OldestRetainedSequence(), Records: cut.RecordCount()}
}

// checkCoverage fails the test unless the populated store holds every
// family the move must carry (so that a pass is not vacuous).
func checkCoverage(t *testing.T, s storetest.State, p populated) {
	t.Helper()
	kinds := map[coordwire.ObjectKind]int{}
	for _, o := range s.Objects {
		kinds[o.Key.Kind]++
	}
	for k := coordwire.ObjectKindObjective; k <= coordwire.ObjectKindArtifactManifest; k++ {
		if kinds[k] == 0 {
			t.Errorf("no %v record", k)
		}
	}
	var tomb, pend int
	for _, o := range s.Operations {
		if o.Tombstoned {
			tomb++
		}
		if o.FinalizedAt == 0 {
			pend++
		}
	}
	var active, ended int
	for _, b := range s.Bindings {
		if len(s.Facts[b.ID]) == 0 {
			continue
		}
		if b.Ended {
			ended++
		} else {
			active++
		}
	}
	switch {
	case tomb != len(p.tombed) || pend != len(p.pending):
		t.Errorf("%d tombstoned and %d pending operations, want %d and %d", tomb, pend, len(p.tombed), len(p.pending))
	case len(s.Effects[coordwire.EffectReady]) == 0 || len(s.Effects[coordwire.EffectDispatched]) == 0 || len(s.Effects[coordwire.EffectSucceeded]) == 0 || len(s.Effects[coordwire.EffectRejected]) == 0:
		t.Errorf("outbox by state: %v", s.Effects)
	case active == 0 || ended == 0:
		t.Errorf("bindings with retained facts: %d active, %d ended", active, ended)
	case s.OldestRetained <= 1:
		t.Errorf("event log not pruned (oldest retained %d)", s.OldestRetained)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// Moving between engines (§12 backup and restore): a store built by the
// real coordinator (populateThroughServer) on each engine is backed up
// and restored into an empty store of each engine — every direction —
// and the copy is the same authority: the same §9 snapshot digest
// (CoordinatorId, epoch, activation, EventCut, every record), the same
// oldest retained event, the same whole observable state
// (storetest.Dump: operations with digests, admission times and promised
// retention, the outbox, bindings with their facts, events, indexes and
// counters), the same digest and result for every operation. A
// coordinator activated on the copy has an epoch above the original's
// and answers every final result as the original did, and every
// tombstoned one as tombstoned.
func TestMoveBetweenEngines(t *testing.T) {
	dsn := pgtest.Private(t)
	engines := storeengines.All(func(testing.TB) string { return dsn })
	for _, src := range engines {
		t.Run(src.Name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, 10*time.Second)
			st := src.Open(t)
			p := populateThroughServer(t, e, st)
			want, err := storetest.Dump(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			checkCoverage(t, want, p)
			wantDigest := digestOf(t, st)
			var buf bytes.Buffer
			sum, err := backup.Write(ctx, st, &buf, backup.Options{AuthorityFingerprint: e.auth.Fingerprint()})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Header.EventCut != wantDigest.EventCut || sum.Header.OldestRetainedSequence != wantDigest.OldestRetained {
				t.Fatalf("backup header %+v, cut %+v", sum.Header, wantDigest)
			}
			epoch := want.Meta.AuthorityEpoch
			for _, dst := range engines {
				t.Run("to_"+dst.Name, func(t *testing.T) {
					to := dst.Open(t)
					if _, err := backup.Restore(ctx, bytes.NewReader(buf.Bytes()), to); err != nil {
						t.Fatalf("restore: %v", err)
					}
					if diff := cmp.Diff(wantDigest, digestOf(t, to)); diff != "" {
						t.Fatalf("snapshot digest (-%s +%s):\n%s", src.Name, dst.Name, diff)
					}
					got, err := storetest.Dump(ctx, to)
					if err != nil {
						t.Fatal(err)
					}
					w := want
					w.Meta.StoreSchema = got.Meta.StoreSchema
					if diff := cmp.Diff(w, got); diff != "" {
						t.Fatalf("restored store (-%s +%s):\n%s", src.Name, dst.Name, diff)
					}
					for _, o := range want.Operations {
						if err := to.View(ctx, func(tx coordstore.ReadTx) error {
							r, err := tx.Operation(o.ID)
							if err != nil {
								return err
							}
							if r.Digest != o.Digest || !bytes.Equal(r.Result, o.Result) || r.RetentionSecs != o.RetentionSecs || r.AdmittedAt != o.AdmittedAt {
								t.Errorf("operation %s restored as %+v, was %+v", o.ID, r, o)
							}
							return nil
						}); err != nil {
							t.Fatal(err)
						}
					}

					// Activated on the copy: a higher epoch, every result.
					cfg := e.config(to)
					cfg.Capabilities |= movedCaps
					srv, path := e.serve(cfg)
					cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					defer cancel()
					defer srv.Shutdown(cctx) // relinquishes: the next copy activates at once
					cl, err := coordclient.Dial(cctx, "unix:"+path, coordclient.Config{
						WorkloadKey: p.key, AuthorityFingerprint: e.auth.Fingerprint(), WitnessPublicKey: e.w.id.PublicKey,
						Scope: movedScope, OfferedCapabilities: movedCaps, RequiredCapabilities: movedCaps,
					})
					if err != nil {
						t.Fatal(err)
					}
					defer cl.Close()
					if got := uint64(cl.Authority().AuthorityEpoch); got <= epoch {
						t.Fatalf("epoch on the copy %d, not above %d", got, epoch)
					} else {
						epoch = got
					}
					for id, want := range p.final {
						r, err := cl.OperationResult(cctx, id)
						if r == nil { // a REJECTED result comes with its error
							t.Fatalf("result of %s: %v", id, err)
						}
						if diff := cmp.Diff(want, r.Operation, cmpopts.EquateEmpty()); diff != "" { // a decoder's nil or empty payload
							t.Fatalf("result of %s on the copy:\n%s", id, diff)
						}
					}
					for _, id := range p.tombed {
						if _, err := cl.OperationResult(cctx, id); !errors.Is(err, coordclient.ErrTombstoned) {
							t.Fatalf("tombstoned result on the copy: %v", err)
						}
					}
					cl.Close()
					if err := srv.Shutdown(cctx); err != nil {
						t.Fatal(err)
					}
				})
			}
		})
	}
}
