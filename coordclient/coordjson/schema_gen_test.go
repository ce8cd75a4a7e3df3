package coordjson

import (
	"fmt"
	"reflect"
	"sort"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// The schema generator: the payload definitions come from the coordwire
// types by the same rules as the projection (reflect.go); the envelopes
// are written out here. TestSchemaCurrent compares its output with
// schema/v1.json (go test -run TestSchemaCurrent -update rewrites it).

type gen struct{ defs map[string]any }

func ref(name string) map[string]any { return map[string]any{"$ref": "#/$defs/" + name} }

func nullable(s map[string]any) map[string]any {
	return map[string]any{"oneOf": []any{map[string]any{"type": "null"}, s}}
}

func obj(props map[string]any, optional ...string) map[string]any {
	req := []any{}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		opt := false
		for _, o := range optional {
			opt = opt || o == k
		}
		if !opt {
			req = append(req, k)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}
}

func uintMax(bits int) map[string]any {
	return map[string]any{"type": "integer", "minimum": 0, "maximum": uint64(1)<<bits - 1}
}

func (g *gen) enum(t reflect.Type) map[string]any {
	if _, ok := g.defs[t.Name()]; !ok {
		names := namesOf(t)
		list := make([]string, 0, len(names))
		for n := range names {
			list = append(list, n)
		}
		sort.Slice(list, func(i, j int) bool { return names[list[i]] < names[list[j]] })
		e := make([]any, len(list))
		for i, n := range list {
			e[i] = n
		}
		g.defs[t.Name()] = map[string]any{"type": "string", "enum": e, "description": "coordwire." + t.Name() + " by its spec name"}
	}
	return ref(t.Name())
}

func (g *gen) bits(names []string) map[string]any {
	e := make([]any, len(names))
	for i, n := range names {
		e[i] = n
	}
	return map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": e}}
}

func (g *gen) typ(t reflect.Type, f *reflect.StructField) map[string]any {
	switch {
	case t == opResultType:
		return ref("operation_result")
	case t == scopeType:
		return ref("scopes")
	case t == capsType:
		return ref("capabilities")
	case t.Kind() == reflect.Array && t.Elem() == byteType:
		return ref(fmt.Sprintf("hex%d", t.Len()))
	case t.Kind() == reflect.Slice && t.Elem() == byteType:
		return nullable(ref("base64"))
	case isEnum(t):
		return g.enum(t)
	case f != nil && isTimeField(*f):
		return nullable(ref("time"))
	case t.Kind() == reflect.Bool:
		return map[string]any{"type": "boolean"}
	case t.Kind() == reflect.String:
		return map[string]any{"type": "string"}
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		return uintMax(int(8 * t.Size()))
	case isInteger(t.Kind()):
		return map[string]any{"type": "integer", "minimum": -(int64(1) << (8*t.Size() - 1)), "maximum": int64(1)<<(8*t.Size()-1) - 1}
	case t.Kind() == reflect.Struct:
		return g.structDef(t)
	case t.Kind() == reflect.Slice:
		return map[string]any{"type": "array", "items": g.typ(t.Elem(), nil)}
	}
	panic("no schema for " + t.String())
}

func (g *gen) structDef(t reflect.Type) map[string]any {
	props := map[string]any{}
	g.fields(props, t)
	return obj(props)
}

func (g *gen) fields(props map[string]any, t reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || f.Type == rawFieldType || isPresenceFlag(t, f) {
			continue
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			g.fields(props, f.Type)
			continue
		}
		s := g.typ(f.Type, &f)
		if optionalOf(t, f.Name) {
			s = nullable(s)
		}
		props[snake(f.Name)] = s
	}
}

// named registers the definition of a coordwire struct under name.
func (g *gen) named(name string, t reflect.Type, edit func(props map[string]any)) map[string]any {
	props := map[string]any{}
	g.fields(props, t)
	if edit != nil {
		edit(props)
	}
	g.defs[name] = obj(props)
	return ref(name)
}

