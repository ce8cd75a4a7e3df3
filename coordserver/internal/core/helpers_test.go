package core_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// opener opens a fresh store of one implementation.
type opener struct {
	name string
	open func(t testing.TB) coordstore.Store
}

func openers() []opener {
	return []opener{
		{"memstore", func(t testing.TB) coordstore.Store {
			s := memstore.New(memstore.Config{})
			t.Cleanup(func() { s.Close() })
			return s
		}},
		{"boltstore", func(t testing.TB) coordstore.Store {
			s, err := boltstore.Open(filepath.Join(t.TempDir(), "coord.db"), boltstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	}
}

// eachStore runs f against a fresh activated store of every implementation.
func eachStore(t *testing.T, f func(t *testing.T, s coordstore.Store)) {
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			s := o.open(t)
			activate(t, s, 1, 1)
			f(t, s)
		})
	}
}

var testCoordinator = coordwire.CoordinatorID{0xc0, 1}

func activate(t tb, s coordstore.Store, epoch, seq uint64) {
	t.Helper()
	c := &coordwire.ActivationCertificate{
		Version: 1, CoordinatorID: testCoordinator,
		AuthorityEpoch: coordwire.AuthorityEpoch(epoch), ActivationSequence: coordwire.ActivationSequence(seq),
		IncarnationID: coordwire.IncarnationID{0x1c, byte(epoch)}, WitnessID: coordwire.ActivationWitnessID{0x3e, 1},
		FencingToken: [32]byte{byte(epoch), byte(seq)},
	}
	if err := s.Update(context.Background(), func(tx coordstore.Tx) error { return core.Activate(tx, c) }); err != nil {
		t.Fatal(err)
	}
}

// activationEvents is the number of events the first activation of a
// store appends: ADMIN_CHANGED of its ACTIVATION and of its RETENTION
// record (docs/semantics.md).
const activationEvents = 2

func key(b byte) [32]byte { return [32]byte{0x4b, b} }

var (
	alice = core.Principal{KeyID: key(1), Scope: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand}
	bob   = core.Principal{KeyID: key(2), Scope: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand}
	admin = core.Principal{KeyID: key(9), Scope: coordwire.ScopeAdmin, Caps: coordwire.CapAdministration}
)

func oid(b byte) coordwire.OperationID { return coordwire.OperationID{0x0b, b} }
func obj(b byte) coordwire.ObjectiveID { return coordwire.ObjectiveID{0x0a, b} }

// frame builds a COORD_COMMAND and round-trips it through the frame codec,
// so the core sees exactly what the server's decoder hands it.
func frame(t tb, op coordwire.OperationID, p coordwire.CommandPayload, pre ...coordwire.Precondition) *coordwire.CoordCommand {
	t.Helper()
	c := &coordwire.CoordCommand{
		RequestID: 1, Guard: coordwire.AuthorityGuard{CoordinatorID: testCoordinator, AuthorityEpoch: 1, ActivationSequence: 1},
		OperationID: op, Kind: p.Kind(), Payload: p.AppendTLV(nil), Preconditions: pre,
	}
	var d coordwire.CoordCommand
	if err := d.DecodeBody(c.AppendBody(nil)); err != nil {
		t.Fatalf("test command does not decode: %v", err)
	}
	return &d
}

func create(id coordwire.ObjectiveID, doc string) *coordwire.CreateObjective {
	return &coordwire.CreateObjective{ObjectiveID: id, Schema: 1, Document: []byte(doc)}
}

func update(id coordwire.ObjectiveID, doc string) *coordwire.UpdateObjective {
	return &coordwire.UpdateObjective{ObjectiveID: id, Schema: 1, Document: []byte(doc)}
}

// run validates and executes cmd in one Update at now.
func run(t tb, s coordstore.Store, now time.Time, p core.Principal, cmd *coordwire.CoordCommand) (core.Outcome, error) {
	t.Helper()
	return runL(t, s, now, p, core.Limits{}, cmd)
}

// runL is run under limits l.
func runL(t tb, s coordstore.Store, now time.Time, p core.Principal, l core.Limits, cmd *coordwire.CoordCommand) (core.Outcome, error) {
	t.Helper()
	c, err := core.Validate(p, l, cmd)
	if err != nil {
		return core.Outcome{}, err
	}
	var out core.Outcome
	err = s.Update(context.Background(), func(tx coordstore.Tx) error {
		var err error
		out, err = core.Execute(tx, now, p, l, c)
		return err
	})
	return out, core.MapStoreError(err)
}

func mustRun(t tb, s coordstore.Store, now time.Time, p core.Principal, cmd *coordwire.CoordCommand) core.Outcome {
	t.Helper()
	out, err := run(t, s, now, p, cmd)
	if err != nil {
		t.Fatalf("command refused: %v", err)
	}
	return out
}

func dump(t tb, s coordstore.Store) storetest.State {
	t.Helper()
	st, err := storetest.Dump(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// wantRefusal checks err is a *coordwire.Error with code and reason.
func wantRefusal(t tb, err error, code coordwire.ErrorCode, reason string) {
	t.Helper()
	var e *coordwire.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want %v %q", err, code, reason)
	}
	if e.Code != code || e.Reason != reason {
		t.Fatalf("refusal = %v %q, want %v %q", e.Code, e.Reason, code, reason)
	}
	if coordwire.CodeOf(err) != code {
		t.Fatalf("CodeOf = %v, want %v", coordwire.CodeOf(err), code)
	}
}

func diff(t tb, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("mismatch (-want +got):\n%s", d)
	}
}

func lookup(t tb, s coordstore.Store, p core.Principal, id coordwire.OperationID) (coordwire.OperationResult, error) {
	var res coordwire.OperationResult
	err := s.View(context.Background(), func(tx coordstore.ReadTx) error {
		var err error
		res, err = core.Lookup(tx, p, id)
		return err
	})
	return res, err
}

func cmpDiff(want, got any) string { return cmp.Diff(want, got) }

// tb is what the helpers need of a test: *testing.T and *rapid.T both.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}
