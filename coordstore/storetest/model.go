package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// RunModel drives random sequences of transactions (pgregory.net/rapid)
// against a fresh model store and a fresh subject store per case, and
// requires identical observable results: every Tx method's return value and
// error class, every Update's outcome (commit, error, panic), the whole
// State after every Update, and the contents of cuts opened along the way.
// The stores must use the real clock and the default lease.
func RunModel(t *testing.T, model, subject Opener) {
	rapid.Check(t, func(rt *rapid.T) {
		m := model(t, Config{})
		s := subject(t, Config{})
		defer m.Close()
		defer s.Close()
		ctx := context.Background()
		var cutM, cutS coordstore.Cut
		defer func() {
			if cutM != nil {
				cutM.Close()
				cutS.Close()
			}
		}()
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for step := 0; step < steps; step++ {
			if cutM == nil && rapid.IntRange(0, 9).Draw(rt, "openCut") == 0 {
				var err1, err2 error
				cutM, err1 = m.OpenCut(ctx)
				cutS, err2 = s.OpenCut(ctx)
				if err1 != nil || err2 != nil {
					rt.Fatalf("OpenCut: %v / %v", err1, err2)
				}
			}
			ops := rapid.SliceOfN(opGen(), 1, 5).Draw(rt, "ops")
			ending := rapid.SampledFrom([]string{"commit", "commit", "commit", "error", "panic"}).Draw(rt, "ending")
			resM, outM := runModelTx(ctx, m, ops, ending)
			resS, outS := runModelTx(ctx, s, ops, ending)
			if d := cmp.Diff(resM, resS); d != "" {
				rt.Fatalf("step %d: operation results differ (-model +subject):\n%s", step, d)
			}
			if outM != outS {
				rt.Fatalf("step %d: Update outcome model %q subject %q", step, outM, outS)
			}
			stM, err1 := Dump(ctx, m)
			stS, err2 := Dump(ctx, s)
			if err1 != nil || err2 != nil {
				rt.Fatalf("Dump: %v / %v", err1, err2)
			}
			if d := cmp.Diff(stM, stS); d != "" {
				rt.Fatalf("step %d: state differs (-model +subject):\n%s", step, d)
			}
			if cutM != nil {
				compareCuts(rt, ctx, cutM, cutS)
			}
		}
	})
}

// RunModelBatched is RunModel for concurrent transactions. In every step it
// holds the subject busy with a gate transaction, submits 2–4 drawn
// transactions at once (so that a group-committing store runs them in one
// batch, one after another in one underlying transaction), records the
// order in which the subject ran them, runs them in that order against the
// model, and requires identical per-transaction results and outcomes
// (commit, error, panic) and identical state. It requires that the subject
// runs each function exactly once.
func RunModelBatched(t *testing.T, model, subject Opener) {
	endings := []string{"commit", "commit", "error", "panic"}
	rapid.Check(t, func(rt *rapid.T) {
		m := model(t, Config{})
		s := subject(t, Config{})
		defer m.Close()
		defer s.Close()
		ctx := context.Background()
		type txn struct {
			ops    []modelOp
			ending string
		}
		steps := rapid.IntRange(1, 8).Draw(rt, "steps")
		for step := 0; step < steps; step++ {
			txs := make([]txn, rapid.IntRange(2, 4).Draw(rt, "txs"))
			for i := range txs {
				txs[i].ops = rapid.SliceOfN(opGen(), 1, 5).Draw(rt, "ops")
				txs[i].ending = rapid.SampledFrom(endings).Draw(rt, "ending")
			}
			gateIn, gateOpen := make(chan struct{}), make(chan struct{})
			gateErr := make(chan error, 1)
			go func() {
				gateErr <- s.Update(ctx, func(coordstore.Tx) error {
					close(gateIn)
					<-gateOpen
					return nil
				})
			}()
			<-gateIn
			var mu sync.Mutex
			var order []int
			res := make([][]modelResult, len(txs))
			outs := make([]string, len(txs))
			var submitted, done sync.WaitGroup
			for i := range txs {
				submitted.Add(1)
				done.Add(1)
				go func() {
					defer done.Done()
					submitted.Done()
					res[i], outs[i] = runModelTxHook(ctx, s, txs[i].ops, txs[i].ending, func() {
						mu.Lock()
						order = append(order, i)
						mu.Unlock()
					})
				}()
			}
			submitted.Wait()
			time.Sleep(time.Millisecond) // let the submissions queue behind the gate
			close(gateOpen)
			done.Wait()
			if err := <-gateErr; err != nil {
				rt.Fatalf("gate transaction: %v", err)
			}
			if len(order) != len(txs) {
				rt.Fatalf("step %d: %d functions ran for %d transactions", step, len(order), len(txs))
			}
			for _, i := range order {
				resM, outM := runModelTx(ctx, m, txs[i].ops, txs[i].ending)
				if d := cmp.Diff(resM, res[i]); d != "" {
					rt.Fatalf("step %d, transaction %d (run order %v): operation results differ (-model +subject):\n%s", step, i, order, d)
				}
				if outM != outs[i] {
					rt.Fatalf("step %d, transaction %d (run order %v): Update outcome model %q subject %q", step, i, order, outM, outs[i])
				}
			}
			stM, err1 := Dump(ctx, m)
			stS, err2 := Dump(ctx, s)
			if err1 != nil || err2 != nil {
				rt.Fatalf("Dump: %v / %v", err1, err2)
			}
			if d := cmp.Diff(stM, stS); d != "" {
				rt.Fatalf("step %d (run order %v): state differs (-model +subject):\n%s", step, order, d)
			}
		}
	})
}

