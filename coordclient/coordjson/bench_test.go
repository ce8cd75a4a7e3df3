package coordjson

import (
	"testing"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// BenchmarkNotification is the projection's cost of one Mirror
// notification, as the C ABI and the bridge pay it for each object change
// (docs/ffi-cost.md): an "add" of an Objective, and of the OPERATION
// record its command leaves, written by MarshalAdd ("direct", what a
// Mirror handle does) and by Marshal of Add's maps ("maps").
func BenchmarkNotification(b *testing.B) {
	for _, r := range []coordwire.SnapshotRecord{
		rec(coordwire.ObjectKindObjective, 1, 2, &coordwire.ObjectiveRecord{DocumentSchema: 1, Document: []byte("bench"), State: coordwire.ObjectiveActive}),
		rec(coordwire.ObjectKindOperation, 10, 2, &coordwire.OperationRecord{PrincipalKeyID: id32(11), Result: coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 7, ResultKind: coordwire.ResultObjectRef, ResultPayload: (&coordwire.ObjectRefResult{Object: coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id16(1)}}).Append(nil)}}),
	} {
		o, err := coordclient.DecodeObject(&r)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(r.Object.Kind.String()+"/direct", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = MarshalAdd(o, false)
			}
		})
		b.Run(r.Object.Kind.String()+"/append", func(b *testing.B) {
			// As a Mirror handle encodes: into space it reuses.
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				dst = AppendAdd(dst[:0], o, false)
			}
		})
		b.Run(r.Object.Kind.String()+"/maps", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Marshal(Add(o, false))
			}
		})
	}
}
