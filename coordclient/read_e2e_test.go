//go:build linux || darwin

package coordclient_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// Verified snapshots against the real server: empty, one page and several
// pages (four records per page negotiated), each holding exactly the
// objectives and operations the principal created.
func TestEndToEndSnapshot(t *testing.T) {
	e := newE2E(t, 10*time.Second, coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	path := filepath.Join(e.sockDir, "c.sock")
	s := e.start(st, path)
	cfg := e.config()
	cfg.Limits = coordwire.ReferenceLimits()
	cfg.Limits.MaxPageRecords = 4
	c, err := coordclient.Dial(tctx(t), "unix:"+path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := tctx(t)

	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base0 := snap.BaseEventCut
	if len(snap.Records) != 0 || snap.Pages != 0 {
		t.Fatalf("empty store: %d records in %d pages", len(snap.Records), snap.Pages)
	}
	if snap.Guard.AuthorityEpoch != s.Epoch() || snap.Guard.CoordinatorID != s.CoordinatorID() {
		t.Fatalf("guard %+v", snap.Guard)
	}

	want := map[coordwire.ObjectiveID]string{}
	for i, n := range []int{1, 8} {
		for j := len(want); j < n; j++ {
			id := coordwire.NewObjectiveID()
			doc := "doc " + string(rune('a'+j))
			if _, err := c.Command(ctx, coordclient.CreateObjective(id, 1, []byte(doc))); err != nil {
				t.Fatal(err)
			}
			want[id] = doc
		}
		snap, err := c.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[coordwire.ObjectiveID]string{}
		ops := 0
		for k := range snap.Records {
			r := &snap.Records[k]
			p, err := r.DecodePayload()
			if err != nil {
				t.Fatal(err)
			}
			switch v := p.(type) {
			case *coordwire.ObjectiveRecord:
				got[coordwire.ObjectiveID(r.Object.ID)] = string(v.Document)
			case *coordwire.OperationRecord:
				ops++
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d objectives (-want +got):\n%s", i, diff)
		}
		if ops != len(want) || len(snap.Records) != 2*len(want) {
			t.Fatalf("round %d: %d operations, %d records", i, ops, len(snap.Records))
		}
		if wantPages := uint32((2*len(want) + 3) / 4); snap.Pages != wantPages {
			t.Fatalf("round %d: %d pages, want %d", i, snap.Pages, wantPages)
		}
		if snap.BaseEventCut <= base0 {
			t.Fatalf("base %d did not advance from %d", snap.BaseEventCut, base0)
		}
		// The same state twice is the same snapshot, byte for byte.
		again, err := c.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(snap.Records, again.Records); diff != "" || snap.Digest != again.Digest {
			t.Fatalf("second snapshot differs:\n%s", diff)
		}
	}
	if !c.Session().Alive {
		t.Fatal("the connection died")
	}
}
