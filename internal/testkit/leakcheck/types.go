package leakcheck

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// SecretNameSuffixes are the (lowercase) name endings that make a byte
// array, byte slice or interface field look secret.
var SecretNameSuffixes = []string{"secret", "seed", "nonce", "token", "proof", "key", "priv", "private"}

// SecretLookingTypes parses the non-test Go files of the package in dir
// (all build tags) and returns its exported types that hold something
// secret-looking, each with the field path that made it so
// ("challenge.ClientNonce"). A field looks secret when
//
//   - its type is an array or slice of bytes (directly or through a named
//     type) or an interface, and its name ends in one of
//     SecretNameSuffixes (case-insensitively): "ClientNonce [32]byte",
//     "seed []byte", "WorkloadKey edstrict.Signer";
//   - its type is crypto/ed25519.PrivateKey, whatever its name;
//   - its type is an instance of internal/redact.Secret;
//   - its type is a struct, pointer, array, slice or map of a type of this
//     module that holds such a field (types of other modules are not
//     followed, except the two crypto/ed25519 key types).
//
// An exported named byte array or slice type whose own name ends in a
// suffix is listed too. The list is conservative on purpose: a leak test
// table must then say, for each, whether it redacts or holds only public
// values.
func SecretLookingTypes(dir string) (map[string]string, error) {
	root, module, err := findModule(dir)
	if err != nil {
		return nil, err
	}
	s := &scanner{root: root, module: module, pkgs: map[string]*pkgInfo{}, memo: map[string]*verdict{}}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	p, err := s.load(abs)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for name, ts := range p.types {
		if !ast.IsExported(name) {
			continue
		}
		if v := s.typeSpec(p, ts); v.secret {
			out[name] = v.path
		} else if v.bytes && hasSecretSuffix(name) {
			out[name] = name
		}
	}
	return out, nil
}

// SortedNames returns the keys of m in order.
func SortedNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func hasSecretSuffix(name string) bool {
	l := strings.ToLower(name)
	for _, s := range SecretNameSuffixes {
		if strings.HasSuffix(l, s) {
			return true
		}
	}
	return false
}

type pkgInfo struct {
	dir   string
	types map[string]*ast.TypeSpec
	// imports maps, per file, a package name to its import path.
	imports map[*ast.TypeSpec]map[string]string
}

// verdict classifies a type expression.
type verdict struct {
	bytes  bool   // an array or slice of bytes
	iface  bool   // an interface
	secret bool   // holds a secret-looking field (path says where)
	path   string //
}

type scanner struct {
	root, module string
	pkgs         map[string]*pkgInfo
	memo         map[string]*verdict
}

func findModule(dir string) (root, module string, err error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	for {
		f, err := os.Open(filepath.Join(d, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					return d, strings.Trim(strings.TrimSpace(m), `"`), nil
				}
			}
			return "", "", fmt.Errorf("leakcheck: %s/go.mod has no module line", d)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", "", fmt.Errorf("leakcheck: no go.mod above %s", dir)
		}
		d = parent
	}
}

func (s *scanner) load(dir string) (*pkgInfo, error) {
	if p, ok := s.pkgs[dir]; ok {
		return p, nil
	}
	p := &pkgInfo{dir: dir, types: map[string]*ast.TypeSpec{}, imports: map[*ast.TypeSpec]map[string]string{}}
	s.pkgs[dir] = p
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		imps := map[string]string{}
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imps[name] = path
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, sp := range g.Specs {
				ts := sp.(*ast.TypeSpec)
				p.types[ts.Name.Name] = ts
				p.imports[ts] = imps
			}
		}
	}
	return p, nil
}

func (s *scanner) typeSpec(p *pkgInfo, ts *ast.TypeSpec) verdict {
	key := p.dir + "." + ts.Name.Name
	if v, ok := s.memo[key]; ok {
		if v == nil {
			return verdict{} // a cycle: decided by the outer visit
		}
		return *v
	}
	s.memo[key] = nil
	v := s.expr(p, p.imports[ts], ts.Type)
	s.memo[key] = &v
	return v
}