func compareCuts(rt *rapid.T, ctx context.Context, a, b coordstore.Cut) {
	if a.EventCut() != b.EventCut() || a.OldestRetainedSequence() != b.OldestRetainedSequence() || a.Meta() != b.Meta() ||
		a.RecordCount() != b.RecordCount() || a.RecordBytes() != b.RecordBytes() || a.RetainedEventBytes() != b.RetainedEventBytes() {
		rt.Fatalf("cut headers differ")
	}
	type res struct {
		Objects []coordstore.Object
		Events  []coordstore.Event
		Err     string
	}
	read := func(c coordstore.Cut, after uint64) res {
		var r res
		var err error
		r.Objects, err = collect(c.Objects(ctx, nil))
		r.Err = ErrClass(err)
		r.Events, err = collect(c.Events(ctx, after))
		r.Err += "/" + ErrClass(err)
		return r
	}
	after := a.OldestRetainedSequence() / 2
	if d := cmp.Diff(read(a, after), read(b, after)); d != "" {
		rt.Fatalf("cut contents differ (-model +subject):\n%s", d)
	}
}

// modelOp is one drawn operation; run applies it to a Tx and returns its
// observable result.
type modelOp struct {
	Name string
	A, B uint64
	C    uint8
	P    []byte
}

func (o modelOp) String() string { return fmt.Sprintf("%s(%d,%d,%d,%x)", o.Name, o.A, o.B, o.C, o.P) }

var opNames = []string{
	"putObject", "putObject", "putObject", "deleteObject", "getObject", "objects",
	"appendEvent", "appendEvent", "appendEventAt", "pruneEvents", "events", "getEvent",
	"putMeta", "putOperation", "deleteOperation", "operations",
	"putEffect", "deleteEffect", "dispatchReady",
	"putBinding", "putBinding", "appendFact", "facts",
	"deleteBinding", "deleteFacts", "operationIndex", "bindingIndex", "records",
	"dueSweep", "endedSweep", "getRecord", "extendRetention",
}

func opGen() *rapid.Generator[modelOp] {
	return rapid.Custom(func(t *rapid.T) modelOp {
		return modelOp{
			Name: rapid.SampledFrom(opNames).Draw(t, "name"),
			A:    rapid.Uint64Range(0, 6).Draw(t, "a"),
			B:    rapid.Uint64Range(0, 12).Draw(t, "b"),
			C:    rapid.Uint8Range(0, 6).Draw(t, "c"),
			P:    rapid.SliceOfN(rapid.Byte(), 0, 6).Draw(t, "p"),
		}
	})
}

var modelKinds = []coordwire.ObjectKind{0, coordwire.ObjectKindObjective, coordwire.ObjectKindRun, coordwire.ObjectKindArtifactManifest, 77}

