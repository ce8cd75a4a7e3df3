package coordwire

// Shared test helpers of the handshake/command family. Names carry the
// prefix "fa" so they cannot collide with other helpers' test files.

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

var faCmp = cmpopts.EquateEmpty()

func faB16(t *rapid.T, label string) (v [16]byte) {
	copy(v[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, label))
	return v
}

// faID draws a nonzero 16-byte id.
func faID(t *rapid.T, label string) [16]byte {
	v := faB16(t, label)
	if v == [16]byte{} {
		v[15] = 1
	}
	return v
}

func faB32(t *rapid.T, label string) (v [32]byte) {
	copy(v[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, label))
	return v
}

func faB64(t *rapid.T, label string) (v [64]byte) {
	copy(v[:], rapid.SliceOfN(rapid.Byte(), 64, 64).Draw(t, label))
	return v
}

func faNZ(t *rapid.T, label string) uint64 { return rapid.Uint64Min(1).Draw(t, label) }

func faBytes(t *rapid.T, label string, min, max int) []byte {
	return rapid.SliceOfN(rapid.Byte(), min, max).Draw(t, label)
}

func faStr(t *rapid.T, label string, maxRunes int) string {
	return rapid.StringN(0, maxRunes, -1).Draw(t, label)
}

func faGuard(t *rapid.T) AuthorityGuard {
	return AuthorityGuard{
		CoordinatorID:      CoordinatorID(faID(t, "coordinator")),
		AuthorityEpoch:     AuthorityEpoch(faNZ(t, "epoch")),
		ActivationSequence: ActivationSequence(faNZ(t, "activation")),
		FencingTokenSHA256: faB32(t, "token_hash"),
	}
}

func faObjectRef(t *rapid.T) ObjectRef {
	return ObjectRef{Kind: ObjectKind(rapid.Uint16Range(1, 10).Draw(t, "object_kind")), ID: faID(t, "object_id")}
}

// faPreconditions draws 0..8 preconditions with distinct ObjectRefs, in
// any order.
func faPreconditions(t *rapid.T) []Precondition {
	n := rapid.IntRange(0, 8).Draw(t, "n_pre")
	var out []Precondition
	for i := 0; i < n; i++ {
		p := Precondition{Object: faObjectRef(t), ExpectedRevision: rapid.Uint64().Draw(t, "rev")}
		if !slices.ContainsFunc(out, func(q Precondition) bool { return q.Object == p.Object }) {
			out = append(out, p)
		}
	}
	return out
}

// faUnknown draws kept unknown fields with ids from [lo, hi] not in
// known, ascending, with a mix of wire types.
func faUnknown(t *rapid.T, lo, hi uint64, known ...uint64) []RawField {
	var out []RawField
	for id := lo; id <= hi; id++ {
		if slices.Contains(known, id) || !rapid.Bool().Draw(t, "has_unknown") {
			continue
		}
		var raw []byte
		switch rapid.IntRange(0, 3).Draw(t, "unknown_wire") {
		case 0:
			raw = AppendFieldBytes(nil, id, faBytes(t, "unknown_value", 0, 20))
		case 1:
			raw = append(AppendUvarint(nil, id), WireVarint)
			raw = AppendUvarint(raw, rapid.Uint64().Draw(t, "unknown_varint"))
		case 2:
			raw = append(AppendUvarint(nil, id), WireFixed32, 1, 2, 3, 4)
		case 3:
			raw = append(AppendUvarint(nil, id), WireList)
			raw = AppendUvarint(raw, 3)
			raw = append(raw, 0, 1, 9)
		}
		out = append(out, RawField{ID: id, Raw: raw})
	}
	return out
}

