package coordclient_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// Every builder of A.6 encodes its payload with coordwire's payload type,
// mints a fresh nonzero id, and its digest is the §8 digest of the frame
// it sends.
func TestBuilders(t *testing.T) {
	obj, run, sig := coordwire.NewObjectiveID(), coordwire.NewRunID(), coordwire.NewSignalID()
	start := coordwire.StartRun{ObjectiveID: obj, RunID: run, WorkSessionID: coordwire.NewWorkSessionID(), ExecutorSchema: 1,
		ExecutorDocument: []byte("exec"), PendingBindingID: coordwire.NewPendingBindingID(), OwnerAuthorityFingerprint: [32]byte{1},
		OwnerIncarnation: coordwire.NewIncarnationID(), TerminalGroup: []byte("g")}
	cases := []struct {
		cmd  *coordclient.Cmd
		want coordwire.CommandPayload
	}{
		{coordclient.CreateObjective(obj, 1, []byte("d")), &coordwire.CreateObjective{ObjectiveID: obj, Schema: 1, Document: []byte("d")}},
		{coordclient.UpdateObjective(obj, 1, []byte("e")), &coordwire.UpdateObjective{ObjectiveID: obj, Schema: 1, Document: []byte("e")}},
		{coordclient.StartRun(start), &start},
		{coordclient.CancelRun(run), &coordwire.CancelRun{RunID: run}},
		{coordclient.PauseRun(run), &coordwire.PauseRun{RunID: run}},
		{coordclient.ResumeRun(run), &coordwire.ResumeRun{RunID: run}},
		{coordclient.AckSignal(sig, "seen"), &coordwire.AckSignal{SignalID: sig, Note: "seen"}},
		{coordclient.SuppressSignal(sig, ""), &coordwire.SuppressSignal{SignalID: sig}},
		{coordclient.RegisterArtifactManifest(coordwire.NewArtifactID(), 1, 1, []byte("m")), nil},
		{coordclient.EndBinding(coordwire.NewBindingID(), coordwire.EndReason(2)), nil},
		{coordclient.ChangeRetention(coordwire.MinOperationResultRetentionSecs, 1, 2), &coordwire.ChangeRetention{OperationResultSecs: coordwire.MinOperationResultRetentionSecs, EventBytes: 1, ArtifactBytes: 2}},
	}
	seen := map[coordwire.OperationID]bool{}
	kinds := map[coordwire.CommandKind]bool{}
	for _, c := range cases {
		if err := c.cmd.Err(); err != nil {
			t.Fatalf("%v: %v", c.cmd.Kind(), err)
		}
		id := c.cmd.OperationID()
		if id.IsZero() || seen[id] {
			t.Fatalf("%v: id %v", c.cmd.Kind(), id)
		}
		seen[id], kinds[c.cmd.Kind()] = true, true
		got, err := coordwire.DecodeCommandPayload(c.cmd.Kind(), c.cmd.Payload())
		if err != nil {
			t.Fatalf("%v: %v", c.cmd.Kind(), err)
		}
		if c.want != nil {
			if diff := cmp.Diff(c.want.AppendTLV(nil), got.AppendTLV(nil)); diff != "" {
				t.Fatalf("%v payload:\n%s", c.cmd.Kind(), diff)
			}
		}
		d, err := c.cmd.Digest()
		if err != nil {
			t.Fatal(err)
		}
		want, err := digest.OperationFromCommand(&coordwire.CoordCommand{RequestID: 1, OperationID: id, Kind: c.cmd.Kind(), Payload: c.cmd.Payload()})
		if err != nil || d != want {
			t.Fatalf("%v digest %x want %x (%v)", c.cmd.Kind(), d, want, err)
		}
	}
	if len(kinds) != 11 {
		t.Fatalf("%d kinds covered, want all 11 of A.6", len(kinds))
	}
}

