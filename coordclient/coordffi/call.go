package coordffi

import (
	"bytes"
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordclient/coordjson"
)

// A method of Call: its parameter members and what it does.
type method struct {
	params []string
	run    func(h *Host, p map[string]any) (any, error)
}

// raw is a result that is already JSON.
type raw []byte

func (r raw) MarshalJSON() ([]byte, error) { return r, nil }

func handleOf(op string, p map[string]any, k string) (uint64, error) {
	return coordjson.Uint(op, p, "", k, 1<<63, false)
}

func timeoutOf(op string, p map[string]any) (time.Duration, error) {
	ms, err := coordjson.Uint(op, p, "", "timeout_ms", 1<<31, true)
	return time.Duration(ms) * time.Millisecond, err
}

func rawOrErr(b []byte, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return raw(b), nil
}

// methods are the calls of Call, by name (docs/ffi.md lists them).
var methods = map[string]method{
	"version": {nil, func(*Host, map[string]any) (any, error) {
		return map[string]any{"projection": coordjson.Version, "schema": coordjson.SchemaID, "protocol": "0.1.0"}, nil
	}},
	"schema": {nil, func(*Host, map[string]any) (any, error) { return raw(bytes.Clone(compactSchema())), nil }},
	"open": {[]string{"config", "timeout_ms"}, func(h *Host, p map[string]any) (any, error) {
		cfg, ok := p["config"]
		if !ok {
			return nil, malformed("open", "json.missing_field", "config")
		}
		t, err := timeoutOf("open", p)
		if err != nil {
			return nil, err
		}
		id, err := h.open(cfg, nil, t)
		if err != nil {
			return nil, err
		}
		return map[string]any{"client": id}, nil
	}},
	"close": {[]string{"client"}, func(h *Host, p map[string]any) (any, error) {
		id, err := handleOf("close", p, "client")
		if err != nil {
			return nil, err
		}
		return nil, h.CloseClient(id)
	}},
	"command": {[]string{"client", "command", "timeout_ms"}, func(h *Host, p map[string]any) (any, error) {
		id, err := handleOf("command", p, "client")
		if err != nil {
			return nil, err
		}
		t, err := timeoutOf("command", p)
		if err != nil {
			return nil, err
		}
		c, ok := p["command"]
		if !ok {
			return nil, malformed("command", "json.missing_field", "command")
		}
		return rawOrErr(h.command(id, c, t))
	}},
	"lookup": {[]string{"client", "operation_id", "wait", "timeout_ms"}, func(h *Host, p map[string]any) (any, error) {
		id, err := handleOf("lookup", p, "client")
		if err != nil {
			return nil, err
		}
		t, err := timeoutOf("lookup", p)
		if err != nil {
			return nil, err
		}
		op, err := coordjson.String("lookup", p, "", "operation_id", false)
		if err != nil {
			return nil, err
		}
		wait := false
		if w, ok := p["wait"]; ok {
			if wait, ok = w.(bool); !ok {
				return nil, malformed("lookup", "json.type", "wait")
			}
		}
		return rawOrErr(h.Lookup(id, op, wait, t))
	}},
	"snapshot": {[]string{"client", "timeout_ms"}, func(h *Host, p map[string]any) (any, error) {
		id, err := handleOf("snapshot", p, "client")
		if err != nil {
			return nil, err
		}
		t, err := timeoutOf("snapshot", p)
		if err != nil {
			return nil, err
		}
		return rawOrErr(h.Snapshot(id, t))
	}},
	"session": {[]string{"client"}, func(h *Host, p map[string]any) (any, error) {
		id, err := handleOf("session", p, "client")
		if err != nil {
			return nil, err
		}
		return rawOrErr(h.Session(id))
	}},
	"ping": {[]string{"client", "timeout_ms"}, func(h *Host, p map[string]any) (any, error) {
		id, err := handleOf("ping", p, "client")
		if err != nil {
			return nil, err
		}
		t, err := timeoutOf("ping", p)
		if err != nil {
			return nil, err
		}
		return nil, h.Ping(id, t)
	}},
	"mirror.open": {[]string{"client", "credit_count", "credit_bytes"}, func(h *Host, p map[string]any) (any, error) {
		id, err := handleOf("mirror_open", p, "client")
		if err != nil {
			return nil, err
		}
		cfg := map[string]any{}
		for _, k := range []string{"credit_count", "credit_bytes"} {
			if v, ok := p[k]; ok {
				cfg[k] = v
			}
		}
		mid, err := h.mirrorOpen(id, cfg)
		if err != nil {
			return nil, err
		}
		return map[string]any{"mirror": mid}, nil
	}},
	"mirror.close": {[]string{"mirror"}, func(h *Host, p map[string]any) (any, error) {
		id, err := handleOf("mirror_close", p, "mirror")
		if err != nil {
			return nil, err
		}
		return nil, h.MirrorClose(id)
	}},
	"mirror.next": {[]string{"mirror", "timeout_ms"}, func(h *Host, p map[string]any) (any, error) {
		id, err := handleOf("mirror_next", p, "mirror")
		if err != nil {
			return nil, err
		}
		t, err := timeoutOf("mirror_next", p)
		if err != nil {
			return nil, err
		}
		b, err := h.MirrorNext(id, t)
		if err != nil || b == nil {
			return nil, err
		}
		return raw(b), nil
	}},
	"mirror.status": {[]string{"mirror"}, func(h *Host, p map[string]any) (any, error) {
		id, err := handleOf("mirror_status", p, "mirror")
		if err != nil {
			return nil, err
		}
		return rawOrErr(h.MirrorStatus(id))
	}},
	"mirror.wait": {[]string{"mirror", "cut", "timeout_ms"}, func(h *Host, p map[string]any) (any, error) {
		id, err := handleOf("mirror_wait", p, "mirror")
		if err != nil {
			return nil, err
		}
		t, err := timeoutOf("mirror_wait", p)
		if err != nil {
			return nil, err
		}
		cut, err := coordjson.Uint("mirror_wait", p, "", "cut", 1<<64-1, true)
		if err != nil {
			return nil, err
		}
		return nil, h.MirrorWait(id, cut, t)
	}},
	"mirror.resync": {[]string{"mirror", "timeout_ms"}, func(h *Host, p map[string]any) (any, error) {
		id, err := handleOf("mirror_resync", p, "mirror")
		if err != nil {
			return nil, err
		}
		t, err := timeoutOf("mirror_resync", p)
		if err != nil {
			return nil, err
		}
		return nil, h.MirrorResync(id, t)
	}},
	"mirror.get": {[]string{"mirror", "ref"}, func(h *Host, p map[string]any) (any, error) {
		id, err := handleOf("mirror_get", p, "mirror")
		if err != nil {
			return nil, err
		}
		r, ok := p["ref"]
		if !ok {
			return nil, malformed("mirror_get", "json.missing_field", "ref")
		}
		return rawOrErr(h.MirrorGet(id, r))
	}},
	"mirror.list": {[]string{"mirror", "kind"}, func(h *Host, p map[string]any) (any, error) {
		id, err := handleOf("mirror_list", p, "mirror")
		if err != nil {
			return nil, err
		}
		k, err := coordjson.String("mirror_list", p, "", "kind", false)
		if err != nil {
			return nil, err
		}
		return rawOrErr(h.MirrorList(id, k))
	}},
}

