package coordserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
)

// A newer activation installed in the store (a standby of the lineage took
// over: its activation transaction wrote a higher epoch, activation
// sequence and token hash) fences this server's next commit through the
// writer identity the activation installed with SetWriter: the command is
// answered AUTHORITY_FENCED, nothing is written, and the server fences
// itself, although its own lease is still valid.
func TestStoreFencedCommit(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	s, path := e.serve(e.config(st))
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	c, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if _, err := c.command(createCmd(c.reqID(), c.guard, coordwire.NewOperationID(), coordwire.NewObjectiveID(), "a")); err != nil {
		t.Fatalf("command before the takeover: %v", err)
	}
	ctx := context.Background()
	m, err := st.Meta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.AuthorityEpoch++
	m.ActivationSequence++
	m.FencingTokenSHA256[0] ^= 0xff
	if err := st.Update(ctx, func(tx coordstore.Tx) error { return tx.PutMeta(m) }); err != nil {
		t.Fatal(err)
	}
	before, err := storetest.Dump(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.command(createCmd(c.reqID(), c.guard, coordwire.NewOperationID(), coordwire.NewObjectiveID(), "b"))
	if codeOf(err) != coordwire.AuthorityFenced {
		t.Fatalf("command after the takeover: %v, want AUTHORITY_FENCED", err)
	}
	after, err := storetest.Dump(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, after); d != "" {
		t.Fatalf("the fenced commit changed the store:\n%s", d)
	}
	select {
	case <-s.Fenced():
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not fence itself")
	}
}
