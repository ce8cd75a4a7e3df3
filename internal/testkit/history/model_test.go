package history

import (
	"errors"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/phuxcoord/coord/coordwire"
)

// h builds hand-written histories: each call is [call, ret] in ticks
// (ret < 0: Never).
type h struct{ ops []porcupine.Operation }

func (x *h) add(call, ret int64, in Input, out Output) {
	r := ret
	if ret < 0 || out.Outcome == Lost {
		r = Never
	}
	x.ops = append(x.ops, porcupine.Operation{ClientId: len(x.ops), Input: in, Call: call, Output: out, Return: r})
}

var (
	objA = coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: [16]byte{0xa}}
	objB = coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: [16]byte{0xb}}
	runR = coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: [16]byte{0xc}}
)

func opID(n byte) coordwire.OperationID { return coordwire.OperationID{n} }

func dig(n byte) [32]byte { return [32]byte{n} }

func cmd(k Kind, op byte, obj coordwire.ObjectRef, pre ...uint64) Input {
	in := Input{Kind: k, Op: opID(op), Principal: "p", Digest: dig(op), Object: obj}
	if len(pre) > 0 {
		in.Pre, in.PreRev = true, pre[0]
	}
	return in
}

func lookup(op byte, obj coordwire.ObjectRef) Input {
	return Input{Kind: Lookup, Op: opID(op), Principal: "p", Object: obj}
}

func ok(seq uint64, obj coordwire.ObjectRef) Output {
	return ResultOutput(coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: coordwire.EventSequence(seq),
		ResultKind: coordwire.ResultObjectRef, ResultPayload: obj.Append(nil)})
}

func pendingAt(seq uint64) Output {
	return ResultOutput(coordwire.OperationResult{Tag: coordwire.OperationPending, AdmittedEpoch: 1, AdmittedEventSequence: coordwire.EventSequence(seq)})
}

func rejected(seq uint64) Output {
	return ResultOutput(coordwire.OperationResult{Tag: coordwire.OperationRejected, CompletedEventSequence: coordwire.EventSequence(seq),
		ErrorCode: coordwire.RevisionConflict, Message: "effect.rejected: x"})
}

var (
	unknown     = ResultOutput(coordwire.OperationResult{Tag: coordwire.OperationUnknown})
	lost        = Output{Outcome: Lost}
	conflict    = Output{Outcome: Conflict, Code: coordwire.OperationConflict}
	revConflict = Output{Outcome: Refused, Code: coordwire.RevisionConflict}
	notFound    = Output{Outcome: Refused, Code: coordwire.NotFound}
	fenced      = Output{Outcome: Unavailable, Code: coordwire.AuthorityFenced}
)

