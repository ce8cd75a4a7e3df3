package core_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/digest"
)

// TestValidateArbitrary: Validate never panics on arbitrary frame values;
// every refusal carries a defined code, and every accepted command is one
// the decoder accepts, with the digest coordwire/digest computes.
func TestValidateArbitrary(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		kind := coordwire.CommandKind(rapid.IntRange(0, 12).Draw(rt, "kind"))
		var payload []byte
		if rapid.Bool().Draw(rt, "valid_payload") {
			if p := coordwire.NewCommandPayload(kind); p != nil {
				switch v := p.(type) {
				case *coordwire.CreateObjective:
					*v = *create(obj(byte(rapid.IntRange(0, 2).Draw(rt, "obj"))), "d")
					v.Schema = uint16(rapid.IntRange(0, 2).Draw(rt, "schema"))
				case *coordwire.UpdateObjective:
					*v = *update(obj(1), "d")
				case *coordwire.ChangeRetention:
					*v = *retention(rapid.Uint64Range(core.RetentionFloorSecs-1, core.RetentionFloorSecs+1).Draw(rt, "secs"))
				}
				payload = p.AppendTLV(nil)
			}
		} else {
			payload = rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(rt, "payload")
		}
		n := rapid.IntRange(0, 3).Draw(rt, "npre")
		var pre []coordwire.Precondition
		for i := 0; i < n; i++ {
			pre = append(pre, coordwire.Precondition{
				Object:           coordwire.ObjectRef{Kind: coordwire.ObjectKind(rapid.IntRange(0, 11).Draw(rt, "pk")), ID: [16]byte{byte(rapid.IntRange(0, 2).Draw(rt, "pid"))}},
				ExpectedRevision: rapid.Uint64Range(0, 2).Draw(rt, "prev"),
			})
		}
		var ext []coordwire.RawField
		if rapid.Bool().Draw(rt, "ext") {
			id := uint64(rapid.IntRange(5, 9).Draw(rt, "ext_id"))
			ext = append(ext, coordwire.RawField{ID: id, Raw: coordwire.AppendFieldU8(nil, id, 1)})
		}
		guard := coordwire.AuthorityGuard{CoordinatorID: testCoordinator, AuthorityEpoch: 1, ActivationSequence: 1}
		cmd := &coordwire.CoordCommand{RequestID: 1, Guard: guard, OperationID: coordwire.OperationID{byte(rapid.IntRange(0, 1).Draw(rt, "op"))},
			Kind: kind, Payload: payload, Preconditions: pre, Extensions: ext}
		p := core.Principal{KeyID: key(1), Scope: coordwire.Scope(rapid.IntRange(0, 63).Draw(rt, "scope")),
			Caps: coordwire.Capabilities(rapid.IntRange(0, 31).Draw(rt, "caps"))}
		c, err := core.Validate(p, core.Limits{MaxTypedPayloadBytes: uint32(rapid.IntRange(0, 64).Draw(rt, "cap"))}, cmd)
		if err != nil {
			var e *coordwire.Error
			if !errors.As(err, &e) || !e.Code.Valid() || e.Reason == "" || c != nil {
				rt.Fatalf("refusal %v (command %v)", err, c)
			}
			return
		}
		// The decoder judges the guard's syntax too; Validate leaves the
		// guard to the server, so it is valid here.
		var d coordwire.CoordCommand
		if err := d.DecodeBody(cmd.AppendBody(nil)); err != nil {
			rt.Fatalf("accepted a command the decoder refuses: %v", err)
		}
		want, err := digest.OperationFromCommand(&d)
		if err != nil || want != c.Digest {
			rt.Fatalf("digest mismatch (%v)", err)
		}
		if !core.Served(c.Kind) {
			rt.Fatalf("accepted unserved kind %v", c.Kind)
		}
	})
}

// TestEventSequenceOverflowFences: at the last EventSequence the command
// is refused with an error that fences the writer, and nothing changes.
func TestEventSequenceOverflowFences(t *testing.T) {
	eachStore(t, func(t *testing.T, s coordstore.Store) {
		for _, last := range []uint64{math.MaxUint64, math.MaxUint64 - 1} {
			if err := s.Update(context.Background(), func(tx coordstore.Tx) error {
				if l, _ := tx.LastSequence(); l >= last {
					return nil
				}
				return tx.AppendEventAt(coordstore.Event{Sequence: last, ID: coordwire.EventID{1}, Kind: coordwire.EventObjectiveChanged,
					Object: coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: obj(200)}, ObjectRevision: 1})
			}); err != nil {
				t.Fatal(err)
			}
			before := dump(t, s)
			// Create needs two sequences, so MaxUint64-1 overflows too.
			_, err := run(t, s, t0, alice, frame(t, oid(byte(last%7)), create(obj(1), "v1")))
			if !core.Fences(err) || coordwire.CodeOf(err) != coordwire.Internal {
				t.Fatalf("last %d: error %v does not fence", last, err)
			}
			diff(t, before, dump(t, s))
		}
	})
}
