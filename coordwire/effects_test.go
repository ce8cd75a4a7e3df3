package coordwire

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

func faBindingRef(t *rapid.T) TerminalBindingRef {
	return TerminalBindingRef{
		BindingID:                 BindingID(faID(t, "binding")),
		WorkSessionID:             WorkSessionID(faID(t, "ws")),
		OwnerAuthorityFingerprint: faB32(t, "fp"),
		OwnerIncarnation:          IncarnationID(faID(t, "incarnation")),
		ResourceID:                faBytes(t, "resource", 1, 24),
	}
}

func faTarget(t *rapid.T, tag EffectTargetTag) EffectTarget {
	if tag == TargetActiveBinding {
		return EffectTarget{Tag: tag, Binding: faBindingRef(t)}
	}
	return EffectTarget{
		Tag:                       TargetPendingSpawn,
		PendingBindingID:          PendingBindingID(faID(t, "pending")),
		OwnerAuthorityFingerprint: faB32(t, "fp"),
		OwnerIncarnation:          IncarnationID(faID(t, "incarnation")),
		Group:                     faBytes(t, "group", 1, 24),
	}
}

func faEffectPayload(t *rapid.T, kind EffectKind) EffectPayload {
	switch kind {
	case EffectSpawn:
		return EffectPayload{Kind: kind, WorkSessionID: WorkSessionID(faID(t, "ws")),
			ExecutorSchema: rapid.Uint16().Draw(t, "schema"), ExecutorDocument: faBytes(t, "doc", 0, 40)}
	case EffectProcessSignal:
		return EffectPayload{Kind: kind, Signal: ProcessSignal(rapid.IntRange(0, 2).Draw(t, "signal"))}
	}
	return EffectPayload{Kind: kind}
}

func faEffectAttempt(t *rapid.T) EffectAttempt {
	kind := EffectKind(rapid.IntRange(1, 3).Draw(t, "kind"))
	tag := TargetActiveBinding
	if kind == EffectSpawn {
		tag = TargetPendingSpawn
	}
	p := faEffectPayload(t, kind)
	return EffectAttempt{
		ID:           EffectAttemptID(faID(t, "id")),
		OperationID:  OperationID(faID(t, "op")),
		Kind:         kind,
		Target:       faTarget(t, tag),
		EffectDigest: faB32(t, "digest"),
		Payload:      p.Append(nil),
		State:        EffectState(rapid.IntRange(0, 4).Draw(t, "state")),
	}
}

func TestEffectsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tg := faTarget(t, EffectTargetTag(rapid.IntRange(0, 1).Draw(t, "tag")))
		faRoundTripNested(t, &tg, new(EffectTarget))
		kind := EffectKind(rapid.IntRange(1, 3).Draw(t, "pkind"))
		p := faEffectPayload(t, kind)
		faRoundTripNested(t, &p, &EffectPayload{Kind: kind})
		var q EffectPayload
		if err := q.DecodeAs(kind, p.Append(nil)); err != nil || q.Kind != kind {
			t.Fatalf("DecodeAs: %v", err)
		}
		a := faEffectAttempt(t)
		faRoundTripNested(t, &a, new(EffectAttempt))
	})
}

