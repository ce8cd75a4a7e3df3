package history

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/phuxcoord/coord/coordwire"
)

// The model's state is one partition's: one object (an Objective or a
// Run) and the operations that name it. States are values: step copies.
type state struct {
	// rev is the Objective's revision (0: absent).
	rev uint64
	// run: START_RUN of this Run admitted.
	run bool
	ops []opState // sorted by id
}

// phase is what the model knows of an admitted operation's result.
type phase uint8

const (
	// unseen: admitted by a call whose outcome was lost; no result seen.
	unseen phase = iota
	// pending: PENDING seen (img holds its image).
	pending
	// final: a final result seen (img holds its image); it never changes.
	final
)

type opState struct {
	id        coordwire.OperationID
	principal string
	digest    [32]byte
	kind      Kind
	phase     phase
	img       string
	tag       coordwire.OperationTag // of a final img
}

func (s *state) find(id coordwire.OperationID) int {
	for i := range s.ops {
		if s.ops[i].id == id {
			return i
		}
	}
	return -1
}

func (s state) with(o opState) state {
	n := state{rev: s.rev, run: s.run, ops: slices.Clone(s.ops)}
	if i := n.find(o.id); i >= 0 {
		n.ops[i] = o
		return n
	}
	n.ops = append(n.ops, o)
	slices.SortFunc(n.ops, func(a, b opState) int { return strings.Compare(string(a.id[:]), string(b.id[:])) })
	return n
}

func (s state) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%t", s.rev, s.run)
	for _, o := range s.ops {
		fmt.Fprintf(&b, "|%x %s %x %d %d %d %x", o.id[:4], o.principal, o.digest[:4], o.kind, o.phase, o.tag, o.img)
	}
	return b.String()
}

// observe returns the op after the client saw out for it, or false when
// out contradicts what the op already answered: one outcome per id, a
// PENDING image stable until the one final result.
func (o opState) observe(out Output) (opState, bool) {
	if out.Tag == coordwire.OperationUnknown {
		return o, false // an admitted operation is never UNKNOWN
	}
	if out.Tag == coordwire.OperationTombstoned {
		return o, o.phase == final || o.phase == unseen || o.phase == pending
	}
	switch o.phase {
	case final:
		return o, out.Result == o.img
	case pending:
		if out.Tag == coordwire.OperationPending {
			return o, out.Result == o.img
		}
	}
	if !finalAllowed(o.kind, out.Tag) {
		return o, false
	}
	o.img, o.tag = out.Result, out.Tag
	o.phase = final
	if out.Tag == coordwire.OperationPending {
		o.phase = pending
	}
	return o, true
}

// finalAllowed: objective commands finalize in their admission
// transaction (never PENDING, always SUCCEEDED); Run commands may be
// PENDING, SUCCEEDED, REJECTED or INDETERMINATE (§8, semantics "Runs and
// the effect outbox").
func finalAllowed(k Kind, t coordwire.OperationTag) bool {
	switch k {
	case Create, Update:
		return t == coordwire.OperationSucceeded
	case StartRun, Cancel:
		return t == coordwire.OperationPending || t == coordwire.OperationSucceeded ||
			t == coordwire.OperationRejected || t == coordwire.OperationIndeterminate
	}
	return false
}

// admit returns the state after the command in was admitted, or false
// when its kind's rules refuse it in s (with the refusal's code).
func admit(s state, in Input) (state, coordwire.ErrorCode, bool) {
	if in.Pre {
		// §10 "absent is zero"; a Run partition has no revision the
		// workload tracks, so its preconditions are not modelled.
		if in.Kind == Create || in.Kind == Update {
			if s.rev != in.PreRev {
				return s, coordwire.RevisionConflict, false
			}
		}
	}
	n := state{rev: s.rev, run: s.run, ops: s.ops}
	switch in.Kind {
	case Create:
		if s.rev != 0 {
			return s, coordwire.RevisionConflict, false // objective.exists
		}
		n.rev = 1
	case Update:
		if s.rev == 0 {
			return s, coordwire.NotFound, false // objective.not_found
		}
		n.rev = s.rev + 1
	case StartRun:
		if s.run {
			return s, coordwire.RevisionConflict, false // run.exists
		}
		n.run = true
	case Cancel:
		if !s.run {
			return s, coordwire.NotFound, false // run.not_found
		}
		// No CANCEL_RUN is admitted after one that succeeded (the Run
		// ended Cancelled: run.ended). One still pending may yet fail,
		// unseen, so it does not decide.
		for _, o := range s.ops {
			if o.kind == Cancel && o.phase == final && o.tag == coordwire.OperationSucceeded {
				return s, coordwire.RevisionConflict, false
			}
		}
	}
	return n, 0, true
}

