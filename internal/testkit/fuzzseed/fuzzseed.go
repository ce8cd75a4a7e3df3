// Package fuzzseed reads the seed corpus files of a Go fuzz target
// (testdata/fuzz/<FuzzName>/*, "go test fuzz v1" format), so that a test
// in the normal suite can check what the target's seeds decode to. It is
// test support: only _test.go files import it.
package fuzzseed

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Header is the first line of every corpus file.
const Header = "go test fuzz v1"

// Load returns the inputs of every corpus file of target under dir
// (dir/testdata/fuzz/target), in file-name order; each input is one value
// per line of the file: []byte, string, bool, the integer types, float32,
// float64, byte and rune. A missing directory is no inputs.
func Load(dir, target string) ([][]any, error) {
	d := filepath.Join(dir, "testdata", "fuzz", target)
	entries, err := os.ReadDir(d)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var out [][]any
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(d, n))
		if err != nil {
			return nil, err
		}
		vals, err := Parse(b)
		if err != nil {
			return nil, fmt.Errorf("fuzzseed: %s: %w", filepath.Join(d, n), err)
		}
		out = append(out, vals)
	}
	return out, nil
}

// Parse decodes one corpus file.
func Parse(file []byte) ([]any, error) {
	sc := bufio.NewScanner(bytes.NewReader(file))
	sc.Buffer(nil, 1<<24)
	if !sc.Scan() || sc.Text() != Header {
		return nil, fmt.Errorf("missing %q header", Header)
	}
	var vals []any
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		v, err := parseValue(line)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", line, err)
		}
		vals = append(vals, v)
	}
	return vals, sc.Err()
}

func parseValue(line string) (any, error) {
	e, err := parser.ParseExpr(line)
	if err != nil {
		return nil, err
	}
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return nil, fmt.Errorf("not a conversion")
	}
	var typ string
	switch f := call.Fun.(type) {
	case *ast.Ident:
		typ = f.Name
	case *ast.ArrayType:
		if id, ok := f.Elt.(*ast.Ident); ok && f.Len == nil && id.Name == "byte" {
			typ = "[]byte"
		}
	}
	arg := call.Args[0]
	neg := false
	if u, ok := arg.(*ast.UnaryExpr); ok && u.Op == token.SUB {
		neg, arg = true, u.X
	}
	lit, ok := arg.(*ast.BasicLit)
	if !ok {
		if id, ok := arg.(*ast.Ident); ok && typ == "bool" && (id.Name == "true" || id.Name == "false") {
			return id.Name == "true", nil
		}
		return nil, fmt.Errorf("argument is not a literal")
	}
	text := lit.Value
	if neg {
		text = "-" + text
	}
	switch typ {
	case "[]byte", "string":
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return nil, err
		}
		if typ == "string" {
			return s, nil
		}
		return []byte(s), nil
	case "byte", "rune":
		var v int64
		if lit.Kind == token.CHAR {
			r, _, _, err := strconv.UnquoteChar(strings.Trim(lit.Value, "'"), '\'')
			if err != nil {
				return nil, err
			}
			v = int64(r)
		} else if v, err = strconv.ParseInt(text, 0, 32); err != nil {
			return nil, err
		}
		if typ == "byte" {
			return byte(v), nil
		}
		return rune(v), nil
	case "int", "int8", "int16", "int32", "int64":
		v, err := strconv.ParseInt(text, 0, 64)
		if err != nil {
			return nil, err
		}
		return map[string]any{"int": int(v), "int8": int8(v), "int16": int16(v), "int32": int32(v), "int64": v}[typ], nil
	case "uint", "uint8", "uint16", "uint32", "uint64":
		v, err := strconv.ParseUint(text, 0, 64)
		if err != nil {
			return nil, err
		}
		return map[string]any{"uint": uint(v), "uint8": uint8(v), "uint16": uint16(v), "uint32": uint32(v), "uint64": v}[typ], nil
	case "float32", "float64":
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, err
		}
		if typ == "float32" {
			return float32(v), nil
		}
		return v, nil
	}
	return nil, fmt.Errorf("unsupported type %q", typ)
}

// Format returns the corpus file of vals, as "go test -fuzz" writes it.
func Format(vals ...any) []byte {
	var b strings.Builder
	b.WriteString(Header + "\n")
	for _, v := range vals {
		switch x := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", x)
		case string:
			fmt.Fprintf(&b, "string(%q)\n", x)
		default:
			fmt.Fprintf(&b, "%T(%v)\n", v, v)
		}
	}
	return []byte(b.String())
}
