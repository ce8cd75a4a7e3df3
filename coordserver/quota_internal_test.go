package coordserver

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// §3.2: the growth of a granted cut is charged past the pinned-byte
// bounds (never refused, never evicting it), and while a holder is at or
// above its bound every new cut is refused — one with no reserve to
// charge (a cut of an empty store) included — while charges that are not
// cuts still go through. Returning the growth lets new cuts in again.
func TestSection3_2PinnedBoundRefusesNewCutsOnly(t *testing.T) {
	l := Quotas{PinnedBytesPerConnection: 1000, PinnedBytesPerPrincipal: 1000, PinnedBytes: 10_000}.withDefaults()
	var q quotaBook
	q.init()
	var held, other readUsage
	p := [32]byte{1}
	cut := readUsage{leases: 1, pinned: 400}
	if r := q.takeRead(l, &held, p, cut); r != "" {
		t.Fatalf("first cut refused: %s", r)
	}
	if !q.forcePinned(l, &held, p, 700) {
		t.Fatal("growth to 1,100 of 1,000 pinned bytes not reported as crossing the bound")
	}
	if q.forcePinned(l, &held, p, 1) {
		t.Fatal("growth already past the bound reported as crossing it again")
	}
	want := readUsage{leases: 1, pinned: 1101}
	if d := cmp.Diff(want, *q.by[p], cmp.AllowUnexported(readUsage{})); d != "" {
		t.Fatalf("principal's charge (-want +got):\n%s", d)
	}
	for _, c := range []struct {
		name string
		d    readUsage
		want string
	}{
		{"cut with a reserve", readUsage{leases: 1, pinned: 400}, "quota.pinned_bytes_per_principal"},
		{"cut with no reserve", readUsage{leases: 1}, "quota.pinned_bytes_per_principal"},
		{"subscription", readUsage{subs: 1}, ""},
	} {
		if r := q.takeRead(l, &other, p, c.d); r != c.want {
			t.Errorf("%s: %q, want %q", c.name, r, c.want)
		}
	}
	// At the bound exactly: still refused.
	q.releaseRead(&held, p, readUsage{pinned: 101})
	if r := q.takeRead(l, &other, p, readUsage{leases: 1}); r != "quota.pinned_bytes_per_principal" {
		t.Fatalf("a new cut at the bound: %q", r)
	}
	q.releaseRead(&held, p, readUsage{pinned: 1})
	if r := q.takeRead(l, &other, p, readUsage{leases: 1}); r != "" {
		t.Fatalf("a new cut below the bound: %q", r)
	}
}

// The room an OPEN_REPLAY gives the store for its range is what the
// tightest of the connection's, the principal's and the server's
// pinned-byte bounds leaves, named by that bound: charging exactly the
// room is accepted, one byte more refused with the same reason.
func TestPinRoomIsTheTightestBound(t *testing.T) {
	l := Quotas{PinnedBytesPerConnection: 1000, PinnedBytesPerPrincipal: 1500, PinnedBytes: 2000}.withDefaults()
	p, o := [32]byte{1}, [32]byte{2}
	for _, c := range []struct {
		name                  string
		conn, principal, othr int64 // pinned by this connection, by another of p, by another principal
		room                  int64
		reason                string
	}{
		{"connection", 100, 0, 0, 900, "quota.pinned_bytes_per_connection"},
		{"principal", 100, 700, 0, 700, "quota.pinned_bytes_per_principal"},
		{"server", 100, 0, 1500, 400, "quota.pinned_bytes"},
	} {
		var q quotaBook
		q.init()
		var conn, sib, foreign readUsage
		q.forcePinned(l, &conn, p, c.conn)
		q.forcePinned(l, &sib, p, c.principal)
		q.forcePinned(l, &foreign, o, c.othr)
		room, reason := q.pinRoom(l, &conn, p)
		if room != c.room || reason != c.reason {
			t.Errorf("%s: room %d (%s), want %d (%s)", c.name, room, reason, c.room, c.reason)
			continue
		}
		if r := q.takeRead(l, &conn, p, readUsage{pinned: room + 1}); r != c.reason {
			t.Errorf("%s: one byte past the room refused %q, want %q", c.name, r, c.reason)
		}
		if r := q.takeRead(l, &conn, p, readUsage{pinned: room}); r != "" {
			t.Errorf("%s: the room refused: %q", c.name, r)
		}
	}
}