// refusable reports whether the coordinator may refuse in with code c
// without admitting it in state s although its kind's rules would admit
// it: the Run family depends on state the client does not track (the
// owner's incarnation, a START_RUN still dispatching, a Run that ended
// by itself).
func refusable(s state, in Input, c coordwire.ErrorCode) bool {
	switch in.Kind {
	case StartRun:
		return c == coordwire.NotFound // owner.incarnation: the owner restarted
	case Cancel:
		return c == coordwire.RevisionConflict // run.starting, run.ended
	}
	return false
}

// step is the model's transition: every state the partition may be in
// after the call in answered out, from s (none: out is impossible in s).
func step(s state, in Input, out Output) []state {
	if out.Outcome == Unavailable {
		return []state{s} // nothing admitted, whatever the state
	}
	i := s.find(in.Op)
	if in.Kind == Lookup {
		switch {
		case out.Outcome == Lost:
			return []state{s}
		case out.Outcome == Refused && out.Code == coordwire.NotFound:
			// Another principal's operation is invisible (§6).
			if i >= 0 && s.ops[i].principal != in.Principal {
				return []state{s}
			}
			return nil
		case out.Outcome != Result:
			return nil
		case out.Tag == coordwire.OperationUnknown:
			if i < 0 {
				return []state{s}
			}
			return nil
		case i < 0 || s.ops[i].principal != in.Principal:
			return nil
		}
		o, ok := s.ops[i].observe(out)
		if !ok {
			return nil
		}
		return []state{s.with(o)}
	}

	if i >= 0 {
		// Idempotency comes first (§8): the same principal and digest
		// are answered the stored result, anything else conflicts.
		o := s.ops[i]
		same := o.principal == in.Principal && o.digest == in.Digest
		switch out.Outcome {
		case Lost:
			return []state{s}
		case Conflict:
			if !same {
				return []state{s}
			}
			return nil
		case Result:
			if !same {
				return nil
			}
			if o, ok := o.observe(out); ok {
				return []state{s.with(o)}
			}
		}
		return nil
	}

	n, code, ok := admit(s, in)
	fresh := opState{id: in.Op, principal: in.Principal, digest: in.Digest, kind: in.Kind}
	switch out.Outcome {
	case Lost:
		if !ok {
			return []state{s}
		}
		return []state{s, n.with(fresh)}
	case Refused:
		if (!ok && out.Code == code) || (ok && refusable(s, in, out.Code)) {
			return []state{s}
		}
		return nil
	case Result:
		if !ok {
			return nil
		}
		o, good := fresh.observe(out)
		if !good {
			return nil
		}
		return []state{n.with(o)}
	}
	return nil // Conflict for an id never admitted
}

// Model is the porcupine model of the coordinator's observable
// semantics (see the package doc), partitioned by Input.Object.
var Model = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		parts := map[coordwire.ObjectRef][]porcupine.Operation{}
		var order []coordwire.ObjectRef
		for _, op := range h {
			k := op.Input.(Input).Object
			if _, ok := parts[k]; !ok {
				order = append(order, k)
			}
			parts[k] = append(parts[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, k := range order {
			out = append(out, parts[k])
		}
		return out
	},
	Init: func() []any { return []any{state{}} },
	Step: func(st, in, out any) []any {
		next := step(st.(state), in.(Input), out.(Output))
		r := make([]any, len(next))
		for i, n := range next {
			r[i] = n
		}
		return r
	},
	Equal: func(a, b any) bool { return a.(state).key() == b.(state).key() },
	Hash: func(s any) uint64 {
		h := fnv.New64a()
		h.Write([]byte(s.(state).key()))
		return h.Sum64()
	},
	DescribeOperation: func(in, out any) string {
		i := in.(Input)
		pre := ""
		if i.Pre {
			pre = fmt.Sprintf(" if rev=%d", i.PreRev)
		}
		return fmt.Sprintf("%v %x by %s (digest %x)%s -> %v", i.Kind, i.Op[:4], i.Principal, i.Digest[:3], pre, out.(Output))
	},
	DescribeState: func(s any) string { return s.(state).key() },
}
