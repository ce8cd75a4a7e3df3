package coordjson

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// TestDirectMatchesMarshal: the notifications written straight from a
// record (MarshalAdd, MarshalUpdate, MarshalDelete) are, byte for byte,
// Marshal of the projected maps, for every golden record — every record
// kind, the Run outcomes, each ADMIN payload, and a payload that does not
// decode — and for each record's zero payload of its kind.
func TestDirectMatchesMarshal(t *testing.T) {
	var recs []coordwire.SnapshotRecord
	for _, g := range goldenRecords() {
		recs = append(recs, g.r)
		// The same kind with every field zero.
		if p, err := g.r.DecodePayload(); err == nil {
			z := reflect.New(reflect.TypeOf(p).Elem()).Interface().(coordwire.RecordPayload)
			recs = append(recs, coordwire.SnapshotRecord{Object: g.r.Object, Revision: 1, SchemaVersion: g.r.SchemaVersion, Payload: z.AppendTLV(nil)})
		}
	}
	for i, r := range recs {
		want := string(Marshal(Record(r)))
		if got := string(appendRecord(nil, r)); got != want {
			t.Errorf("record %d:\n got %s\nwant %s", i, got, want)
		}
		o, err := coordclient.DecodeObject(&r)
		if err != nil {
			continue // not an object a Mirror holds
		}
		prev := recs[(i+1)%len(recs)]
		old, err := coordclient.DecodeObject(&prev)
		if err != nil {
			old = o
		}
		for _, c := range []struct {
			name      string
			got, want []byte
		}{
			{"add", MarshalAdd(o, false), Marshal(Add(o, false))},
			{"add initial", MarshalAdd(o, true), Marshal(Add(o, true))},
			{"update", MarshalUpdate(old, o), Marshal(Update(old, o))},
			{"delete", MarshalDelete(o), Marshal(Delete(o))},
		} {
			if string(c.got) != string(c.want) {
				t.Errorf("record %d %s:\n got %s\nwant %s", i, c.name, c.got, c.want)
			}
		}
	}
}

