package history

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/phuxcoord/coord/coordwire"
)

// ErrNotLinearizable: the history has no linearization under Model.
var ErrNotLinearizable = errors.New("history: not linearizable")

// ErrCheckTimeout: porcupine did not decide within the timeout.
var ErrCheckTimeout = errors.New("history: linearizability check timed out")

// VisualizeDirEnv names a directory where Check writes porcupine's HTML
// visualization of a history it finds not linearizable.
const VisualizeDirEnv = "PHUX_HISTORY_VISUALIZE"

// Check checks ops for linearizability under Model within timeout, and
// runs the checks that need no search: Outcomes and Order. A violation
// is an error naming the calls involved (ErrNotLinearizable for the
// model's).
func Check(ops []porcupine.Operation, timeout time.Duration) error {
	if err := Outcomes(ops); err != nil {
		return err
	}
	if err := Order(ops); err != nil {
		return err
	}
	m := Model.ToModel()
	res, info := porcupine.CheckOperationsVerbose(m, ops, timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("%w (%v, %d calls)", ErrCheckTimeout, timeout, len(ops))
	}
	where := ""
	if dir := os.Getenv(VisualizeDirEnv); dir != "" {
		f := filepath.Join(dir, fmt.Sprintf("history-%d.html", time.Now().UnixNano()))
		if err := porcupine.VisualizePath(m, info, f); err == nil {
			where = "; visualization " + f
		}
	}
	return fmt.Errorf("%w: %s%s", ErrNotLinearizable, describeIllegal(m, ops, info), where)
}

// describeIllegal names the longest partial linearization of the first
// partition that has none and the calls it could not place.
func describeIllegal(m porcupine.Model, ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	parts := Model.Partition(ops)
	partial := info.PartialLinearizationsOperations()
	for i, p := range parts {
		if i >= len(partial) {
			break
		}
		best := 0
		for j, l := range partial[i] {
			if len(l) > len(partial[i][best]) {
				best = j
			}
		}
		if len(partial[i]) > 0 && len(partial[i][best]) == len(p) {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "object %v, %d calls:", p[0].Input.(Input).Object, len(p))
		sorted := slices.Clone(p)
		slices.SortFunc(sorted, func(a, b porcupine.Operation) int { return cmpInt(a.Call, b.Call) })
		for _, op := range sorted {
			ret := "never"
			if op.Return != Never {
				ret = fmt.Sprint(time.Duration(op.Return))
			}
			fmt.Fprintf(&b, "\n  [%v, %s] client %d: %s", time.Duration(op.Call), ret, op.ClientId, m.DescribeOperation(op.Input, op.Output))
		}
		if len(partial[i]) > 0 {
			fmt.Fprintf(&b, "\n  longest linearization: %d of %d calls", len(partial[i][best]), len(p))
			in := map[int64]bool{}
			for _, op := range partial[i][best] {
				in[op.Call] = true
			}
			n := 0
			for _, op := range sorted {
				if !in[op.Call] && n < 4 {
					n++
					fmt.Fprintf(&b, "\n  not placed: [%v] %s", time.Duration(op.Call), m.DescribeOperation(op.Input, op.Output))
				}
			}
		}
		// A hint: replayed in invocation order (no reordering of
		// overlapping calls), the first call no state admits.
		states := []state{{}}
		for _, op := range sorted {
			var next []state
			for _, st := range states {
				next = append(next, step(st, op.Input.(Input), op.Output.(Output))...)
			}
			if len(next) == 0 {
				fmt.Fprintf(&b, "\n  in invocation order, no state admits %s; states before it: %d, e.g. %s",
					m.DescribeOperation(op.Input, op.Output), len(states), states[0].key())
				break
			}
			if len(next) > 64 {
				next = next[:64]
			}
			states = next
		}
		return b.String()
	}
	return "no partition identified"
}