// TestModelLinearizable: histories a correct coordinator can produce are
// judged linearizable, by the model alone and by Check.
func TestModelLinearizable(t *testing.T) {
	cases := map[string]func(x *h){
		"create then compare-and-set updates": func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), ok(2, objA))
			x.add(2, 3, cmd(Update, 2, objA, 1), ok(4, objA))
			x.add(4, 5, cmd(Update, 3, objA, 1), revConflict)
			x.add(6, 7, cmd(Update, 4, objA, 2), ok(6, objA))
			x.add(8, 9, cmd(Create, 5, objA), revConflict)
		},
		"concurrent compare-and-set: one wins": func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), ok(2, objA))
			x.add(2, 6, cmd(Update, 2, objA, 1), revConflict)
			x.add(3, 5, cmd(Update, 3, objA, 1), ok(4, objA))
		},
		"update of an absent objective": func(x *h) {
			x.add(0, 1, cmd(Update, 1, objA), notFound)
			x.add(2, 3, cmd(Update, 2, objA, 0), notFound)
		},
		"lost create found by its retry and lookup": func(x *h) {
			x.add(0, -1, cmd(Create, 1, objA), lost)
			x.add(2, 3, cmd(Create, 1, objA), ok(2, objA))
			x.add(4, 5, lookup(1, objA), ok(2, objA))
		},
		"lost create admitted after a lookup said UNKNOWN": func(x *h) {
			x.add(0, -1, cmd(Create, 1, objA), lost)
			x.add(1, 2, lookup(1, objA), unknown)
			x.add(5, 6, lookup(1, objA), ok(2, objA))
		},
		"lost create never admitted": func(x *h) {
			x.add(0, -1, cmd(Create, 1, objA), lost)
			x.add(5, 6, lookup(1, objA), unknown)
			x.add(7, 8, cmd(Create, 2, objA), ok(2, objA))
		},
		"a lost update forks: the next precondition shows it applied": func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), ok(2, objA))
			x.add(2, -1, cmd(Update, 2, objA, 1), lost)
			x.add(5, 6, cmd(Update, 3, objA, 2), ok(6, objA))
		},
		"another digest or principal conflicts": func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), ok(2, objA))
			other := cmd(Create, 1, objA)
			other.Digest = dig(99)
			x.add(2, 3, other, conflict)
			stranger := cmd(Create, 1, objA)
			stranger.Principal = "q"
			x.add(4, 5, stranger, conflict)
			x.add(6, 7, Input{Kind: Lookup, Op: opID(1), Principal: "q", Object: objA}, notFound)
		},
		"an exact duplicate is answered after its precondition moved": func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), ok(2, objA))
			x.add(2, 3, cmd(Update, 2, objA, 1), ok(4, objA))
			x.add(4, 5, cmd(Update, 2, objA, 1), ok(4, objA))
		},
		"refusals that admit nothing": func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), fenced)
			x.add(2, 3, lookup(1, objA), unknown)
			x.add(4, 5, cmd(Create, 1, objA), ok(2, objA))
			x.add(6, 7, cmd(Update, 2, objA, 1), Output{Outcome: Unavailable, Code: coordwire.ResourceExhausted})
			x.add(8, 9, cmd(Update, 2, objA, 1), ok(4, objA))
		},
		"a Run: cancel before admission, PENDING start, a cancel, a second cancel refused": func(x *h) {
			x.add(0, 1, cmd(Cancel, 9, runR), notFound)
			x.add(2, 3, cmd(StartRun, 1, runR), pendingAt(3))
			x.add(4, 5, lookup(1, runR), pendingAt(3))
			x.add(6, 7, cmd(StartRun, 1, runR), ok(7, runR))
			x.add(8, 9, cmd(Cancel, 2, runR), pendingAt(9))
			x.add(10, 11, cmd(Cancel, 3, runR), revConflict)
			x.add(12, 13, lookup(2, runR), ok(12, runR))
			x.add(14, 15, cmd(Cancel, 4, runR), revConflict)
		},
		"a start refused while its owner restarted, then admitted": func(x *h) {
			x.add(0, 1, cmd(StartRun, 1, runR), notFound)
			x.add(2, 3, cmd(StartRun, 1, runR), rejected(5))
			x.add(4, 5, lookup(1, runR), rejected(5))
		},
		"two objectives, real-time order of sequences": func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), ok(2, objA))
			x.add(2, 3, cmd(Create, 2, objB), ok(4, objB))
			x.add(2, 5, cmd(Update, 3, objA, 1), ok(6, objA))
			x.add(3, 4, cmd(Update, 4, objB, 1), ok(5, objB)) // concurrent with 3: either order
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			x := &h{}
			build(x)
			if !porcupine.CheckOperations(Model.ToModel(), x.ops) {
				t.Fatal("the model judged a linearizable history not linearizable")
			}
			if err := Check(x.ops, 10*time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestModelNotLinearizable: each history breaks one guarantee a client
// relies on and is judged not linearizable (by the model, or by the
// direct checks where they apply first).
func TestModelNotLinearizable(t *testing.T) {
	cases := map[string]struct {
		build func(x *h)
		// model: porcupine alone must find it; else a direct check does.
		model bool
	}{
		"an acknowledged create lost": {model: true, build: func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), ok(2, objA))
			x.add(2, 3, lookup(1, objA), unknown)
		}},
		"an acknowledged update lost to a later precondition": {model: true, build: func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), ok(2, objA))
			x.add(2, 3, cmd(Update, 2, objA, 1), ok(4, objA))
			x.add(4, 5, cmd(Update, 3, objA, 1), ok(6, objA))
		}},
		"one OperationId, two outcomes": {model: true, build: func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), ok(2, objA))
			x.add(2, 3, cmd(Create, 1, objA), ok(3, objA))
		}},
		"an objective created twice": {model: true, build: func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), ok(2, objA))
			x.add(2, 3, cmd(Create, 2, objA), ok(4, objA))
		}},
		"an exact duplicate refused by its precondition (idempotency comes first)": {model: true, build: func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), ok(2, objA))
			x.add(2, 3, cmd(Update, 2, objA, 1), ok(4, objA))
			x.add(4, 5, cmd(Update, 2, objA, 1), revConflict)
		}},
		"a conflict for an id never admitted": {model: true, build: func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), conflict)
		}},
		"a precondition refused on the current revision": {model: true, build: func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), ok(2, objA))
			x.add(2, 3, cmd(Update, 2, objA, 1), revConflict)
		}},
		"an objective command left PENDING": {model: true, build: func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), pendingAt(2))
		}},
		"a final START_RUN back to PENDING": {model: true, build: func(x *h) {
			x.add(0, 1, cmd(StartRun, 1, runR), ok(3, runR))
			x.add(2, 3, lookup(1, runR), pendingAt(2))
		}},
		"a cancel NOT_FOUND after the start was acknowledged": {model: true, build: func(x *h) {
			x.add(0, 1, cmd(StartRun, 1, runR), pendingAt(3))
			x.add(2, 3, cmd(Cancel, 2, runR), notFound)
		}},
		"two cancels of one Run both succeed": {model: true, build: func(x *h) {
			x.add(0, 1, cmd(StartRun, 1, runR), ok(3, runR))
			x.add(2, 3, cmd(Cancel, 2, runR), ok(5, runR))
			x.add(4, 5, cmd(Cancel, 3, runR), ok(7, runR))
		}},
		"a Run started twice": {model: true, build: func(x *h) {
			x.add(0, 1, cmd(StartRun, 1, runR), pendingAt(3))
			x.add(2, 3, cmd(StartRun, 2, runR), pendingAt(6))
		}},
		"a fenced refusal that admitted the command": {model: true, build: func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), fenced)
			x.add(2, 3, lookup(1, objA), ok(2, objA))
		}},
		"commit order against real time": {model: false, build: func(x *h) {
			x.add(0, 1, cmd(Create, 1, objA), ok(10, objA))
			x.add(2, 3, cmd(Create, 2, objB), ok(5, objB))
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			x := &h{}
			c.build(x)
			if got := porcupine.CheckOperations(Model.ToModel(), x.ops); got == c.model {
				t.Fatalf("the model alone judged it linearizable=%t", got)
			}
			err := Check(x.ops, 10*time.Second)
			if err == nil {
				t.Fatal("Check passed a history that is not linearizable")
			}
			if c.model && !errors.Is(err, ErrNotLinearizable) && !isDirect(err) {
				t.Fatalf("Check: %v", err)
			}
			t.Log(err)
		})
	}
}

