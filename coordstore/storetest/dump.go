// Package storetest is the conformance suite every coordstore.Store
// implementation runs: Run checks every method and its error contract,
// atomicity, ordering, retention, sequence overflow and cut stability;
// RunModel drives random operation sequences (pgregory.net/rapid) against a
// model store and a subject store and requires identical observable
// results. RunCrash is the SIGKILL crash test of the engines that persist
// to disk. Only tests import it.
package storetest

import (
	"context"
	"errors"
	"math"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// State is everything a store lets a reader observe, in iteration order.
// Two stores that went through the same transactions must have equal
// States (compare with go-cmp).
type State struct {
	Meta               coordstore.Meta
	LastSequence       uint64
	OldestRetained     uint64
	RetainedEventBytes uint64
	Objects            []coordstore.Object
	Events             []coordstore.Event
	Operations         []coordstore.Operation
	Effects            map[coordwire.EffectState][]coordstore.EffectAttempt
	Bindings           []coordstore.Binding
	Facts              map[coordwire.BindingID][]coordstore.SourceFact
	// RecordCount and RecordBytes are the record counters; Objects holds
	// the records they count.
	RecordCount, RecordBytes uint64
	// Index holds what the secondary lookups answer for every principal,
	// owner incarnation and resource tuple of the stored records.
	Index Index
}

// Index is what the secondary lookups of a ReadTx answer (see DumpTx).
type Index struct {
	OperationsByPrincipal map[[32]byte][]coordwire.OperationID
	OperationCounts       map[[32]byte]coordstore.OperationCounts
	Due                   []coordwire.OperationID // OperationsDue(max)
	BindingsByOwner       map[string][]coordwire.BindingID
	ActiveBinding         map[string]coordwire.BindingID // by resource tuple; zero: none
	Ended                 []coordwire.BindingID          // BindingsEnded(max)
}

// Dump reads the whole observable state of s in one View.
func Dump(ctx context.Context, s coordstore.Store) (State, error) {
	var st State
	err := s.View(ctx, func(tx coordstore.ReadTx) error {
		var err error
		st, err = DumpTx(tx)
		return err
	})
	return st, err
}

func collect[V any](seq func(yield func(V, error) bool)) ([]V, error) {
	var out []V
	for v, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

// DumpTx reads the whole observable state through tx.
func DumpTx(tx coordstore.ReadTx) (State, error) {
	var st State
	var err error
	if st.Meta, err = tx.Meta(); err != nil {
		return st, err
	}
	if st.LastSequence, err = tx.LastSequence(); err != nil {
		return st, err
	}
	if st.OldestRetained, err = tx.OldestRetainedSequence(); err != nil {
		return st, err
	}
	if st.RetainedEventBytes, err = tx.RetainedEventBytes(); err != nil {
		return st, err
	}
	if st.Objects, err = collect(tx.Objects(nil)); err != nil {
		return st, err
	}
	after := uint64(0)
	if st.OldestRetained > 1 {
		after = st.OldestRetained - 1
	}
	if st.Events, err = collect(tx.Events(after)); err != nil {
		return st, err
	}
	if st.Operations, err = collect(tx.Operations(nil)); err != nil {
		return st, err
	}
	st.Effects = map[coordwire.EffectState][]coordstore.EffectAttempt{}
	for s := coordwire.EffectReady; s <= coordwire.EffectIndeterminate; s++ {
		es, err := collect(tx.EffectsByState(s))
		if err != nil {
			return st, err
		}
		if len(es) > 0 {
			st.Effects[s] = es
		}
	}
	if st.Bindings, err = collect(tx.Bindings(nil)); err != nil {
		return st, err
	}
	st.Facts = map[coordwire.BindingID][]coordstore.SourceFact{}
	for _, b := range st.Bindings {
		fs, err := collect(tx.SourceFacts(b.ID, 0))
		if err != nil {
			return st, err
		}
		if len(fs) > 0 {
			st.Facts[b.ID] = fs
		}
	}
	if st.RecordCount, err = tx.RecordCount(); err != nil {
		return st, err
	}
	if st.RecordBytes, err = tx.RecordBytes(); err != nil {
		return st, err
	}
	st.Index, err = dumpIndex(tx, st.Operations, st.Bindings)
	return st, err
}

func dumpIndex(tx coordstore.ReadTx, ops []coordstore.Operation, bindings []coordstore.Binding) (Index, error) {
	ix := Index{
		OperationsByPrincipal: map[[32]byte][]coordwire.OperationID{},
		OperationCounts:       map[[32]byte]coordstore.OperationCounts{},
		BindingsByOwner:       map[string][]coordwire.BindingID{},
		ActiveBinding:         map[string]coordwire.BindingID{},
	}
	for _, o := range ops {
		p := o.PrincipalKeyID
		if _, ok := ix.OperationCounts[p]; ok {
			continue
		}
		c, err := tx.OperationCounts(p)
		if err != nil {
			return ix, err
		}
		ix.OperationCounts[p] = c
		for o, err := range tx.OperationsByPrincipal(p, nil) {
			if err != nil {
				return ix, err
			}
			ix.OperationsByPrincipal[p] = append(ix.OperationsByPrincipal[p], o.ID)
		}
	}
	for o, err := range tx.OperationsDue(math.MaxUint64) {
		if err != nil {
			return ix, err
		}
		ix.Due = append(ix.Due, o.ID)
	}
	for _, b := range bindings {
		owner := string(b.Ref.OwnerAuthorityFingerprint[:]) + string(b.Ref.OwnerIncarnation[:])
		if _, ok := ix.BindingsByOwner[owner]; !ok {
			ix.BindingsByOwner[owner] = []coordwire.BindingID{}
			for b, err := range tx.BindingsByOwner(b.Ref.OwnerAuthorityFingerprint, b.Ref.OwnerIncarnation) {
				if err != nil {
					return ix, err
				}
				ix.BindingsByOwner[owner] = append(ix.BindingsByOwner[owner], b.ID)
			}
		}
		a, err := tx.ActiveBinding(b.Ref.OwnerAuthorityFingerprint, b.Ref.OwnerIncarnation, b.Ref.ResourceID)
		switch {
		case err == nil:
			ix.ActiveBinding[string(b.ActiveKey())] = a.ID
		case errors.Is(err, coordstore.ErrNotFound):
			ix.ActiveBinding[string(b.ActiveKey())] = coordwire.BindingID{}
		default:
			return ix, err
		}
	}
	for b, err := range tx.BindingsEnded(math.MaxUint64) {
		if err != nil {
			return ix, err
		}
		ix.Ended = append(ix.Ended, b.ID)
	}
	if len(ops) == 0 {
		ix.OperationsByPrincipal, ix.OperationCounts = nil, nil
	}
	if len(bindings) == 0 {
		ix.BindingsByOwner, ix.ActiveBinding = nil, nil
	}
	return ix, nil
}

// ErrClass names the sentinel class of err ("" for nil, "other" for an
// error of no class) so that results of two stores can be compared.
func ErrClass(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range []struct {
		err  error
		name string
	}{
		{coordstore.ErrNotFound, "NotFound"},
		{coordstore.ErrConflict, "Conflict"},
		{coordstore.ErrInvalid, "Invalid"},
		{coordstore.ErrSequenceOverflow, "SequenceOverflow"},
		{coordstore.ErrPruned, "Pruned"},
		{coordstore.ErrCutExpired, "CutExpired"},
		{coordstore.ErrClosed, "Closed"},
		{coordstore.ErrLocked, "Locked"},
		{coordstore.ErrSchemaTooNew, "SchemaTooNew"},
		{coordstore.ErrCorrupt, "Corrupt"},
		{coordstore.ErrFull, "Full"},
		{context.Canceled, "Canceled"},
		{context.DeadlineExceeded, "DeadlineExceeded"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "other"
}
