// Package jsonschema checks JSON values against the subset of JSON Schema
// (2020-12) the repository's schemas use: type (one or a list), enum,
// const, pattern, format "date-time", minimum, maximum, properties,
// required, additionalProperties false, items, oneOf and local $ref
// ("#/$defs/NAME"). Other keywords are ignored, as a validator ignores
// annotations. It is a structural check for tests and tools, not a general
// validator.
package jsonschema

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Schema is a parsed schema document.
type Schema struct {
	root map[string]any
	mu   sync.Mutex
	re   map[string]*regexp.Regexp
}

// Parse parses a schema document.
func Parse(b []byte) (*Schema, error) {
	var root map[string]any
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(&root); err != nil {
		return nil, err
	}
	return &Schema{root: root, re: map[string]*regexp.Regexp{}}, nil
}

// Validate checks the JSON text b against the definition def ("" for the
// root schema, else a name under $defs). The error names the path of the
// first mismatch.
func (s *Schema) Validate(def string, b []byte) error {
	var v any
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return err
	}
	sch := any(s.root)
	if def != "" {
		var err error
		if sch, err = s.ref("#/$defs/" + def); err != nil {
			return err
		}
	}
	return s.check(sch, v, "$")
}

func (s *Schema) ref(r string) (any, error) {
	name, ok := strings.CutPrefix(r, "#/$defs/")
	if !ok {
		return nil, fmt.Errorf("jsonschema: unsupported $ref %q", r)
	}
	defs, _ := s.root["$defs"].(map[string]any)
	d, ok := defs[name]
	if !ok {
		return nil, fmt.Errorf("jsonschema: no definition %q", name)
	}
	return d, nil
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if _, err := x.Int64(); err == nil || !strings.ContainsAny(string(x), ".eE") {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

func (s *Schema) check(schema any, v any, path string) error {
	sch, ok := schema.(map[string]any)
	if !ok {
		if b, ok := schema.(bool); ok && b {
			return nil
		}
		return fmt.Errorf("%s: schema is not an object", path)
	}
	if r, ok := sch["$ref"].(string); ok {
		d, err := s.ref(r)
		if err != nil {
			return err
		}
		if err := s.check(d, v, path); err != nil {
			return err
		}
	}
	if t, ok := sch["type"]; ok {
		have := typeOf(v)
		var want []string
		switch t := t.(type) {
		case string:
			want = []string{t}
		case []any:
			for _, x := range t {
				want = append(want, x.(string))
			}
		}
		match := false
		for _, w := range want {
			if w == have || (w == "number" && have == "integer") {
				match = true
			}
		}
		if !match {
			return fmt.Errorf("%s: type %s, want %v", path, have, want)
		}
	}
	if e, ok := sch["enum"].([]any); ok {
		found := false
		for _, x := range e {
			if fmt.Sprint(x) == fmt.Sprint(v) && typeOf(x) == typeOf(v) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s: %v is not one of the enum", path, v)
		}
	}
	if c, ok := sch["const"]; ok && (fmt.Sprint(c) != fmt.Sprint(v) || typeOf(c) != typeOf(v)) {
		return fmt.Errorf("%s: %v is not the const %v", path, v, c)
	}
	if str, ok := v.(string); ok {
		if p, ok := sch["pattern"].(string); ok {
			re, err := s.regexp(p)
			if err != nil {
				return err
			}
			if !re.MatchString(str) {
				return fmt.Errorf("%s: %q does not match %s", path, str, p)
			}
		}
		if f, _ := sch["format"].(string); f == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				return fmt.Errorf("%s: %q is not RFC 3339", path, str)
			}
		}
	}
	if n, ok := v.(json.Number); ok {
		f, _ := n.Float64()
		if m, ok := sch["minimum"].(json.Number); ok {
			if mf, _ := m.Float64(); f < mf {
				return fmt.Errorf("%s: %v below minimum %v", path, n, m)
			}
		}
		if m, ok := sch["maximum"].(json.Number); ok {
			if mf, _ := m.Float64(); f > mf {
				return fmt.Errorf("%s: %v above maximum %v", path, n, m)
			}
		}
	}
	if obj, ok := v.(map[string]any); ok {
		props, _ := sch["properties"].(map[string]any)
		if req, ok := sch["required"].([]any); ok {
			for _, r := range req {
				if _, ok := obj[r.(string)]; !ok {
					return fmt.Errorf("%s: missing required member %q", path, r)
				}
			}
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p, ok := props[k]
			if !ok {
				if ap, ok := sch["additionalProperties"].(bool); ok && !ap {
					return fmt.Errorf("%s: member %q is not allowed", path, k)
				}
				continue
			}
			if err := s.check(p, obj[k], path+"."+k); err != nil {
				return err
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if it, ok := sch["items"]; ok {
			for i, x := range arr {
				if err := s.check(it, x, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	}
	if one, ok := sch["oneOf"].([]any); ok {
		n := 0
		var errs []string
		for _, o := range one {
			if err := s.check(o, v, path); err == nil {
				n++
			} else {
				errs = append(errs, err.Error())
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: matches %d of oneOf (want 1): %s", path, n, strings.Join(errs, "; "))
		}
	}
	return nil
}

func (s *Schema) regexp(p string) (*regexp.Regexp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if re, ok := s.re[p]; ok {
		return re, nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	s.re[p] = re
	return re, nil
}