func (s *scanner) expr(p *pkgInfo, imps map[string]string, e ast.Expr) verdict {
	switch t := e.(type) {
	case *ast.ParenExpr:
		return s.expr(p, imps, t.X)
	case *ast.Ident:
		switch t.Name {
		case "byte", "uint8":
			return verdict{bytes: true}
		case "any", "error":
			return verdict{iface: t.Name == "any"}
		}
		if ts, ok := p.types[t.Name]; ok {
			return namedSecret(t.Name, s.typeSpec(p, ts))
		}
		return verdict{}
	case *ast.ArrayType:
		v := s.expr(p, imps, t.Elt)
		if id, ok := t.Elt.(*ast.Ident); ok && (id.Name == "byte" || id.Name == "uint8") {
			return verdict{bytes: true}
		}
		return verdict{secret: v.secret, path: v.path}
	case *ast.StarExpr:
		v := s.expr(p, imps, t.X)
		return verdict{secret: v.secret, path: v.path}
	case *ast.MapType:
		v := s.expr(p, imps, t.Value)
		return verdict{secret: v.secret, path: v.path}
	case *ast.InterfaceType:
		return verdict{iface: true}
	case *ast.IndexExpr:
		return s.generic(p, imps, t.X)
	case *ast.IndexListExpr:
		return s.generic(p, imps, t.X)
	case *ast.SelectorExpr:
		pkg, ok := t.X.(*ast.Ident)
		if !ok {
			return verdict{}
		}
		path := imps[pkg.Name]
		switch path + "." + t.Sel.Name {
		case "crypto/ed25519.PrivateKey":
			return verdict{bytes: true, secret: true, path: "(ed25519.PrivateKey)"}
		case "crypto/ed25519.PublicKey":
			return verdict{bytes: true}
		}
		rel, ok := strings.CutPrefix(path, s.module)
		if !ok || (rel != "" && rel[0] != '/') {
			return verdict{}
		}
		q, err := s.load(filepath.Join(s.root, filepath.FromSlash(strings.TrimPrefix(rel, "/"))))
		if err != nil {
			return verdict{}
		}
		if ts, ok := q.types[t.Sel.Name]; ok {
			return namedSecret(t.Sel.Name, s.typeSpec(q, ts))
		}
		return verdict{}
	case *ast.StructType:
		for _, f := range t.Fields.List {
			v := s.expr(p, imps, f.Type)
			names := f.Names
			if len(names) == 0 { // embedded: the type's own name
				names = []*ast.Ident{{Name: embeddedName(f.Type)}}
			}
			for _, n := range names {
				switch {
				case v.secret:
					return verdict{secret: true, path: joinPath(n.Name, v.path)}
				case (v.bytes || v.iface) && hasSecretSuffix(n.Name):
					return verdict{secret: true, path: n.Name}
				}
			}
		}
		return verdict{}
	}
	return verdict{}
}

// generic classifies an instantiated generic type: redact.Secret holds a
// secret; other generic types are looked at without their arguments.
func (s *scanner) generic(p *pkgInfo, imps map[string]string, x ast.Expr) verdict {
	if sel, ok := x.(*ast.SelectorExpr); ok {
		if pkg, ok := sel.X.(*ast.Ident); ok && imps[pkg.Name] == s.module+"/internal/redact" && sel.Sel.Name == "Secret" {
			return verdict{secret: true, path: "(redact.Secret)"}
		}
	}
	v := s.expr(p, imps, x)
	return verdict{secret: v.secret, path: v.path}
}

// namedSecret makes a named byte type whose name looks secret ("Nonce")
// a secret wherever it is used.
func namedSecret(name string, v verdict) verdict {
	if v.bytes && !v.secret && hasSecretSuffix(name) {
		v.secret, v.path = true, "("+name+")"
	}
	return v
}

func embeddedName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return embeddedName(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	}
	return "?"
}

func joinPath(name, rest string) string {
	if strings.HasPrefix(rest, "(") {
		return name + " " + rest
	}
	return name + "." + rest
}