// TestDirectValuesMatchTheMapPath: appendValue writes what appendJSON
// writes of jsonValue's maps, for seeded random values of every coordwire
// type the projection shows (records, ADMIN payloads, manifests, results,
// commands, terminal facts): every field kind — presence flags on and
// off, zero and non-zero times, nil and empty byte strings, strings that
// need escaping, enums with and without a name, nested and embedded
// structs — is reached.
func TestDirectValuesMatchTheMapPath(t *testing.T) {
	types := []any{
		coordwire.ObjectiveRecord{}, coordwire.RunRecord{}, coordwire.WorkSessionRecord{}, coordwire.BindingRecord{},
		coordwire.ArtifactRecord{}, coordwire.ArtifactManifestRecord{}, coordwire.SignalRecord{}, coordwire.OperationRecord{},
		coordwire.EvidenceRecord{}, coordwire.AdminActivationPayload{}, coordwire.AdminRetentionPayload{},
		coordwire.AdminCredentialPayload{}, coordwire.ArtifactManifestDoc{}, coordwire.NoneResult{}, coordwire.ObjectRefResult{},
		coordwire.StartedResult{}, coordwire.DocumentResult{}, coordwire.TerminalSourceRef{}, coordwire.TerminalSourceFact{},
		coordwire.SourceFactPayload{}, coordwire.SourceGapPayload{}, coordwire.CreateObjective{}, coordwire.UpdateObjective{},
		coordwire.StartRun{}, coordwire.CancelRun{}, coordwire.PauseRun{}, coordwire.ResumeRun{}, coordwire.AckSignal{},
		coordwire.SuppressSignal{}, coordwire.RegisterArtifactManifest{}, coordwire.EndBinding{}, coordwire.ChangeRetention{},
		coordwire.ObjectRef{}, coordwire.Precondition{}, coordwire.AuthorityGuard{}, coordwire.TerminalBindingRef{},
		coordwire.OperationResult{}, probe{}, probeDup{},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	compared := 0
	for _, x := range types {
		typ := reflect.TypeOf(x)
		for i := range 200 {
			v := reflect.New(typ).Elem()
			fill(rng, v, 0, i%4 == 0)
			want, ok := mapPath(v)
			if !ok {
				t.Logf("%s: no map-path projection, skipped", typ)
				break
			}
			if got := string(appendValue(nil, v)); got != want {
				t.Fatalf("%s #%d:\n got %s\nwant %s", typ, i, got, want)
			}
			// The same value, not addressable.
			if got := string(appendValue(nil, reflect.ValueOf(v.Interface()))); got != want {
				t.Fatalf("%s #%d, not addressable:\n got %s\nwant %s", typ, i, got, want)
			}
			compared++
		}
	}
	// Every tag of an OperationResult, with each kind of SUCCEEDED
	// payload (and one that does not decode).
	ref := coordwire.ObjectRef{Kind: coordwire.ObjectKindRun, ID: id16(3)}
	payloads := map[coordwire.ResultKind][]byte{
		coordwire.ResultNone:      (&coordwire.NoneResult{}).Append(nil),
		coordwire.ResultObjectRef: (&coordwire.ObjectRefResult{Object: ref}).Append(nil),
		coordwire.ResultStarted:   (&coordwire.StartedResult{RunID: coordwire.RunID(id16(4)), WorkSessionID: coordwire.WorkSessionID(id16(5))}).Append(nil),
		coordwire.ResultDocument:  (&coordwire.DocumentResult{Schema: 7, Payload: []byte("<doc>")}).Append(nil),
	}
	bound := (&coordwire.StartedResult{RunID: coordwire.RunID(id16(4)), WorkSessionID: coordwire.WorkSessionID(id16(5)), BindingID: coordwire.BindingID(id16(6))}).Append(nil)
	results := []coordwire.OperationResult{
		{Tag: coordwire.OperationPending, AdmittedEpoch: 3, AdmittedEventSequence: 9},
		{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 7, ResultKind: coordwire.ResultStarted, ResultPayload: bound},
		{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 7, ResultKind: coordwire.ResultDocument, ResultPayload: []byte{1}},
		{Tag: coordwire.OperationRejected, CompletedEventSequence: 8, ErrorCode: coordwire.ErrorCode(3), Message: "no \"such\" <run>"},
		{Tag: coordwire.OperationIndeterminate, IndeterminateReason: 1},
		{Tag: coordwire.OperationIndeterminate, IndeterminateReason: 2, EffectAttemptID: coordwire.EffectAttemptID(id16(8))},
		{Tag: coordwire.OperationTombstoned, CommandDigest: id32(9), FinalState: 1},
		{Tag: 99},
	}
	for k, p := range payloads {
		results = append(results, coordwire.OperationResult{Tag: coordwire.OperationSucceeded, CompletedEventSequence: 1, ResultKind: k, ResultPayload: p})
	}
	for i, r := range results {
		want := string(Marshal(operationResult(r)))
		if got := string(appendOperationResult(nil, r)); got != want {
			t.Fatalf("result %d:\n got %s\nwant %s", i, got, want)
		}
		if !strings.Contains(want, `"result":{`) && r.Tag == coordwire.OperationSucceeded && i > 2 {
			t.Fatalf("result %d: its payload did not decode: %s", i, want)
		}
	}
	if compared < 30*200 {
		t.Fatalf("compared only %d values", compared)
	}
}

// mapPath is appendJSON(jsonValue(v)), or false when the map path has no
// projection of v's type.
func mapPath(v reflect.Value) (s string, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return string(appendJSON(nil, jsonValue(v))), true
}

// fill sets v to a seeded random value (zero values when zero).
func fill(rng *rand.Rand, v reflect.Value, depth int, zero bool) {
	if zero || !v.CanSet() {
		return
	}
	strs := []string{"", "plain", `<a href="x">&amp;</a>`, "tab\there\nline\u2028sep\x01\x7f", "é\xffx"}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch rng.IntN(4) {
		case 0:
		case 1:
			v.SetInt(int64(rng.IntN(8)))
		case 2:
			v.SetInt(-int64(rng.IntN(20)))
		default:
			v.SetInt(rng.Int64() >> (64 - v.Type().Bits()))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		switch rng.IntN(4) {
		case 0:
		case 1:
			v.SetUint(uint64(rng.IntN(8)))
		case 2:
			v.SetUint(1767225600 + uint64(rng.IntN(1000)))
		default:
			v.SetUint(rng.Uint64() >> (64 - v.Type().Bits()))
		}
	case reflect.String:
		v.SetString(strs[rng.IntN(len(strs))])
	case reflect.Array:
		for i := range v.Len() {
			fill(rng, v.Index(i), depth+1, false)
		}
	case reflect.Slice:
		switch n := rng.IntN(4); {
		case n == 0:
		case n == 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		case depth < 4:
			s := reflect.MakeSlice(v.Type(), n, n)
			for i := range n {
				fill(rng, s.Index(i), depth+1, false)
			}
			v.Set(s)
		}
	case reflect.Pointer:
		if depth < 4 && rng.IntN(2) == 0 {
			p := reflect.New(v.Type().Elem())
			fill(rng, p.Elem(), depth+1, false)
			v.Set(p)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(rng, v.Field(i), depth+1, false)
			}
		}
	}
}

// The projection's rules on field kinds no coordwire type has today.
type (
	namedInt  int16
	namedStr  string
	probeLeaf struct {
		X    uint8
		Name namedStr
		N    namedInt
	}
	ProbeInner struct {
		B    bool
		Leaf []probeLeaf
	}
	probe struct {
		ProbeInner
		P        *probeLeaf
		A        [3]byte
		Tags     []string
		HasWhen  bool
		When     uint32
		ClosedAt uint64
		Kind     coordwire.ObjectKind
		Doc      []byte
	}
	// probeDup has two fields named "b": the map keeps the later.
	probeDup struct {
		ProbeInner
		B bool
	}
)