// Methods lists the method names of Call, sorted.
func Methods() []string {
	out := make([]string, 0, len(methods))
	for n := range methods {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Call runs a method by name with its JSON parameters (an object, or
// empty for none) and returns its JSON result ("null" for none). An
// unknown method is "method.unknown"; parameters are refused as command
// input is (unknown members, wrong types, ...).
func (h *Host) Call(name string, params []byte) ([]byte, error) {
	var v any = map[string]any{}
	if len(params) > 0 {
		var err error
		if v, err = coordjson.Parse(name, params); err != nil {
			return nil, err
		}
		if v == nil {
			v = map[string]any{}
		}
	}
	return h.CallValue(name, v)
}

// CallValue is Call with parameters already parsed by coordjson.Parse.
func (h *Host) CallValue(name string, params any) ([]byte, error) {
	m, ok := methods[name]
	if !ok {
		return nil, local(name, "method.unknown")
	}
	p, err := coordjson.Members(name, params, "", m.params...)
	if err != nil {
		return nil, err
	}
	r, err := m.run(h, p)
	if err != nil {
		return nil, err
	}
	if rb, ok := r.(raw); ok {
		// coordjson's own bytes (the schema's compacted once): compact
		// and escaped as the typed calls write them, so they leave as
		// they are, without encoding/json's validating copy.
		return rb, nil
	}
	b, err := coordjson.Encode(r) // without HTML escaping, as the typed calls write
	if err != nil {
		return nil, local(name, "internal")
	}
	return b, nil
}

// compactSchema is coordjson.SchemaJSON without its indentation, as every
// other result is written (json.Compact does not escape HTML).
var compactSchema = sync.OnceValue(func() []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, coordjson.SchemaJSON); err != nil {
		panic("coordffi: coordjson.SchemaJSON is not JSON: " + err.Error())
	}
	return b.Bytes()
})

// IsMethod reports whether name is a method of Call.
func IsMethod(name string) bool { _, ok := methods[name]; return ok }