func TestEffectRefusals(t *testing.T) {
	spawnP := EffectPayload{Kind: EffectSpawn, WorkSessionID: WorkSessionID{1}, ExecutorSchema: 1, ExecutorDocument: []byte("x")}
	pending := EffectTarget{Tag: TargetPendingSpawn, PendingBindingID: PendingBindingID{1}, OwnerIncarnation: IncarnationID{1}, Group: []byte("g")}
	active := EffectTarget{Tag: TargetActiveBinding, Binding: TerminalBindingRef{BindingID: BindingID{1}, WorkSessionID: WorkSessionID{1}, OwnerIncarnation: IncarnationID{1}, ResourceID: []byte("r")}}
	spawn := EffectAttempt{ID: EffectAttemptID{1}, OperationID: OperationID{1}, Kind: EffectSpawn, Target: pending, Payload: spawnP.Append(nil), State: EffectReady}
	kill := EffectAttempt{ID: EffectAttemptID{1}, OperationID: OperationID{1}, Kind: EffectKill, Target: active, State: EffectDispatched}
	sig := kill
	sig.Kind, sig.Payload = EffectProcessSignal, []byte{byte(SignalTerminate)}
	with := func(a EffectAttempt, f func(*EffectAttempt)) []byte { f(&a); return a.Append(nil) }
	var a EffectAttempt
	for _, c := range []struct {
		name   string
		img    []byte
		reason string
	}{
		{"spawn_needs_pending", with(spawn, func(a *EffectAttempt) { a.Target = active }), "effect.target_kind_mismatch"},
		{"kill_needs_active", with(kill, func(a *EffectAttempt) { a.Target = pending }), "effect.target_kind_mismatch"},
		{"signal_needs_active", with(sig, func(a *EffectAttempt) { a.Target = pending }), "effect.target_kind_mismatch"},
		{"kind_zero", with(kill, func(a *EffectAttempt) { a.Kind = 0 }), "enum.effect_kind"},
		{"kind_4", with(kill, func(a *EffectAttempt) { a.Kind = 4 }), "enum.effect_kind"},
		{"state_5", with(kill, func(a *EffectAttempt) { a.State = 5 }), "enum.effect_state"},
		{"zero_id", with(kill, func(a *EffectAttempt) { a.ID = EffectAttemptID{} }), "id.zero"},
		{"zero_operation", with(kill, func(a *EffectAttempt) { a.OperationID = OperationID{} }), "id.zero"},
		{"kill_payload_nonempty", with(kill, func(a *EffectAttempt) { a.Payload = []byte{0} }), "pos.trailing_bytes"},
		{"signal_payload_enum", with(sig, func(a *EffectAttempt) { a.Payload = []byte{3} }), "enum.process_signal"},
		{"signal_payload_empty", with(sig, func(a *EffectAttempt) { a.Payload = nil }), "pos.truncated"},
		{"spawn_payload_zero_ws", with(spawn, func(a *EffectAttempt) {
			p := spawnP
			p.WorkSessionID = WorkSessionID{}
			a.Payload = p.Append(nil)
		}), "id.zero"},
		{"spawn_payload_trailing", with(spawn, func(a *EffectAttempt) { a.Payload = append(spawnP.Append(nil), 0) }), "pos.trailing_bytes"},
		{"target_tag_2", with(kill, func(a *EffectAttempt) { a.Target.Tag = 2 }), "enum.effect_target_tag"},
		{"target_empty_group", with(spawn, func(a *EffectAttempt) { a.Target.Group = nil }), "effect.empty_group"},
		{"target_group_too_long", with(spawn, func(a *EffectAttempt) { a.Target.Group = make([]byte, MaxResourceIDBytes+1) }), "bytes.too_long"},
		{"target_zero_pending", with(spawn, func(a *EffectAttempt) { a.Target.PendingBindingID = PendingBindingID{} }), "id.zero"},
		{"target_binding_empty_resource", with(kill, func(a *EffectAttempt) { a.Target.Binding.ResourceID = nil }), "binding.empty_resource_id"},
		{"truncated", spawn.Append(nil)[:40], "pos.truncated"},
		{"trailing", append(spawn.Append(nil), 0), "pos.trailing_bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			faWantErr(t, a.Decode(c.img), MalformedMessage, c.reason)
		})
	}
	var p EffectPayload
	faWantErr(t, p.DecodeAs(0, nil), MalformedMessage, "enum.effect_kind")
	faWantErr(t, p.DecodeAs(EffectSpawn, append(spawnP.Append(nil)[:18], 0, 4, 0, 1)), MalformedMessage, "bytes.too_long")
	// Valid images decode; the decoded payload does not alias the input.
	img := spawn.Append(nil)
	if err := a.Decode(img); err != nil {
		t.Fatal(err)
	}
	img[len(img)-2] = 'z'
	if !bytes.Equal(a.Payload, spawnP.Append(nil)) {
		t.Fatal("EffectAttempt payload aliases its input")
	}
}