func generateSchema() map[string]any {
	g := &gen{defs: map[string]any{}}
	d := g.defs
	for _, n := range []int{16, 32, 64} {
		d[fmt.Sprintf("hex%d", n)] = map[string]any{"type": "string", "pattern": fmt.Sprintf("^[0-9a-f]{%d}$", 2*n), "description": fmt.Sprintf("%d bytes as lowercase hex", n)}
	}
	d["base64"] = map[string]any{"type": "string", "pattern": "^[A-Za-z0-9+/]*={0,2}$", "description": "bytes as standard base64 (RFC 4648 §4, padded)"}
	d["time"] = map[string]any{"type": "string", "format": "date-time", "description": "RFC 3339, UTC"}
	d["u64"] = uintMax(64)
	scopes := []string{}
	for _, b := range scopeBits {
		scopes = append(scopes, b.name)
	}
	caps := []string{}
	for _, b := range capBits {
		caps = append(caps, b.name)
	}
	d["scopes"] = g.bits(scopes)
	d["capabilities"] = g.bits(caps)
	d["ref"] = obj(map[string]any{"kind": g.enum(reflect.TypeFor[coordwire.ObjectKind]()), "id": ref("hex16")})

	// Result payloads and operation results (§8).
	d["result_payload"] = map[string]any{"oneOf": []any{
		obj(map[string]any{"kind": map[string]any{"const": "NONE"}}),
		obj(map[string]any{"kind": map[string]any{"const": "OBJECT_REF"}, "object": ref("ref")}),
		obj(map[string]any{"kind": map[string]any{"const": "STARTED"}, "run_id": ref("hex16"), "work_session_id": ref("hex16"), "binding_id": nullable(ref("hex16"))}),
		obj(map[string]any{"kind": map[string]any{"const": "DOCUMENT"}, "schema": uintMax(16), "payload": ref("base64")}),
	}}
	g.enum(reflect.TypeFor[coordwire.OperationTag]())
	d["operation_result"] = map[string]any{"oneOf": []any{
		obj(map[string]any{"tag": map[string]any{"const": "PENDING"}, "admitted_epoch": ref("u64"), "admitted_event_sequence": ref("u64")}),
		obj(map[string]any{"tag": map[string]any{"const": "SUCCEEDED"}, "completed_event_sequence": ref("u64"), "result_kind": g.enum(reflect.TypeFor[coordwire.ResultKind]()), "result_payload": ref("base64"), "result": nullable(ref("result_payload"))}),
		obj(map[string]any{"tag": map[string]any{"const": "REJECTED"}, "completed_event_sequence": ref("u64"), "error_code": g.enum(reflect.TypeFor[coordwire.ErrorCode]()), "error_code_number": uintMax(16), "message": map[string]any{"type": "string"}}),
		obj(map[string]any{"tag": map[string]any{"const": "INDETERMINATE"}, "indeterminate_reason": g.enum(reflect.TypeFor[coordwire.IndeterminateReason]()), "effect_attempt_id": nullable(ref("hex16"))}),
		obj(map[string]any{"tag": map[string]any{"const": "TOMBSTONED"}, "command_digest": ref("hex32"), "final_state": ref("OperationTag")}),
		obj(map[string]any{"tag": map[string]any{"const": "UNKNOWN"}}),
	}}

	// Record payloads (A.7) and records.
	d["run_outcome"] = nullable(obj(map[string]any{"bytes": ref("base64"), "text": map[string]any{"type": "string"},
		"closed": nullable(obj(map[string]any{"exit_status": nullable(map[string]any{"type": "integer", "minimum": 0}),
			"signal": nullable(map[string]any{"type": "integer", "minimum": 1}), "signal_name": nullable(map[string]any{"type": "string"})}))}))
	manifest := g.named("ArtifactManifestDoc", reflect.TypeFor[coordwire.ArtifactManifestDoc](), func(p map[string]any) {
		p["locator"] = nullable(map[string]any{"type": "string"})
	})
	admin := []any{map[string]any{"type": "null"}}
	for _, t := range []reflect.Type{reflect.TypeFor[coordwire.AdminActivationPayload](), reflect.TypeFor[coordwire.AdminRetentionPayload](), reflect.TypeFor[coordwire.AdminCredentialPayload]()} {
		admin = append(admin, g.named(t.Name(), t, nil))
	}
	payloads := []any{map[string]any{"type": "null"}}
	for _, t := range []reflect.Type{
		reflect.TypeFor[coordwire.ObjectiveRecord](), reflect.TypeFor[coordwire.RunRecord](),
		reflect.TypeFor[coordwire.WorkSessionRecord](), reflect.TypeFor[coordwire.BindingRecord](),
		reflect.TypeFor[coordwire.ArtifactRecord](), reflect.TypeFor[coordwire.ArtifactManifestRecord](),
		reflect.TypeFor[coordwire.SignalRecord](), reflect.TypeFor[coordwire.OperationRecord](),
		reflect.TypeFor[coordwire.EvidenceRecord](), reflect.TypeFor[coordwire.AdminRecord](),
	} {
		payloads = append(payloads, g.named(t.Name(), t, func(p map[string]any) {
			switch t {
			case reflect.TypeFor[coordwire.RunRecord]():
				p["outcome"] = ref("run_outcome")
			case reflect.TypeFor[coordwire.ArtifactManifestRecord]():
				p["manifest_doc"] = nullable(manifest)
			case reflect.TypeFor[coordwire.AdminRecord]():
				p["detail"] = map[string]any{"oneOf": admin}
			}
		}))
	}
	d["record"] = obj(map[string]any{
		"kind": ref("ObjectKind"), "id": ref("hex16"), "revision": ref("u64"), "schema": uintMax(16),
		"payload": map[string]any{"oneOf": payloads}, "raw_payload": ref("base64"),
	}, "raw_payload")

	// Events (§10), GAPs.
	g.named("TerminalSourceRef", reflect.TypeFor[coordwire.TerminalSourceRef](), nil)
	g.named("SourceGapPayload", reflect.TypeFor[coordwire.SourceGapPayload](), nil)
	d["source_fact"] = obj(map[string]any{
		"source": ref("TerminalSourceRef"), "kind": g.enum(reflect.TypeFor[coordwire.SourceFactKind]()), "schema": uintMax(16), "payload": ref("base64"),
		"fact": nullable(map[string]any{"oneOf": []any{
			obj(map[string]any{}),
			obj(map[string]any{"exit_status": nullable(map[string]any{"type": "integer"})}),
			obj(map[string]any{"effect_attempt_id": ref("hex16"), "input_result": g.enum(reflect.TypeFor[coordwire.InputResult]())}),
			obj(map[string]any{"effect_attempt_id": ref("hex16"), "signal_result": g.enum(reflect.TypeFor[coordwire.SignalResult]())}),
			obj(map[string]any{"first_owner_seq": ref("u64"), "last_owner_seq": ref("u64"), "byte_count": ref("u64"), "content_sha256": ref("hex32")}),
			obj(map[string]any{"attention": g.enum(reflect.TypeFor[coordwire.AttentionKind]())}),
		}}),
	})
	d["event"] = obj(map[string]any{
		"subscription_id": ref("hex16"), "delivery_sequence": ref("u64"), "event_sequence": ref("u64"), "event_id": ref("hex16"),
		"event_kind": g.enum(reflect.TypeFor[coordwire.EventKind]()), "object": ref("ref"), "object_revision": ref("u64"),
		"schema": uintMax(16), "payload": ref("base64"),
		"record": ref("record"), "source_fact": nullable(ref("source_fact")), "source_gap": nullable(ref("SourceGapPayload")),
	}, "record", "source_fact", "source_gap")
	d["gap"] = obj(map[string]any{
		"subscription_id": ref("hex16"), "last_contiguous_delivery": ref("u64"), "last_contiguous_event": ref("u64"),
		"observed_event": ref("u64"), "reason": g.enum(reflect.TypeFor[coordwire.GapReason]()),
	})

	// Errors.
	sn := []any{}
	for _, s := range sentinels {
		sn = append(sn, s.name)
	}
	d["error"] = obj(map[string]any{
		"code": nullable(ref("ErrorCode")), "code_number": nullable(uintMax(16)), "reason": map[string]any{"type": "string"},
		"op": map[string]any{"type": "string"}, "remote": map[string]any{"type": "boolean"}, "message": map[string]any{"type": "string"},
		"sentinels": map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": sn}},
	})
	d["result"] = obj(map[string]any{
		"operation_id": ref("hex16"), "operation": nullable(ref("operation_result")), "final": map[string]any{"type": "boolean"}, "error": nullable(ref("error")),
	})

	// Authority, session, snapshot, Mirror.
	g.named("authority", reflect.TypeFor[coordclient.AuthorityState](), nil)
	g.named("guard", reflect.TypeFor[coordwire.AuthorityGuard](), nil)
	g.named("limits", reflect.TypeFor[coordwire.Limits](), nil)
	grant := g.named("grant", reflect.TypeFor[coordwire.WorkloadGrant](), nil)
	d["session"] = obj(map[string]any{
		"protocol": map[string]any{"type": "array", "items": uintMax(16)}, "negotiated_capabilities": ref("capabilities"),
		"coordinator_id": ref("hex16"), "authority_epoch": ref("u64"), "incarnation_id": ref("hex16"), "limits": ref("limits"),
		"grant": grant, "operation_result_retention_secs": ref("u64"),
		"certificate": obj(map[string]any{"witness_id": ref("hex16"), "activation_sequence": ref("u64"), "issued_at": nullable(ref("time")), "expires_at": nullable(ref("time")), "witness_key_id": ref("hex32")}),
		"guard":       ref("guard"), "alive": map[string]any{"type": "boolean"},
	})
	d["snapshot"] = obj(map[string]any{
		"snapshot_id": ref("hex16"), "guard": ref("guard"), "base_event_cut": ref("u64"), "pages": uintMax(32),
		"digest": ref("hex32"), "records": map[string]any{"type": "array", "items": ref("record")},
	})
	states := []any{}
	for _, s := range []coordclient.MirrorState{coordclient.Connecting, coordclient.Staging, coordclient.Live, coordclient.Healing, coordclient.Failed, coordclient.Quarantined} {
		states = append(states, MirrorStateName(s))
	}
	d["mirror_state"] = map[string]any{"type": "string", "enum": states}
	d["status"] = obj(map[string]any{
		"state": ref("mirror_state"), "synced": map[string]any{"type": "boolean"}, "cut": ref("u64"), "authority": nullable(ref("authority")),
		"last_event": nullable(ref("time")), "last_pong": nullable(ref("time")), "error": nullable(ref("error")),
	})
	reasons := []any{}
	for _, r := range []coordclient.ReplaceReason{coordclient.ReplacedGap, coordclient.ReplacedReconnect, coordclient.ReplacedResync, coordclient.ReplacedAuthority} {
		reasons = append(reasons, r.String())
	}
	d["mirror_event"] = map[string]any{"oneOf": []any{
		obj(map[string]any{"type": map[string]any{"const": ChangeAdd}, "initial": map[string]any{"type": "boolean"}, "object": ref("record")}),
		obj(map[string]any{"type": map[string]any{"const": ChangeUpdate}, "old_revision": ref("u64"), "object": ref("record")}),
		obj(map[string]any{"type": map[string]any{"const": ChangeDelete}, "object": ref("record")}),
		obj(map[string]any{"type": map[string]any{"const": ChangeReplaced}, "cut": ref("u64"), "reason": map[string]any{"type": "string", "enum": reasons}}),
		obj(map[string]any{"type": map[string]any{"const": ChangeState}, "state": ref("mirror_state"), "error": nullable(ref("error"))}),
		obj(map[string]any{"type": map[string]any{"const": ChangeGap}, "state": ref("mirror_state"), "gap": ref("gap")}),
		obj(map[string]any{"type": map[string]any{"const": ChangeAuthority}, "authority": ref("authority")}),
	}}

	// Inputs: commands and the client config.
	cmds := []any{}
	for k := coordwire.CommandKind(1); k < 64; k++ {
		p := coordwire.NewCommandPayload(k)
		if p == nil {
			continue
		}
		t := reflect.TypeOf(p).Elem()
		cmds = append(cmds, obj(map[string]any{
			"kind": map[string]any{"const": k.String()}, "payload": g.named("command_"+t.Name(), t, nil),
			"preconditions": map[string]any{"type": "array", "items": obj(map[string]any{"object": ref("ref"), "expected_revision": ref("u64")})},
			"operation_id":  ref("hex16"),
		}, "preconditions", "operation_id"))
	}
	d["command"] = map[string]any{"oneOf": cmds}
	d["config"] = obj(map[string]any{
		"address":               map[string]any{"type": "string", "pattern": "^(unix:.+|tls:.+:[0-9]+)$"},
		"key_file":              map[string]any{"type": "string"},
		"authority_fingerprint": map[string]any{"type": "string", "pattern": "^(sha256:)?[0-9a-f]{64}$"},
		"witness_public_key":    ref("hex32"),
		"scopes":                ref("scopes"), "capabilities": ref("capabilities"),
		"client_name": map[string]any{"type": "string"}, "grant_lifetime_secs": uintMax(32), "handshake_timeout_ms": uintMax(32),
		"tls_ca_file": map[string]any{"type": "string"}, "tls_server_name": map[string]any{"type": "string"},
	}, "key_file", "scopes", "capabilities", "client_name", "grant_lifetime_secs", "handshake_timeout_ms", "tls_ca_file", "tls_server_name")

	return map[string]any{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"$id":         SchemaID,
		"title":       "phux coordinator client JSON projection " + Version,
		"description": "The shapes the C ABI (libphuxcoord), the stdio bridge (phux-coordctl bridge) and phux-coordctl's JSON output use. Generated from the Go types by package coordclient/coordjson; see docs/ffi.md.",
		"$defs":       d,
	}
}
