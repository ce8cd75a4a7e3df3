package coordserver

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// TestFeedEventFrameExact checks that the shared COORD_EVENT frame, copied
// and patched with a subscription id and delivery sequence, is byte for
// byte the frame coordwire encodes for that delivery, for payloads whose
// length varint takes one, two and three bytes.
func TestFeedEventFrameExact(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 300, 20000} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i * 7)
		}
		e := coordstore.Event{Sequence: 0x1122334455667788, ID: coordwire.EventID{9, 8, 7}, Kind: coordwire.EventKind(1),
			Object: coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: [16]byte{4, 5, 6}}, ObjectRevision: 3, Schema: 1, Payload: p}
		fe := newFeedEvent(e)
		if got := int64(len(fe.frame)); got != eventOuterBytes(n) {
			t.Fatalf("payload %d: frame of %d bytes, eventOuterBytes %d", n, got, eventOuterBytes(n))
		}
		sub := coordwire.SubscriptionID{0xde, 0xad, 0xbe, 0xef, 15: 1}
		for _, d := range []uint64{1, 2, 1 << 40} {
			ce := e.CoordEvent(sub, coordwire.DeliverySequence(d))
			want := coordwire.AppendFrame(nil, &ce)
			got := fe.appendTo([]byte("prefix"), sub, d)[len("prefix"):]
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("payload %d delivery %d: frame differs (-want +got):\n%s", n, d, diff)
			}
		}
		if diff := cmp.Diff(p, fe.ev.Payload); diff != "" {
			t.Fatalf("payload %d: event payload differs:\n%s", n, diff)
		}
	}
}
