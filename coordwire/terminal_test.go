package coordwire

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

func faSourceRef(t *rapid.T) TerminalSourceRef {
	return TerminalSourceRef{
		BindingID:                 BindingID(faID(t, "binding")),
		OwnerAuthorityFingerprint: faB32(t, "fp"),
		OwnerIncarnation:          IncarnationID(faID(t, "incarnation")),
		Sequence:                  SourceSequence(faNZ(t, "seq")),
	}
}

func faSourceFactPayload(t *rapid.T, kind SourceFactKind) SourceFactPayload {
	p := SourceFactPayload{Kind: kind}
	switch kind {
	case SourceClosed:
		if rapid.Bool().Draw(t, "has_exit") {
			p.HasExitStatus, p.ExitStatus = true, rapid.Int32().Draw(t, "exit")
		}
	case SourceInputResult:
		p.EffectAttemptID = EffectAttemptID(faID(t, "effect"))
		p.InputResult = InputResult(rapid.IntRange(0, 2).Draw(t, "input"))
	case SourceSignalResult:
		p.EffectAttemptID = EffectAttemptID(faID(t, "effect"))
		p.SignalResult = SignalResult(rapid.IntRange(0, 2).Draw(t, "signal"))
	case SourceOutputRange:
		p.FirstOwnerSeq = rapid.Uint64().Draw(t, "first")
		p.LastOwnerSeq = rapid.Uint64Min(p.FirstOwnerSeq).Draw(t, "last")
		p.ByteCount = rapid.Uint64().Draw(t, "count")
		p.ContentSHA256 = faB32(t, "sha")
	case SourceAttention:
		p.Attention = AttentionKind(rapid.IntRange(1, 3).Draw(t, "attention"))
	}
	return p
}

func TestTerminalRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := faSourceRef(t)
		faRoundTripNested(t, &s, new(TerminalSourceRef))
		kind := SourceFactKind(rapid.IntRange(1, 6).Draw(t, "kind"))
		p := faSourceFactPayload(t, kind)
		faRoundTripNested(t, &p, &SourceFactPayload{Kind: kind})
		f := TerminalSourceFact{Source: s, Kind: kind, Schema: 1, Payload: p.Append(nil)}
		faRoundTripNested(t, &f, new(TerminalSourceFact))
		g := SourceGapPayload{BindingID: BindingID(faID(t, "binding")), ExpectedSource: rapid.Uint64().Draw(t, "exp"),
			ObservedSource: rapid.Uint64().Draw(t, "obs"), Reason: SourceGapReason(rapid.IntRange(0, 2).Draw(t, "reason"))}
		faRoundTripNested(t, &g, new(SourceGapPayload))
	})
}

func TestSourceFactImages(t *testing.T) {
	// CLOSED with exit status -1: present byte then i32 BE two's complement.
	p := SourceFactPayload{Kind: SourceClosed, HasExitStatus: true, ExitStatus: -1}
	if got := p.Append(nil); !bytes.Equal(got, []byte{1, 0xff, 0xff, 0xff, 0xff}) {
		t.Fatalf("CLOSED image %x", got)
	}
	if got := (&SourceFactPayload{Kind: SourceOpened}).Append(nil); len(got) != 0 {
		t.Fatalf("OPENED image %x", got)
	}
	if got := (&SourceFactPayload{Kind: SourceAttention, Attention: AttentionBell}).Append(nil); !bytes.Equal(got, []byte{0, 1}) {
		t.Fatalf("ATTENTION image %x", got)
	}
}

func TestTerminalRefusals(t *testing.T) {
	ref := TerminalSourceRef{BindingID: BindingID{1}, OwnerIncarnation: IncarnationID{1}, Sequence: 1}
	input := SourceFactPayload{Kind: SourceInputResult, EffectAttemptID: EffectAttemptID{1}}
	fact := TerminalSourceFact{Source: ref, Kind: SourceInputResult, Schema: 1, Payload: input.Append(nil)}
	with := func(f func(*TerminalSourceFact)) []byte { c := fact; f(&c); return c.Append(nil) }
	payload := func(kind SourceFactKind, b ...byte) []byte {
		return with(func(f *TerminalSourceFact) { f.Kind, f.Payload = kind, b })
	}
	rng := func(first, last uint64) []byte {
		return (&SourceFactPayload{Kind: SourceOutputRange, FirstOwnerSeq: first, LastOwnerSeq: last}).Append(nil)
	}
	var f TerminalSourceFact
	for _, c := range []struct {
		name   string
		img    []byte
		reason string
	}{
		{"zero_binding", with(func(f *TerminalSourceFact) { f.Source.BindingID = BindingID{} }), "id.zero"},
		{"zero_incarnation", with(func(f *TerminalSourceFact) { f.Source.OwnerIncarnation = IncarnationID{} }), "id.zero"},
		{"zero_sequence", with(func(f *TerminalSourceFact) { f.Source.Sequence = 0 }), "seq.zero"},
		{"kind_zero", with(func(f *TerminalSourceFact) { f.Kind = 0 }), "enum.source_fact_kind"},
		{"kind_7", with(func(f *TerminalSourceFact) { f.Kind = 7 }), "enum.source_fact_kind"},
		{"schema_2", with(func(f *TerminalSourceFact) { f.Schema = 2 }), "source_fact.schema"},
		{"payload_too_long", with(func(f *TerminalSourceFact) { f.Payload = make([]byte, 57) }), "bytes.too_long"},
		{"input_result_3", payload(SourceInputResult, append(make([]byte, 15), 1, 3)...), "enum.input_result"},
		{"input_zero_effect", payload(SourceInputResult, make([]byte, 17)...), "id.zero"},
		{"signal_result_3", payload(SourceSignalResult, append(make([]byte, 15), 1, 3)...), "enum.signal_result"},
		{"opened_nonempty", payload(SourceOpened, 0), "pos.trailing_bytes"},
		{"closed_presence_2", payload(SourceClosed, 2), "optional.invalid_presence"},
		{"closed_truncated", payload(SourceClosed, 1, 0, 0), "pos.truncated"},
		{"closed_absent_trailing", payload(SourceClosed, 0, 0), "pos.trailing_bytes"},
		{"attention_0", payload(SourceAttention, 0, 0), "enum.attention_kind"},
		{"attention_4", payload(SourceAttention, 0, 4), "enum.attention_kind"},
		{"range_order", payload(SourceOutputRange, rng(5, 4)...), "source_fact.range_order"},
		{"range_short", payload(SourceOutputRange, rng(1, 2)[:55]...), "pos.truncated"},
		{"trailing", append(fact.Append(nil), 0), "pos.trailing_bytes"},
		{"truncated", fact.Append(nil)[:TerminalSourceRefSize+3], "pos.truncated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			faWantErr(t, f.Decode(c.img), MalformedMessage, c.reason)
		})
	}
	var g SourceGapPayload
	gap := (SourceGapPayload{BindingID: BindingID{1}, Reason: SourceGapEnded}).Append(nil)
	if len(gap) != SourceGapPayloadSize {
		t.Fatalf("gap size %d", len(gap))
	}
	bad := bytes.Clone(gap)
	bad[len(bad)-1] = 3
	faWantErr(t, g.Decode(bad), MalformedMessage, "enum.source_gap_reason")
	faWantErr(t, g.Decode(append(make([]byte, 16), gap[16:]...)), MalformedMessage, "id.zero")
	var p SourceFactPayload
	faWantErr(t, p.DecodeAs(9, nil), MalformedMessage, "enum.source_fact_kind")
}