func isDirect(err error) bool { return err != nil && !errors.Is(err, ErrCheckTimeout) }

// TestOutcomesAndIncreasing covers the direct checks.
func TestOutcomesAndIncreasing(t *testing.T) {
	x := &h{}
	x.add(0, 1, cmd(StartRun, 1, runR), pendingAt(3))
	x.add(2, 3, lookup(1, runR), pendingAt(4))
	if err := Outcomes(x.ops); err == nil {
		t.Fatal("two PENDING images of one id passed")
	}
	if err := Increasing("epoch", []uint64{1, 2, 2}); err == nil {
		t.Fatal("a repeated epoch passed")
	}
	if err := Increasing("epoch", []uint64{1, 2, 5}); err != nil {
		t.Fatal(err)
	}
}

// TestResolve: a Lost lookup and a Lost command whose id was never
// admitted are dropped; a Lost command whose id a later call saw admitted
// returns when that call returned. A violation a Lost call hid stays
// visible: the resolved history of an update that was never admitted but
// whose effect a later call saw is not linearizable.
func TestResolve(t *testing.T) {
	x := &h{}
	x.add(0, 1, cmd(Create, 1, objA), ok(2, objA))
	x.add(2, -1, cmd(Update, 2, objA), lost)
	x.add(3, -1, cmd(Update, 3, objA), lost)
	x.add(4, -1, lookup(2, objA), lost)
	x.add(5, 6, lookup(2, objA), ok(4, objA))
	admitted := func(id coordwire.OperationID) bool { return id != opID(3) }
	got := Resolve(x.ops, admitted)
	if len(got) != 3 {
		t.Fatalf("resolved %d calls, want 3: %+v", len(got), got)
	}
	if got[1].Input.(Input).Op != opID(2) || got[1].Return != 6 {
		t.Fatalf("the lost update resolved to %+v, want its return at 6", got[1])
	}
	if err := Check(got, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The update 3 was never admitted, yet a compare-and-set saw rev 3.
	x.add(7, 8, cmd(Update, 4, objA, 3), ok(10, objA))
	if err := Check(Resolve(x.ops, admitted), time.Minute); !errors.Is(err, ErrNotLinearizable) {
		t.Fatalf("Check = %v, want ErrNotLinearizable", err)
	}
	if err := Check(x.ops, time.Minute); err != nil {
		t.Fatalf("unresolved, the lost update explains rev 3: %v", err)
	}
}