func faCert(t *rapid.T) ActivationCertificate {
	return ActivationCertificate{
		Version:            1,
		WitnessID:          ActivationWitnessID(faID(t, "witness")),
		CoordinatorID:      CoordinatorID(faID(t, "coordinator")),
		ActivationSequence: ActivationSequence(faNZ(t, "activation")),
		AuthorityEpoch:     AuthorityEpoch(faNZ(t, "epoch")),
		IncarnationID:      IncarnationID(faID(t, "incarnation")),
		FencingToken:       faB32(t, "token"),
		IssuedAt:           rapid.Uint64().Draw(t, "issued"),
		ExpiresAt:          rapid.Uint64().Draw(t, "expires"),
		WitnessKeyID:       faB32(t, "witness_key"),
		Signature:          faB64(t, "sig"),
	}
}

func faGrant(t *rapid.T) WorkloadGrant {
	return WorkloadGrant{
		KeyID:                faB32(t, "key_id"),
		AuthorityFingerprint: faB32(t, "fp"),
		ExpiresAt:            rapid.Uint64().Draw(t, "expires"),
		EffectiveScope:       Scope(rapid.Uint64Range(1, 0x3f).Draw(t, "scope")),
	}
}

var faErrorCodes = []ErrorCode{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 255}

func faResultPayload(t *rapid.T, k ResultKind) ResultPayload {
	switch k {
	case ResultObjectRef:
		return &ObjectRefResult{Object: faObjectRef(t)}
	case ResultStarted:
		s := &StartedResult{RunID: RunID(faID(t, "run")), WorkSessionID: WorkSessionID(faID(t, "ws"))}
		if rapid.Bool().Draw(t, "has_binding") {
			s.BindingID = BindingID(faID(t, "binding"))
		}
		return s
	case ResultDocument:
		return &DocumentResult{Schema: rapid.Uint16().Draw(t, "schema"), Payload: faBytes(t, "doc", 0, 40)}
	}
	return &NoneResult{}
}

func faOperationResult(t *rapid.T) OperationResult {
	var o OperationResult
	o.Tag = OperationTag(rapid.IntRange(0, 5).Draw(t, "tag"))
	switch o.Tag {
	case OperationPending:
		o.AdmittedEpoch = AuthorityEpoch(faNZ(t, "epoch"))
		o.AdmittedEventSequence = EventSequence(faNZ(t, "seq"))
	case OperationSucceeded:
		o.CompletedEventSequence = EventSequence(faNZ(t, "seq"))
		o.ResultKind = ResultKind(rapid.IntRange(0, 3).Draw(t, "result_kind"))
		o.ResultPayload = faResultPayload(t, o.ResultKind).Append(nil)
	case OperationRejected:
		o.CompletedEventSequence = EventSequence(faNZ(t, "seq"))
		o.ErrorCode = rapid.SampledFrom(faErrorCodes).Draw(t, "code")
		o.Message = faStr(t, "message", 40)
	case OperationIndeterminate:
		o.IndeterminateReason = IndeterminateReason(rapid.IntRange(0, 2).Draw(t, "reason"))
		if rapid.Bool().Draw(t, "has_effect") {
			o.EffectAttemptID = EffectAttemptID(faID(t, "effect"))
		}
	case OperationTombstoned:
		o.CommandDigest = faB32(t, "digest")
		o.FinalState = OperationTag(rapid.IntRange(1, 3).Draw(t, "final"))
	}
	return o
}

// faRoundTripFrame checks encode → decode (equal) → re-encode (identical),
// both through DecodeFrame and through a Receiver of the right role and
// state.
func faRoundTripFrame(t faTB, f Frame, role Role, state ConnState) {
	t.Helper()
	body := f.AppendBody(nil)
	got, err := DecodeFrame(f.Type(), body)
	if err != nil {
		t.Fatalf("%v: decode: %v", f.Type(), err)
	}
	if diff := cmp.Diff(f, got, faCmp); diff != "" {
		t.Fatalf("%v: round trip (-want +got):\n%s", f.Type(), diff)
	}
	if again := got.AppendBody(nil); !bytes.Equal(again, body) {
		t.Fatalf("%v: re-encode differs:\n%x\n%x", f.Type(), again, body)
	}
	// Decoding into a used value gives the same result.
	if err := got.DecodeBody(body); err != nil {
		t.Fatalf("%v: second decode: %v", f.Type(), err)
	}
	if again := got.AppendBody(nil); !bytes.Equal(again, body) {
		t.Fatalf("%v: re-encode after reuse differs", f.Type())
	}
	rc := Receiver{Role: role, State: state, Limits: HardLimits()}
	if _, err := rc.DecodeMessage(AppendFrame(nil, f)); err != nil {
		t.Fatalf("%v: receiver: %v", f.Type(), err)
	}
}

