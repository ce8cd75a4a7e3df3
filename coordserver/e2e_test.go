package coordserver_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// A client authenticates over a real Unix socket against a coordinator
// activated with a real witness daemon, creates an Objective, gets the same
// stored result for the same command again, and finds it by lookup.
func TestEndToEndUnix(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	s, path := e.serve(e.config(st))
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	c, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if c.ok.CoordinatorID != s.CoordinatorID() || c.ok.AuthorityEpoch != s.Epoch() || c.ok.IncarnationID != s.Incarnation() {
		t.Fatal("HELLO_OK does not name the server's activation")
	}
	if c.ok.OperationResultRetentionSecs < coordwire.MinOperationResultRetentionSecs {
		t.Fatalf("retention %d", c.ok.OperationResultRetentionSecs)
	}
	op, obj := coordwire.NewOperationID(), coordwire.NewObjectiveID()
	r1, err := c.command(createCmd(c.reqID(), c.guard, op, obj, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	if r1.Tag != coordwire.OperationSucceeded || r1.ResultKind != coordwire.ResultObjectRef {
		t.Fatalf("result %+v", r1)
	}
	r2, err := c.command(createCmd(c.reqID(), c.guard, op, obj, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r1, r2); diff != "" {
		t.Fatalf("duplicate differs (-first +second):\n%s", diff)
	}
	r3, err := c.lookup(op)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r1, r3); diff != "" {
		t.Fatalf("lookup differs:\n%s", diff)
	}
	if r, err := c.lookup(coordwire.NewOperationID()); err != nil || r.Tag != coordwire.OperationUnknown {
		t.Fatalf("unknown id: %+v %v", r, err)
	}
}
