package core_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/boltstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// modelCmd is one random command of the property test.
type modelCmd struct {
	Principal int  // 0 alice, 1 bob
	Op        byte // OperationId 1..6
	Update    bool
	Objective byte // 1..3
	Doc       byte // 'a'..'c'
	HasPre    bool
	PreRev    uint64
	Sweep     bool // instead of a command: advance time past the retention and sweep
}

func (c modelCmd) String() string {
	if c.Sweep {
		return "sweep"
	}
	k := "create"
	if c.Update {
		k = "update"
	}
	pre := ""
	if c.HasPre {
		pre = fmt.Sprintf(" pre=%d", c.PreRev)
	}
	return fmt.Sprintf("p%d op%d %s obj%d doc%c%s", c.Principal, c.Op, k, c.Objective, c.Doc, pre)
}

func genCmd() *rapid.Generator[modelCmd] {
	return rapid.Custom(func(t *rapid.T) modelCmd {
		return modelCmd{
			Principal: rapid.IntRange(0, 1).Draw(t, "principal"),
			Op:        byte(rapid.IntRange(1, 6).Draw(t, "op")),
			Update:    rapid.Bool().Draw(t, "update"),
			Objective: byte(rapid.IntRange(1, 3).Draw(t, "objective")),
			Doc:       byte('a' + rapid.IntRange(0, 2).Draw(t, "doc")),
			HasPre:    rapid.Bool().Draw(t, "has_pre"),
			PreRev:    uint64(rapid.IntRange(0, 3).Draw(t, "pre_rev")),
			Sweep:     rapid.IntRange(0, 15).Draw(t, "sweep") == 0,
		}
	})
}

// model is the simple reference: objectives with revision and document,
// and one outcome per OperationId.
type model struct {
	objectives map[byte]struct {
		rev uint64
		doc byte
	}
	ops map[byte]modelOp
}

type modelOp struct {
	cmd       modelCmd // the admitted command (its identity: principal + digest)
	result    coordwire.OperationResult
	finalized time.Time
	tomb      bool
}

// same reports whether c is the exact duplicate of the admitted command:
// same principal, same digest (kind, payload, preconditions).
func (o modelOp) same(c modelCmd) bool {
	a := o.cmd
	return a.Principal == c.Principal && a.Update == c.Update && a.Objective == c.Objective && a.Doc == c.Doc &&
		a.HasPre == c.HasPre && (!a.HasPre || a.PreRev == c.PreRev)
}

func (c modelCmd) frame(t tb) *coordwire.CoordCommand {
	var p coordwire.CommandPayload = create(obj(c.Objective), string(c.Doc))
	if c.Update {
		p = update(obj(c.Objective), string(c.Doc))
	}
	var pre []coordwire.Precondition
	if c.HasPre {
		pre = append(pre, coordwire.Precondition{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: obj(c.Objective)}, ExpectedRevision: c.PreRev})
	}
	return frame(t, oid(c.Op), p, pre...)
}

// TestModel: a random sequence of create, update, duplicate and
// conflicting commands (and sweeps) against the core on both stores
// matches the model — objectives and revisions, one outcome per
// OperationId, nothing written by a refusal.
func TestModel(t *testing.T) {
	dir := t.TempDir()
	runs := 0
	for _, store := range []string{"memstore", "boltstore"} {
		t.Run(store, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				var s coordstore.Store
				if store == "memstore" {
					s = memstore.New(memstore.Config{})
				} else {
					runs++
					var err error
					s, err = boltstore.Open(filepath.Join(dir, fmt.Sprintf("m%d.db", runs)), boltstore.Config{NoSync: true})
					if err != nil {
						rt.Fatal(err)
					}
				}
				defer s.Close()
				activate(t, s, 1, 1)
				checkModel(rt, s)
			})
		})
	}
}