// faRoundTripNested checks the same for a positional nested value.
func faRoundTripNested(t faTB, v Nested, fresh Nested) {
	t.Helper()
	img := v.Append(nil)
	if err := fresh.Decode(img); err != nil {
		t.Fatalf("%T: decode: %v", v, err)
	}
	if diff := cmp.Diff(v, fresh, faCmp); diff != "" {
		t.Fatalf("%T: round trip (-want +got):\n%s", v, diff)
	}
	if again := fresh.Append(nil); !bytes.Equal(again, img) {
		t.Fatalf("%T: re-encode differs", v)
	}
	// Trailing and truncated images are refused.
	faWantErr(t, fresh.Decode(append(img, 0)), MalformedMessage, "pos.trailing_bytes")
	if len(img) > 0 {
		if err := fresh.Decode(img[:len(img)-1]); !errors.Is(err, MalformedMessage) {
			t.Fatalf("%T: truncated image: %v", v, err)
		}
	}
}

// faWantErr asserts err carries code and the stable reason.
func faWantErr(t faTB, err error, code ErrorCode, reason string) {
	t.Helper()
	if !errors.Is(err, code) {
		t.Fatalf("want %v (%s), got %v", code, reason, err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Reason != reason {
		t.Fatalf("want reason %q, got %v", reason, err)
	}
}

// TLV body surgery for refusal tests.

func faFields(t faTB, body []byte) []RawField {
	t.Helper()
	var out []RawField
	d := NewTLVReader(body)
	for d.Next() {
		out = append(out, RawField{ID: d.FieldID(), Raw: slices.Clone(d.RawField())})
	}
	if d.Err() != nil {
		t.Fatalf("faFields: %v", d.Err())
	}
	return out
}

func faJoin(fs []RawField) []byte {
	var b []byte
	for _, f := range fs {
		b = append(b, f.Raw...)
	}
	return b
}

// faDrop removes field id.
func faDrop(t faTB, body []byte, id uint64) []byte {
	fs := faFields(t, body)
	return faJoin(slices.DeleteFunc(fs, func(f RawField) bool { return f.ID == id }))
}

// faSet replaces (or inserts, in order) field id with a BYTES field
// holding v.
func faSet(t faTB, body []byte, id uint64, v []byte) []byte {
	fs := slices.DeleteFunc(faFields(t, body), func(f RawField) bool { return f.ID == id })
	fs = append(fs, RawField{ID: id, Raw: AppendFieldBytes(nil, id, v)})
	slices.SortFunc(fs, func(a, b RawField) int { return int(a.ID) - int(b.ID) })
	return faJoin(fs)
}

// faValue returns the value of field id.
func faValue(t faTB, body []byte, id uint64) []byte {
	t.Helper()
	d := NewTLVReader(body)
	for d.Next() {
		if d.FieldID() == id {
			return slices.Clone(d.Known())
		}
	}
	t.Fatalf("field %d absent", id)
	return nil
}

// faCase is one refusal case: a body and the expected code and reason.
type faCase struct {
	name   string
	body   []byte
	code   ErrorCode
	reason string
}

func faRunCases(t *testing.T, newFrame func() Frame, cases []faCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := newFrame().DecodeBody(c.body)
			faWantErr(t, err, c.code, c.reason)
		})
	}
}

// faTB is what the helpers need from *testing.T and *rapid.T.
type faTB interface {
	Helper()
	Fatalf(format string, args ...any)
}
