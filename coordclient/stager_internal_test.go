package coordclient

import (
	"testing"

	"github.com/phuxcoord/coord/coordwire"
)

// listStager stages pages decoded into its spare capacity without a
// copy, grows by doubling when it has no room, starts at the hinted size,
// and trims a slack of more than a quarter at the end — always returning
// exactly the staged records, in order.
func TestListStager(t *testing.T) {
	stage := func(t *testing.T, l *listStager, pages, per int) []coordwire.SnapshotRecord {
		t.Helper()
		n := 0
		for range pages {
			sp := l.spare()
			if len(sp) != 0 || cap(sp) < per {
				t.Fatalf("spare: len %d cap %d, want 0 and at least %d", len(sp), cap(sp), per)
			}
			pg := sp[:per]
			for i := range pg {
				n++
				pg[i] = coordwire.SnapshotRecord{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: [16]byte{byte(n >> 8), byte(n)}},
					Revision: coordwire.ObjectRevision(n), SchemaVersion: 1, Payload: []byte{byte(n)}}
			}
			before := &l.flat[:len(l.flat)+1][len(l.flat)]
			if err := l.page(pg); err != nil {
				t.Fatal(err)
			}
			if &l.flat[len(l.flat)-per] != before {
				t.Fatal("a page decoded in place was copied")
			}
		}
		recs := l.records()
		if len(recs) != pages*per {
			t.Fatalf("%d records, want %d", len(recs), pages*per)
		}
		for i := range recs {
			if recs[i].Revision != coordwire.ObjectRevision(i+1) {
				t.Fatalf("record %d is revision %d", i, recs[i].Revision)
			}
		}
		return recs
	}
	t.Run("grows", func(t *testing.T) {
		recs := stage(t, &listStager{perPage: 10}, 100, 10)
		if cap(recs) > len(recs)+len(recs)/4 {
			t.Fatalf("slack: cap %d for %d records", cap(recs), len(recs))
		}
	})
	t.Run("hinted", func(t *testing.T) {
		l := &listStager{perPage: 10, hint: 1000}
		l.spare()
		if c := cap(l.flat); c < 1000 {
			t.Fatalf("first spare of a hint of 1000: cap %d", c)
		}
		stage(t, l, 100, 10)
	})
	t.Run("overestimated_hint_trimmed", func(t *testing.T) {
		recs := stage(t, &listStager{perPage: 10, hint: 1000}, 3, 10)
		if cap(recs) > len(recs)+len(recs)/4 {
			t.Fatalf("slack: cap %d for %d records", cap(recs), len(recs))
		}
	})
	t.Run("appended_when_not_in_place", func(t *testing.T) {
		l := &listStager{perPage: 4}
		other := []coordwire.SnapshotRecord{{Revision: 1}, {Revision: 2}}
		if err := l.page(other); err != nil {
			t.Fatal(err)
		}
		if recs := l.records(); len(recs) != 2 || recs[1].Revision != 2 || &recs[0] == &other[0] {
			t.Fatalf("records %v", recs)
		}
	})
	t.Run("empty", func(t *testing.T) {
		if recs := (&listStager{perPage: 4}).records(); recs != nil {
			t.Fatalf("empty snapshot: %v", recs)
		}
	})
}