// cursorKinds are the kinds of cursor positions: objects, and the derived
// OPERATION and BINDING records between them.
var cursorKinds = []coordwire.ObjectKind{coordwire.ObjectKindObjective, coordwire.ObjectKindBinding, coordwire.ObjectKindRun,
	coordwire.ObjectKindOperation, coordwire.ObjectKindArtifactManifest}

// smallID maps 0 to the zero (invalid) id and n>0 to a nonzero one.
func smallID(n uint64) [16]byte {
	if n == 0 {
		return [16]byte{}
	}
	return ID(n)
}

func modelKey(a uint64, c uint8) coordstore.ObjectKey {
	return coordstore.ObjectKey{Kind: modelKinds[int(c)%len(modelKinds)], ID: smallID(a)}
}

type modelResult struct {
	Op    string
	Value any
	Err   string
}

type errEnding struct{}

func (errEnding) Error() string { return "storetest: model transaction fails" }

func runModelTx(ctx context.Context, s coordstore.Store, ops []modelOp, ending string) (res []modelResult, outcome string) {
	return runModelTxHook(ctx, s, ops, ending, nil)
}

// runModelTxHook is runModelTx with a hook called when the function starts.
func runModelTxHook(ctx context.Context, s coordstore.Store, ops []modelOp, ending string, started func()) (res []modelResult, outcome string) {
	defer func() {
		if r := recover(); r != nil {
			outcome = fmt.Sprint("panic:", r)
		}
	}()
	err := s.Update(ctx, func(tx coordstore.Tx) error {
		if started != nil {
			started()
		}
		for _, op := range ops {
			v, err := applyOp(tx, op)
			res = append(res, modelResult{Op: op.String(), Value: v, Err: ErrClass(err)})
		}
		switch ending {
		case "error":
			return errEnding{}
		case "panic":
			panic("model panic")
		}
		return nil
	})
	if errors.As(err, new(errEnding)) {
		return res, "error"
	}
	return res, ErrClass(err)
}

