package execowner_test

import (
	"context"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

const (
	e2eScope = coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand | coordwire.ScopeTerminalControl
	e2eCaps  = coordwire.CapTerminalBindings | coordwire.CapSignals
)

// The separate-process owner behind a real coordinator: cmd/execowner is
// registered through its Dial client (Config.Owner), a START_RUN runs a
// real process whose facts stream over the owner socket into
// AdmitSourceFact and end the Run Failed with exit status 3; then the
// coordinator restarts, dials the same owner process again (the same
// incarnation, registered again) and a second Run starts and completes.
func TestEndToEndSeparateOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := shortDir(t)

	// The witness, the authority, the registry and a client key.
	wid, err := witness.Init(filepath.Join(dir, "w"))
	if err != nil {
		t.Fatal(err)
	}
	wsock := filepath.Join(dir, "w.sock")
	wl, err := net.Listen("unix", wsock)
	if err != nil {
		t.Fatal(err)
	}
	wsrv, err := witness.Open(witness.Config{StateDir: filepath.Join(dir, "w")})
	if err != nil {
		t.Fatal(err)
	}
	wdone := make(chan error, 1)
	go func() { wdone <- wsrv.Serve(context.Background(), wl) }()
	defer func() { wsrv.Close(); <-wdone }()
	coordDir := filepath.Join(dir, "c")
	auth, err := keystore.InitAuthority(coordDir)
	if err != nil {
		t.Fatal(err)
	}
	wk, err := keystore.GenerateWorkloadKey(filepath.Join(dir, "k", "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keystore.AddKey(coordDir, wk.Public(), e2eScope, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	reg, err := keystore.NewWatcher(ctx, coordDir, keystore.WatcherConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	st := memstore.New(memstore.Config{})
	defer st.Close()

	// The owner, in its own process.
	osock := filepath.Join(dir, "o", "owner.sock")
	startProc(t, osock, filepath.Join(dir, "journal"))

	var port atomic.Pointer[coordserver.Owner]
	sink := func(ctx context.Context, f coordwire.TerminalSourceFact) error {
		o := port.Load()
		if o == nil {
			return coordwire.NewError(coordwire.NotFound, "owner.not_registered")
		}
		_, err := o.AdmitSourceFact(ctx, f)
		return err
	}
	csock := filepath.Join(dir, "c.sock")
	start := func() (*coordserver.Server, *execowner.Client, chan error) {
		t.Helper()
		cl := dial(t, osock, sink)
		srv, err := coordserver.New(ctx, coordserver.Config{
			Store: st, Witness: witness.ClientConfig{Address: "unix:" + wsock, WitnessPublicKey: wid.PublicKey},
			AuthorityKey: auth, Registry: reg, Capabilities: e2eCaps,
			Owner: &coordserver.OwnerRegistration{Fingerprint: cl.Fingerprint(), Incarnation: cl.Incarnation(), Adapter: cl},
		})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		port.Store(srv.Owner())
		l, err := coordserver.ListenUnix(csock)
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(l) }()
		return srv, cl, served
	}
	stop := func(srv *coordserver.Server, cl *execowner.Client, served chan error) {
		t.Helper()
		port.Store(nil)
		sctx, c := context.WithTimeout(ctx, 10*time.Second)
		defer c()
		if err := srv.Shutdown(sctx); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		<-served
		cl.Close()
	}
	key, err := coordclient.LoadKeyFile(filepath.Join(dir, "k", "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	runOnce := func(cl *execowner.Client, obj coordwire.ObjectiveID, argv []string) (coordwire.RunRecord, coordwire.BindingID) {
		t.Helper()
		c, err := coordclient.Dial(ctx, "unix:"+csock, coordclient.Config{WorkloadKey: key, AuthorityFingerprint: auth.Fingerprint(),
			WitnessPublicKey: wid.PublicKey, Scope: e2eScope, OfferedCapabilities: e2eCaps, RequiredCapabilities: e2eCaps})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if obj == (coordwire.ObjectiveID{}) {
			t.Fatal("no objective")
		}
		if _, err := c.Command(ctx, coordclient.CreateObjective(obj, coordwire.RecordSchemaVersion, []byte("e2e"))); err != nil {
			t.Fatal(err)
		}
		x := execowner.Executor{Argv: argv}
		d, _ := x.Marshal()
		p := coordwire.StartRun{ObjectiveID: obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.NewWorkSessionID(),
			ExecutorSchema: execowner.ExecutorSchema, ExecutorDocument: d, PendingBindingID: coordwire.NewPendingBindingID(),
			OwnerAuthorityFingerprint: cl.Fingerprint(), OwnerIncarnation: cl.Incarnation(), TerminalGroup: execowner.DefaultGroup}
		res, err := c.Command(ctx, coordclient.StartRun(p))
		if err == nil {
			res, err = c.WaitFinal(ctx, res.OperationID)
		}
		if err != nil {
			t.Fatalf("START_RUN: %v", err)
		}
		if _, ok := res.Started(); !ok {
			t.Fatalf("START_RUN: %v", res.Tag())
		}
		m := coordclient.NewMirror(c, coordclient.MirrorConfig{})
		defer m.Close()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if o, ok := m.Get(coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: p.RunID}); ok {
				if r := o.(*coordclient.Run); r.State == coordwire.RunFailed || r.State == coordwire.RunCompleted {
					return r.RunRecord, coordwire.BindingID(p.PendingBindingID)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Run did not end; mirror %+v", m.Status())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	srv, cl, served := start()
	inc := cl.Incarnation()
	run, _ := runOnce(cl, coordwire.NewObjectiveID(), []string{"sh", "-c", "echo hi; exit 3"})
	var closed coordwire.SourceFactPayload
	if err := closed.DecodeAs(coordwire.SourceClosed, run.Outcome); err != nil || run.State != coordwire.RunFailed || closed.ExitStatus != 3 {
		t.Fatalf("run %+v (%v), want Failed with exit status 3", run, err)
	}
	stop(srv, cl, served)

	srv, cl, served = start()
	defer func() { stop(srv, cl, served) }()
	if cl.Incarnation() != inc {
		t.Fatal("the owner process changed incarnation across a coordinator restart")
	}
	run, _ = runOnce(cl, coordwire.NewObjectiveID(), []string{"true"})
	if run.State != coordwire.RunCompleted {
		t.Fatalf("second run %+v, want Completed", run)
	}
}
