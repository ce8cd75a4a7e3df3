package coordwire

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func TestResultPayloadsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		kind := ResultKind(rapid.IntRange(0, 3).Draw(t, "kind"))
		p := faResultPayload(t, kind)
		if p.ResultKind() != kind {
			t.Fatalf("ResultKind() = %v", p.ResultKind())
		}
		var fresh ResultPayload
		switch kind {
		case ResultNone:
			fresh = new(NoneResult)
		case ResultObjectRef:
			fresh = new(ObjectRefResult)
		case ResultStarted:
			fresh = new(StartedResult)
		case ResultDocument:
			fresh = new(DocumentResult)
		}
		faRoundTripNested(t, p, fresh)
		img := p.Append(nil)
		got, err := DecodeResultPayload(kind, img)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(p, got, faCmp); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
		if err := validateResultPayload(kind, img); err != nil {
			t.Fatalf("validator refuses a valid image: %v", err)
		}
	})
}

func TestResultPayloadRefusals(t *testing.T) {
	ref := (&ObjectRefResult{Object: ObjectRef{Kind: ObjectKindRun, ID: [16]byte{1}}}).Append(nil)
	st := (&StartedResult{RunID: RunID{1}, WorkSessionID: WorkSessionID{1}, BindingID: BindingID{1}}).Append(nil)
	doc := (&DocumentResult{Schema: 1, Payload: []byte("abc")}).Append(nil)
	mut := func(b []byte, off int, v ...byte) []byte { b = bytes.Clone(b); copy(b[off:], v); return b }
	for _, c := range []struct {
		name   string
		kind   ResultKind
		img    []byte
		reason string
	}{
		{"none_trailing", ResultNone, []byte{0}, "pos.trailing_bytes"},
		{"ref_kind", ResultObjectRef, mut(ref, 0, 0, 11), "enum.object_kind"},
		{"ref_zero_id", ResultObjectRef, mut(ref, 2, make([]byte, 16)...), "id.zero"},
		{"ref_truncated", ResultObjectRef, ref[:17], "pos.truncated"},
		{"started_zero_ws", ResultStarted, mut(st, 16, make([]byte, 16)...), "id.zero"},
		{"started_zero_binding", ResultStarted, mut(st, 33, make([]byte, 16)...), "id.zero"},
		{"started_presence", ResultStarted, mut(st, 32, 2), "optional.invalid_presence"},
		{"started_absent_trailing", ResultStarted, mut(st, 32, 0), "pos.trailing_bytes"},
		{"doc_len_over_bytes", ResultDocument, mut(doc, 2, 0, 0, 0, 4), "pos.truncated"},
		{"doc_len_over_cap", ResultDocument, mut(doc, 2, 0xff, 0, 0, 0), "bytes.too_long"},
		{"doc_trailing", ResultDocument, append(bytes.Clone(doc), 1), "pos.trailing_bytes"},
		{"unknown_kind", 4, nil, "enum.result_kind"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeResultPayload(c.kind, c.img)
			faWantErr(t, err, MalformedMessage, c.reason)
			faWantErr(t, validateResultPayload(c.kind, c.img), MalformedMessage, c.reason)
			o := OperationResult{Tag: OperationSucceeded, CompletedEventSequence: 1, ResultKind: c.kind, ResultPayload: c.img}
			if c.kind.Valid() {
				faWantErr(t, new(OperationResult).Decode(o.Append(nil)), MalformedMessage, c.reason)
			}
		})
	}
}

func TestValidateResultPayloadNoAlloc(t *testing.T) {
	doc := (&DocumentResult{Schema: 1, Payload: bytes.Repeat([]byte{1}, 100)}).Append(nil)
	if n := testing.AllocsPerRun(100, func() { _ = validateResultPayload(ResultDocument, doc) }); n != 0 {
		t.Fatalf("validateResultPayload allocates %v times", n)
	}
}