// Resolve narrows the calls whose outcome the client could not learn,
// with what became known later, as etcd's robustness suite patches its
// histories: admitted says whether any command of an OperationId was ever
// admitted (from the store's log, read after every coordinator stopped).
// A Lost lookup, which changes nothing, is dropped; a Lost command whose
// id was never admitted took no effect and is dropped; a Lost command
// whose id a later call saw admitted took effect (if at all: the id may
// hold another command) before that call returned, which becomes its
// return. Every other call is kept as it is. Without it, each Lost call
// may take effect at any later time, and porcupine's search grows with
// every one of them.
func Resolve(ops []porcupine.Operation, admitted func(coordwire.OperationID) bool) []porcupine.Operation {
	// seenAt: the return times of the calls that saw each id admitted.
	seenAt := map[coordwire.OperationID][]int64{}
	for _, op := range ops {
		in, out := op.Input.(Input), op.Output.(Output)
		if out.Outcome == Result && out.Tag != coordwire.OperationUnknown || out.Outcome == Conflict && in.Kind != Lookup {
			seenAt[in.Op] = append(seenAt[in.Op], op.Return)
		}
	}
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		in, o := op.Input.(Input), op.Output.(Output)
		if o.Outcome != Lost {
			out = append(out, op)
			continue
		}
		if in.Kind == Lookup || !admitted(in.Op) {
			continue
		}
		ret := int64(Never)
		for _, r := range seenAt[in.Op] {
			switch {
			case r > op.Call:
				ret = min(ret, r)
			case ret == Never:
				ret = op.Call + 1 // the id was taken before the call: no effect
			}
		}
		op.Return = ret
		out = append(out, op)
	}
	return out
}

// Outcomes checks that no OperationId was answered two outcomes: every
// final result seen for an id is the same image, and every PENDING image
// too (one principal and one digest per id are Model's to check).
func Outcomes(ops []porcupine.Operation) error {
	finals := map[coordwire.OperationID]string{}
	pendings := map[coordwire.OperationID]string{}
	for _, op := range ops {
		in, out := op.Input.(Input), op.Output.(Output)
		if out.Outcome != Result || out.Tag == coordwire.OperationUnknown || out.Tag == coordwire.OperationTombstoned {
			continue
		}
		m := finals
		if out.Tag == coordwire.OperationPending {
			m = pendings
		}
		if prev, ok := m[in.Op]; ok && prev != out.Result {
			return fmt.Errorf("operation %v answered two outcomes: %x and %x", in.Op, prev, out.Result)
		}
		m[in.Op] = out.Result
	}
	return nil
}

// Order checks the event sequences results name against real time: an
// operation answered final before another was first invoked completed at
// a lower event sequence (the coordinator's commits are one total order,
// §10, and an answer comes after its commit). It compares each id's
// first final answer with each other id's first invocation.
func Order(ops []porcupine.Operation) error {
	type first struct {
		ret, call int64
		seq       uint64
		op        coordwire.OperationID
	}
	byID := map[coordwire.OperationID]*first{}
	for _, op := range ops {
		in, out := op.Input.(Input), op.Output.(Output)
		f := byID[in.Op]
		if f == nil {
			f = &first{ret: Never, call: op.Call, op: in.Op}
			byID[in.Op] = f
		}
		f.call = min(f.call, op.Call)
		if out.Outcome == Result && out.Tag != coordwire.OperationPending && out.Tag != coordwire.OperationUnknown &&
			out.Tag != coordwire.OperationTombstoned && out.Tag != coordwire.OperationIndeterminate && op.Return < f.ret {
			if s := out.Seq(); s != 0 {
				f.ret, f.seq = op.Return, s
			}
		}
	}
	done := make([]*first, 0, len(byID))
	for _, f := range byID {
		if f.seq != 0 {
			done = append(done, f)
		}
	}
	slices.SortFunc(done, func(a, b *first) int { return cmpInt(a.ret, b.ret) })
	// For each b (by first call), every a answered before b.call must
	// have a lower sequence: compare b with the highest sequence among
	// those answered before its call.
	calls := slices.Clone(done)
	slices.SortFunc(calls, func(a, b *first) int { return cmpInt(a.call, b.call) })
	var hi *first
	i := 0
	for _, b := range calls {
		for i < len(done) && done[i].ret < b.call {
			if hi == nil || done[i].seq > hi.seq {
				hi = done[i]
			}
			i++
		}
		if hi != nil && hi.seq >= b.seq {
			return fmt.Errorf("operation %v completed at event %d, after operation %v invoked later completed at event %d: the commit order contradicts real time",
				hi.op, hi.seq, b.op, b.seq)
		}
	}
	return nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Increasing checks that epochs (or any counter observed in order) only
// increase.
func Increasing(what string, vals []uint64) error {
	for i := 1; i < len(vals); i++ {
		if vals[i] <= vals[i-1] {
			return fmt.Errorf("%s went from %d to %d", what, vals[i-1], vals[i])
		}
	}
	return nil
}