func TestCommandPreconditions(t *testing.T) {
	a, b := coordwire.NewObjectiveID(), coordwire.NewObjectiveID()
	c := coordclient.UpdateObjective(a, 1, nil, coordclient.ObjectiveAt(b, 3), coordclient.ObjectiveAt(a, 2))
	pre := c.Preconditions()
	if len(pre) != 2 || pre[0].Object.Compare(pre[1].Object) >= 0 {
		t.Fatalf("preconditions not in canonical order: %+v", pre)
	}
	dup := coordclient.UpdateObjective(a, 1, nil, coordclient.ObjectiveAt(a, 1), coordclient.ObjectiveAt(a, 1))
	checkInvalid(t, dup, "preconditions.duplicate")
	many := make([]coordwire.Precondition, coordwire.MaxPreconditions+1)
	for i := range many {
		many[i] = coordclient.ObjectiveAt(coordwire.NewObjectiveID(), 1)
	}
	checkInvalid(t, coordclient.UpdateObjective(a, 1, nil, many...), "list.too_many")
	checkInvalid(t, coordclient.CancelRun(coordwire.RunID{}), "id.zero")
	checkInvalid(t, coordclient.CreateObjective(a, 1, nil).WithOperationID(coordwire.OperationID{}), "id.zero")
	checkInvalid(t, coordclient.NewCommand(nil), "command.nil_payload")
	// WithOperationID keeps the payload and changes only the id.
	orig := coordclient.CreateObjective(a, 1, []byte("x"))
	id := coordwire.NewOperationID()
	again := orig.WithOperationID(id)
	if again.OperationID() != id || orig.OperationID() == id || !cmp.Equal(again.Payload(), orig.Payload()) {
		t.Fatal("WithOperationID")
	}
}

// An invalid Cmd is refused before any I/O, by a Client that is never
// contacted.
func checkInvalid(t *testing.T, c *coordclient.Cmd, reason string) {
	t.Helper()
	e := wantErr(t, c.Err(), coordwire.MalformedMessage, nil)
	if e.Reason != reason {
		t.Fatalf("reason %q, want %q", e.Reason, reason)
	}
	if _, err := (&coordclient.Client{}).Command(context.Background(), c); !errors.Is(err, coordwire.MalformedMessage) {
		t.Fatalf("Command: %v", err)
	}
}

func TestDialRefusesBadConfigAndAddress(t *testing.T) {
	good := config()
	cases := map[string]func(*coordclient.Config, *string){
		"no key":              func(c *coordclient.Config, a *string) { c.WorkloadKey = nil },
		"no authority pin":    func(c *coordclient.Config, a *string) { c.AuthorityFingerprint = [32]byte{} },
		"no witness pin":      func(c *coordclient.Config, a *string) { c.WitnessPublicKey = nil },
		"zero scope":          func(c *coordclient.Config, a *string) { c.Scope = 0 },
		"unknown scope bit":   func(c *coordclient.Config, a *string) { c.Scope = 0x40 },
		"required ⊄ offered":  func(c *coordclient.Config, a *string) { c.RequiredCapabilities = coordwire.CapSignals },
		"bad limits":          func(c *coordclient.Config, a *string) { c.Limits = coordwire.Limits{MaxFrameBytes: 1} },
		"sub-second lifetime": func(c *coordclient.Config, a *string) { c.GrantLifetime = 1 },
		"tcp address":         func(c *coordclient.Config, a *string) { *a = "tcp:127.0.0.1:1" },
		"empty unix path":     func(c *coordclient.Config, a *string) { *a = "unix:" },
		"tls without port":    func(c *coordclient.Config, a *string) { *a = "tls:localhost" },
	}
	for name, f := range cases {
		cfg, addr := good, "unix:/nonexistent/coord.sock"
		f(&cfg, &addr)
		_, err := coordclient.Dial(context.Background(), addr, cfg)
		e := wantErr(t, err, coordwire.MalformedMessage, nil)
		if e.Op != "dial" {
			t.Errorf("%s: op %q", name, e.Op)
		}
	}
}

func TestErrorShape(t *testing.T) {
	var e *coordclient.Error
	err := error(&coordclient.Error{Op: "command", Code: coordwire.RevisionConflict, Reason: "r", Remote: true, Message: "m"})
	if !errors.As(err, &e) || coordwire.CodeOf(err) != coordwire.RevisionConflict || !errors.Is(err, coordwire.RevisionConflict) {
		t.Fatal(err)
	}
	if got := err.Error(); got != "coordclient: command: REVISION_CONFLICT: r: m" {
		t.Fatal(got)
	}
	if coordwire.CodeOf(&coordclient.Error{Op: "x"}) != coordwire.Internal {
		t.Fatal("no code must read as INTERNAL")
	}
}
