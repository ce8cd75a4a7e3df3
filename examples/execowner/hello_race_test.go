package execowner_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
)

// TestDialWhileFactsPending: a coordinator that (re)connects while the
// owner has facts to deliver must always read HELLO first. The Server
// used to publish a new connection as the facts' destination before its
// HELLO was written, so a fact retried at that moment reached the socket
// first and Dial refused the connection ("first frame 0x82 is not
// HELLO") — exactly when a restarted coordinator reconnects to an owner
// whose bindings produced facts meanwhile (found by coordserver's
// TestRunCrashSIGKILL).
func TestDialWhileFactsPending(t *testing.T) {
	dir := shortDir(t)
	srv, err := execowner.NewServer(execowner.Config{Journal: filepath.Join(dir, "j"), Fingerprint: testFP})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := execowner.Listen(filepath.Join(dir, "s", "o.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	sock := ln.Addr().String()
	refuse := func(context.Context, coordwire.TerminalSourceFact) error { return errors.New("not now") }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := execowner.Dial(ctx, sock, refuse)
	if err != nil {
		t.Fatal(err)
	}
	// Bindings whose facts are never admitted: they are retried forever.
	doc, err := (&execowner.Executor{Argv: []string{"sh", "-c", "echo pending"}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		req := coordserver.SpawnRequest{Key: coordserver.EffectKey{ID: coordwire.EffectAttemptID{byte(i + 1), byte(i >> 8), 9}, Digest: [32]byte{byte(i + 1)}},
			PendingBinding: coordwire.BindingID{byte(i + 1), byte(i >> 8), 7}, WorkSession: coordwire.WorkSessionID{byte(i + 1), byte(i >> 8), 5},
			Group: execowner.DefaultGroup, ExecutorSchema: execowner.ExecutorSchema, ExecutorDocument: doc}
		if r, err := cl.Spawn(ctx, req); err != nil || r.Rejected {
			t.Fatalf("spawn %d: %+v %v", i, r, err)
		}
	}
	cl.Close()
	// Reconnect for 3 s while about 200 facts a second are retried.
	for i, end := 0, time.Now().Add(3*time.Second); time.Now().Before(end); i++ {
		c, err := execowner.Dial(ctx, sock, refuse)
		if err != nil {
			t.Fatalf("dial %d with facts pending: %v", i, err)
		}
		c.Close()
	}
}
