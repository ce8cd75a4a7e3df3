//go:build linux || darwin

package coordclient_test

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
)

// TestEndToEndDocumentAtTheNegotiatedBound (§3.2: "A record/list/
// manifest/cache is additionally bounded by its enclosing cap"):
//
//   - a CREATE_OBJECTIVE and an UPDATE_OBJECTIVE whose document is exactly
//     coordwire.MaxObjectiveDocumentBytes of the negotiated limits SUCCEED;
//     one byte more, and a manifest one byte over
//     coordwire.MaxArtifactManifestBytes, are refused by the client before
//     anything is sent, RESOURCE_EXHAUSTED "limits.produced_event" as the
//     coordinator answers (coordserver's TestSection3MaxDocumentReachesEverySubscriber),
//     with the store unchanged;
//   - a Mirror that negotiated the writer's limits follows both events
//     live, without a GAP;
//   - a Mirror with a smaller typed-payload cap gets GAP QUEUE_OVERFLOW
//     (never INTERNAL, never a frame its decoder refuses), finds the replay
//     overflowing the same way, heals by a replacing snapshot on the same
//     connection and converges.
func TestEndToEndDocumentAtTheNegotiatedBound(t *testing.T) {
	scope := coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand
	e := newE2E(t, 10*time.Second, scope)
	caps := coordwire.CapEventReplay | coordwire.CapArtifactManifests
	e.edit = func(c *coordserver.Config) { c.Capabilities |= caps }
	st := memstore.New(memstore.Config{})
	defer st.Close()
	path := filepath.Join(e.sockDir, "c.sock")
	srv := e.start(st, path)
	commands := func() uint64 { return srv.Stats().Requests[coordwire.TypeCoordCommand] }
	dial := func(l coordwire.Limits) *coordclient.Client {
		cfg := e.config()
		cfg.Limits = l
		cfg.OfferedCapabilities = caps
		c, err := coordclient.Dial(tctx(t), "unix:"+path, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ref := coordwire.ReferenceLimits()
	small := coordwire.Limits{MaxFrameBytes: 256 << 10, MaxPageBytes: 192 << 10, MaxPageRecords: 64,
		MaxTypedPayloadBytes: 32 << 10, MaxEventCreditCount: 64, MaxEventCreditBytes: 1 << 20}
	w := dial(ref)
	if _, err := w.Command(tctx(t), coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("seed"))); err != nil {
		t.Fatal(err)
	}
	mw := coordclient.NewMirror(dial(ref), coordclient.MirrorConfig{})
	defer mw.Close()
	ms := coordclient.NewMirror(dial(small), coordclient.MirrorConfig{BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	defer ms.Close()
	for _, m := range []*coordclient.Mirror{mw, ms} {
		if err := m.WaitSynced(tctx(t)); err != nil {
			t.Fatal(err)
		}
	}

	n, ok := coordwire.MaxObjectiveDocumentBytes(ref)
	if !ok {
		t.Fatal("the reference limits carry no document")
	}
	id := coordwire.NewObjectiveID()
	refused := func(cmd *coordclient.Cmd) {
		t.Helper()
		before, err := storetest.Dump(context.Background(), st)
		if err != nil {
			t.Fatal(err)
		}
		sent := commands()
		_, err = w.Command(tctx(t), cmd)
		if e := wantErr(t, err, coordwire.ResourceExhausted, nil); e.Reason != coordwire.ReasonProducedOverLimits {
			t.Fatalf("refusal %+v, want reason %q", e, coordwire.ReasonProducedOverLimits)
		}
		after, err := storetest.Dump(context.Background(), st)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(before, after) || commands() != sent {
			t.Fatal("a command refused before sending reached the coordinator")
		}
	}
	refused(coordclient.CreateObjective(id, 1, bytes.Repeat([]byte{'d'}, n+1)))
	man, ok := coordwire.MaxArtifactManifestBytes(small)
	if !ok {
		t.Fatal("the small limits carry no manifest")
	}
	// (Not a valid manifest document: the coordinator would refuse it
	// MALFORMED_MESSAGE; the local bound comes first.)
	if _, err := dial(small).Command(tctx(t), coordclient.RegisterArtifactManifest(coordwire.NewArtifactID(), 1, 1, bytes.Repeat([]byte{'m'}, man+1))); err == nil {
		t.Fatal("a manifest over the bound was not refused")
	} else if e := wantErr(t, err, coordwire.ResourceExhausted, nil); e.Reason != coordwire.ReasonProducedOverLimits {
		t.Fatalf("manifest refusal %+v", e)
	}

	if r, err := w.Command(tctx(t), coordclient.CreateObjective(id, 1, bytes.Repeat([]byte{'d'}, n))); err != nil || !r.Succeeded() {
		t.Fatalf("CREATE_OBJECTIVE at the bound: %v %v", r, err)
	}
	refused(coordclient.UpdateObjective(id, 1, bytes.Repeat([]byte{'u'}, n+1)))
	if r, err := w.Command(tctx(t), coordclient.UpdateObjective(id, 1, bytes.Repeat([]byte{'u'}, n))); err != nil || !r.Succeeded() {
		t.Fatalf("UPDATE_OBJECTIVE at the bound: %v %v", r, err)
	}

	converged(t, w, mw)
	if got := mw.Stats(); got.Gaps != ([8]uint64{}) || got.Replacements != 0 || got.Reconnects != 0 {
		t.Fatalf("the Mirror with the writer's limits: %+v", got)
	}
	converged(t, w, ms)
	got := ms.Stats()
	if got.Gaps[coordwire.GapQueueOverflow] == 0 || got.Gaps[coordwire.GapInternal] != 0 || got.Replacements == 0 || got.Reconnects != 0 {
		t.Fatalf("the Mirror with a smaller typed-payload cap: %+v (last error %v)", got, ms.Status().Err)
	}
}