func checkModel(rt *rapid.T, s coordstore.Store) {
	principals := []core.Principal{alice, bob}
	m := model{objectives: map[byte]struct {
		rev uint64
		doc byte
	}{}, ops: map[byte]modelOp{}}
	now := t0
	seq := uint64(activationEvents)
	cmds := rapid.SliceOfN(genCmd(), 1, 40).Draw(rt, "cmds")
	for i, c := range cmds {
		now = now.Add(time.Second)
		if c.Sweep {
			now = now.Add(floor)
			n := sweep(rt, s, now, 1000)
			due := 0
			for id, op := range m.ops {
				if !op.tomb && !now.Before(op.finalized.Add(floor)) {
					due++
					op.tomb = true
					d, _ := core.Validate(principals[op.cmd.Principal], core.Limits{}, op.cmd.frame(rt))
					op.result = coordwire.OperationResult{Tag: coordwire.OperationTombstoned, CommandDigest: d.Digest, FinalState: coordwire.OperationSucceeded}
					m.ops[id] = op
				}
			}
			if n != due {
				rt.Fatalf("step %d: swept %d, model %d", i, n, due)
			}
			seq += uint64(n)
			continue
		}
		p := principals[c.Principal]
		out, err := run(rt, s, now, p, c.frame(rt))

		// The model's verdict.
		var wantCode coordwire.ErrorCode
		var want coordwire.OperationResult
		wantWrote := false
		if op, ok := m.ops[c.Op]; ok {
			if op.same(c) {
				want = op.result
			} else {
				wantCode = coordwire.OperationConflict
			}
		} else {
			o, exists := m.objectives[c.Objective]
			switch {
			case c.HasPre && c.PreRev != o.rev:
				wantCode = coordwire.RevisionConflict
			case !c.Update && exists:
				wantCode = coordwire.RevisionConflict
			case c.Update && !exists:
				wantCode = coordwire.NotFound
			default:
				o.rev++
				o.doc = c.Doc
				m.objectives[c.Objective] = o
				seq += 2
				want = objectiveResult(seq, obj(c.Objective))
				wantWrote = true
				m.ops[c.Op] = modelOp{cmd: c, result: want, finalized: now}
			}
		}
		if coordwire.CodeOf(err) != wantCode {
			rt.Fatalf("step %d %v: error %v, model code %v", i, c, err, wantCode)
		}
		if err == nil {
			if out.Wrote != wantWrote || !out.Final {
				rt.Fatalf("step %d %v: outcome %+v, model wrote %v", i, c, out, wantWrote)
			}
			if d := cmpDiff(want, out.Result); d != "" {
				rt.Fatalf("step %d %v: result (-model +core):\n%s", i, c, d)
			}
		}
	}

	// The store holds exactly the model's objectives and operations.
	st := dump(rt, s)
	objectives := map[byte]uint64{}
	for _, o := range st.Objects {
		switch o.Key.Kind {
		case coordwire.ObjectKindObjective:
			var rec coordwire.ObjectiveRecord
			if err := rec.DecodeTLV(o.Payload); err != nil {
				rt.Fatal(err)
			}
			mo := m.objectives[o.Key.ID[1]]
			if o.Revision != mo.rev || len(rec.Document) != 1 || rec.Document[0] != mo.doc {
				rt.Fatalf("objective %d: rev %d doc %q, model %+v", o.Key.ID[1], o.Revision, rec.Document, mo)
			}
			objectives[o.Key.ID[1]] = o.Revision
		}
	}
	if len(objectives) != len(m.objectives) {
		rt.Fatalf("store has %d objectives, model %d", len(objectives), len(m.objectives))
	}
	if len(st.Operations) != len(m.ops) {
		rt.Fatalf("store has %d operations, model %d", len(st.Operations), len(m.ops))
	}
	for _, op := range st.Operations {
		mo, ok := m.ops[op.ID[1]]
		if !ok || op.PrincipalKeyID != principals[mo.cmd.Principal].KeyID || op.Tombstoned != mo.tomb {
			rt.Fatalf("operation %x not as modelled (%+v)", op.ID, mo)
		}
		res, err := lookup(rt, s, principals[mo.cmd.Principal], op.ID)
		if err != nil {
			rt.Fatal(err)
		}
		if d := cmpDiff(mo.result, res); d != "" {
			rt.Fatalf("operation %x lookup (-model +core):\n%s", op.ID, d)
		}
	}
	if st.LastSequence != seq {
		rt.Fatalf("last sequence %d, model %d", st.LastSequence, seq)
	}
}