func applyOp(tx coordstore.Tx, op modelOp) (any, error) {
	switch op.Name {
	case "putObject":
		k := modelKey(op.A, op.C%3+1)
		switch op.C {
		case 6:
			k = modelKey(op.A, 0) // invalid kind
		case 5:
			k = coordstore.ObjectKey{Kind: coordwire.ObjectKindOperation, ID: smallID(op.A)} // derived kind
		}
		var cur uint64
		if o, err := tx.Object(k); err == nil {
			cur = o.Revision
		}
		rev := cur + op.B%3 // 0: conflict (or invalid at 0), 1: next, 2: conflict
		return nil, tx.PutObject(coordstore.Object{Key: k, Revision: rev, Schema: uint16(op.B), Payload: op.P})
	case "deleteObject":
		return nil, tx.DeleteObject(modelKey(op.A, op.C%3+1))
	case "getObject":
		return tx.Object(modelKey(op.A, op.C%3+1))
	case "objects":
		after := coordstore.ObjectKey{Kind: cursorKinds[int(op.C)%len(cursorKinds)], ID: smallID(op.A)}
		var p *coordstore.ObjectKey
		if op.B%2 == 0 {
			p = &after
		}
		return collect(tx.Objects(p))
	case "appendEvent":
		e := coordstore.Event{
			ID: coordwire.EventID(smallID(op.A)), Kind: coordwire.EventKind(op.C * 2),
			Object: modelKey(op.B%5+1, op.C%3+1), ObjectRevision: op.B, Schema: 1, Payload: op.P,
		}
		return tx.AppendEvent(e)
	case "appendEventAt":
		last, err := tx.LastSequence()
		if err != nil {
			return nil, err
		}
		seq := last + op.B%4 // 0 conflicts
		if op.C == 6 {
			seq = math.MaxUint64 - op.A%2
		}
		e := coordstore.Event{
			ID: coordwire.EventID(ID(op.A + 1)), Kind: coordwire.EventRunChanged,
			Object: modelKey(1, 1), ObjectRevision: 1, Sequence: seq, Payload: op.P,
		}
		return nil, tx.AppendEventAt(e)
	case "pruneEvents":
		return tx.PruneEvents(op.B * 20)
	case "events":
		return collect(tx.Events(op.B))
	case "getEvent":
		return tx.Event(op.B)
	case "putMeta":
		m, err := tx.Meta()
		if err != nil {
			return nil, err
		}
		m.StoreSchema = 0
		m.CoordinatorID = coordwire.CoordinatorID(smallID(op.A % 3))
		m.AuthorityEpoch = op.B
		m.ActivationSequence = uint64(op.C)
		m.Retention.EventBytes = op.B * 100
		return nil, tx.PutMeta(m)
	case "putOperation":
		id := coordwire.OperationID(smallID(op.A))
		var cur uint64
		if o, err := tx.Operation(id); err == nil {
			cur = o.Revision
		}
		rev := cur + 1 // mostly valid; sometimes the same revision again
		if op.B%5 == 4 {
			rev = cur
		}
		// Retention 0..2 (sometimes lower than stored: a conflict), or
		// 2^64-1 (RetainUntil saturates).
		ret := (op.B / 2) % 3
		if op.B == 11 {
			ret = math.MaxUint64
		}
		return nil, tx.PutOperation(coordstore.Operation{
			ID: id, Revision: rev, PrincipalKeyID: [32]byte{byte(op.B % 2)},
			Digest: [32]byte{op.C % 2}, Result: op.P, Tombstoned: op.B%3 == 0, AdmittedAt: op.B, FinalizedAt: uint64(op.C % 4),
			RetentionSecs: ret,
		})
	case "extendRetention":
		secs := uint64(op.C)
		if op.C == 6 {
			secs = math.MaxUint64
		}
		return nil, tx.ExtendOperationRetention(coordwire.OperationID(smallID(op.A)), secs)
	case "deleteOperation":
		return nil, tx.DeleteOperation(coordwire.OperationID(smallID(op.A)))
	case "operations":
		after := coordwire.OperationID(smallID(op.A))
		return collect(tx.Operations(&after))
	case "putEffect":
		return nil, tx.PutEffect(coordstore.EffectAttempt{
			ID: coordwire.EffectAttemptID(smallID(op.A)), OperationID: coordwire.OperationID(smallID(op.B % 3)),
			State: coordwire.EffectState(op.C % 6), Image: op.P,
		})
	case "deleteEffect":
		return nil, tx.DeleteEffect(coordwire.EffectAttemptID(smallID(op.A)))
	case "dispatchReady":
		var ids []coordwire.EffectAttemptID
		for e, err := range tx.EffectsByState(coordwire.EffectReady) {
			if err != nil {
				return ids, err
			}
			ids = append(ids, e.ID)
			e.State = coordwire.EffectDispatched
			if err := tx.PutEffect(e); err != nil {
				return ids, err
			}
		}
		return ids, nil
	case "putBinding":
		id := coordwire.BindingID(smallID(op.A % 4))
		b := NewBinding(id)
		b.Ref.OwnerIncarnation = coordwire.IncarnationID(ID(op.B%2 + 1))
		b.Ref.ResourceID = []byte{'r', op.C % 2}
		var cur uint64
		b.SourceSequence = op.B
		if old, err := tx.Binding(id); err == nil {
			cur, b.Ref = old.Revision, old.Ref
			if op.C == 5 {
				b.Ref.ResourceID = []byte("moved") // conflict: the ref is immutable
			}
			if old.Ended {
				b.HasEndReason, b.EndReason, b.EndedAt = old.HasEndReason, old.EndReason, old.EndedAt
			}
			if op.C != 4 { // 4: possibly lower, a conflict
				b.SourceSequence = max(b.SourceSequence, old.SourceSequence)
			}
		}
		// Mostly the next revision (valid); sometimes 0 or the same one.
		b.Revision = cur + 1
		if op.B%5 == 4 {
			b.Revision = cur
		}
		if b.Ended = op.C%3 == 0; b.Ended && b.EndedAt == 0 {
			b.HasEndReason, b.EndReason, b.EndedAt = op.B%2 == 0, coordwire.EndReason(op.B%2), op.B
		}
		if op.C == 6 {
			b.Ref.BindingID = coordwire.BindingID(ID(99)) // invalid: another binding's ref
		}
		return nil, tx.PutBinding(b)
	case "deleteBinding":
		return nil, tx.DeleteBinding(coordwire.BindingID(smallID(op.A % 4)))
	case "deleteFacts":
		return tx.DeleteSourceFacts(coordwire.BindingID(smallID(op.A % 4)))
	case "operationIndex":
		after := coordwire.OperationID(smallID(op.A))
		p := [32]byte{byte(op.B % 2)}
		var r struct {
			ByPrincipal, Due []coordstore.Operation
			Counts           coordstore.OperationCounts
		}
		var err1, err2, err3 error
		r.ByPrincipal, err1 = collect(tx.OperationsByPrincipal(p, &after))
		r.Counts, err2 = tx.OperationCounts(p)
		r.Due, err3 = collect(tx.OperationsDue(modelUpTo(op.C)))
		return r, errors.Join(err1, err2, err3)
	case "bindingIndex":
		owner, inc := [32]byte{0xa1}, coordwire.IncarnationID(ID(op.B%2+1))
		var r struct {
			ByOwner, Ended []coordstore.Binding
			Active         coordstore.Binding
			ActiveErr      string
		}
		var err1, err2, err3 error
		r.ByOwner, err1 = collect(tx.BindingsByOwner(owner, inc))
		r.Active, err2 = tx.ActiveBinding(owner, inc, []byte{'r', op.C % 2})
		r.ActiveErr = ErrClass(err2)
		r.Ended, err3 = collect(tx.BindingsEnded(op.A))
		if errors.Is(err2, coordstore.ErrNotFound) {
			err2 = nil
		}
		return r, errors.Join(err1, err2, err3)
	case "records":
		n, err1 := tx.RecordCount()
		b, err2 := tx.RecordBytes()
		return [2]uint64{n, b}, errors.Join(err1, err2)
	case "dueSweep":
		// The retention sweep: delete, tombstone (out of the due index)
		// or extend (later in it, perhaps still within upTo) each due row.
		var ids []coordwire.OperationID
		for o, err := range tx.OperationsDue(modelUpTo(op.C)) {
			if err != nil {
				return ids, err
			}
			ids = append(ids, o.ID)
			switch op.B % 3 {
			case 0:
				err = tx.DeleteOperation(o.ID)
			case 1:
				o.Revision++
				o.Tombstoned = true
				err = tx.PutOperation(o)
			default:
				// To one value for the whole sweep, as the server's sweep
				// extends to the retention in force: a row it moves may be
				// met again (still within upTo) and then stays. A value
				// relative to the row's own would move it on every visit,
				// and with upTo 2^64-1 the sweep would never end.
				err = tx.ExtendOperationRetention(o.ID, op.A+3)
			}
			if err != nil {
				return ids, err
			}
		}
		return ids, nil
	case "endedSweep":
		var ids []coordwire.BindingID
		for b, err := range tx.BindingsEnded(op.B) {
			if err != nil {
				return ids, err
			}
			ids = append(ids, b.ID)
			var err error
			if op.C%2 == 0 {
				_, err = tx.DeleteSourceFacts(b.ID)
			} else {
				err = tx.DeleteBinding(b.ID)
			}
			if err != nil {
				return ids, err
			}
		}
		return ids, nil
	case "getRecord":
		return tx.Object(coordstore.ObjectKey{Kind: cursorKinds[int(op.C)%len(cursorKinds)], ID: smallID(op.A % 4)})
	case "appendFact":
		return nil, tx.AppendSourceFact(coordstore.SourceFact{
			Binding: coordwire.BindingID(smallID(op.A % 4)), Sequence: op.B, Image: op.P,
		})
	case "facts":
		return collect(tx.SourceFacts(coordwire.BindingID(smallID(op.A%4)), op.B%4))
	}
	panic("storetest: unknown model op " + op.Name)
}

// modelUpTo is the upTo of an index sweep: 0..5 (the model's times), or
// 2^64-1 for c == 6.
func modelUpTo(c uint8) uint64 {
	if c >= 6 {
		return math.MaxUint64
	}
	return uint64(c)
}
