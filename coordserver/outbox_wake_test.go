package coordserver_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// viewCountingStore is a real store whose read transactions are counted.
type viewCountingStore struct {
	coordstore.Store
	views atomic.Int64
}

func (s *viewCountingStore) View(ctx context.Context, fn func(coordstore.ReadTx) error) error {
	s.views.Add(1)
	return s.Store.View(ctx, fn)
}

// TestObjectiveCommandsLeaveTheDispatcherAsleep: an objective command
// writes nothing the effect dispatcher reads (§8's outbox belongs to the
// Run lifecycle), so durable CREATE_OBJECTIVEs and UPDATE_OBJECTIVEs —
// one store Update each — cost no pass over the READY rows: no read
// transaction at all.
func TestObjectiveCommandsLeaveTheDispatcherAsleep(t *testing.T) {
	e := newEnv(t, time.Minute)
	st := &viewCountingStore{Store: memstore.New(memstore.Config{})}
	defer st.Close()
	_, path := e.serve(e.config(st))
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	c, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	time.Sleep(100 * time.Millisecond) // the activation's own reads are done
	before := st.views.Load()
	for range 20 {
		obj := coordwire.NewObjectiveID()
		for rev := range uint64(2) {
			cmd := createCmd(c.reqID(), c.guard, coordwire.NewOperationID(), obj, "doc")
			if rev > 0 {
				cmd = updateCmd(c.reqID(), c.guard, coordwire.NewOperationID(), obj, "doc 2", rev)
			}
			res, err := c.command(cmd)
			if err != nil || res.Tag != coordwire.OperationSucceeded {
				t.Fatalf("command: %v %v", res.Tag, err)
			}
			// The dispatcher, when woken, runs at once: give it the time.
			time.Sleep(2 * time.Millisecond)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := st.views.Load() - before; n != 0 {
		t.Fatalf("40 objective commands made %d read transactions, want 0", n)
	}
}
