package coordserver_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"testing"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// tapReader is a deterministic Config.Rand that keeps everything it
// handed out.
type tapReader struct {
	mu   sync.Mutex
	n    uint64
	seen []byte
}

func (r *tapReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := 0; i < len(p); i += 32 {
		h := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("coordserver rand test"), r.n))
		r.n++
		copy(p[i:], h[:])
	}
	r.seen = append(r.seen, p...)
	return len(p), nil
}

func (r *tapReader) drew(b []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Contains(r.seen, b)
}

// Config.Rand is the source of the incarnation, the snapshot and
// subscription ids, the cursors and the event ids.
func TestConfigRandIsTheSource(t *testing.T) {
	tap := &tapReader{}
	e := rfStart(t, rfOptions{limits: pagedLimits(1), edit: func(c *coordserver.Config) { c.Rand = tap }})
	c := e.connect(e.key(rwc), rwc)
	if inc := c.HelloOK().IncarnationID; !tap.drew(inc[:]) {
		t.Error("incarnation not drawn from Config.Rand")
	}
	for range 2 {
		cmd, _ := c.create()
		c.do(cmd)
	}
	b, _ := c.openReserved(coordwire.SubscriptionID{})
	if !tap.drew(b.SnapshotID[:]) || !tap.drew(b.SubscriptionID[:]) || !tap.drew(b.FirstCursor) {
		t.Error("snapshot id, subscription id or cursor not drawn from Config.Rand")
	}
	// The activation's ACTIVATION and RETENTION records, the key's
	// CREDENTIAL record, two objectives with their operations.
	evs := e.storeEvents(0, e.lastSeq(), func(coordstore.Event) bool { return true })
	if len(evs) != 7 {
		t.Fatalf("%d events", len(evs))
	}
	for _, ev := range evs {
		if !tap.drew(ev.EventID[:]) {
			t.Errorf("event %d: id not drawn from Config.Rand", ev.EventSequence)
		}
		if ev.Object.Kind == coordwire.ObjectKindAdmin && !tap.drew(ev.Object.ID[:]) {
			t.Errorf("event %d: ADMIN record id not drawn from Config.Rand", ev.EventSequence)
		}
	}
}
