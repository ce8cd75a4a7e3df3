package fuzzseed_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/internal/testkit/fuzzseed"
)

func TestRoundTrip(t *testing.T) {
	in := []any{[]byte("a\x00\xff\"b"), "str\n", uint8(7), uint16(65535), int64(-3), true, byte(9)}
	got, err := fuzzseed.Parse(fuzzseed.Format(in...))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, got); diff != "" {
		t.Fatal(diff)
	}
	// The go command's own spelling of a byte and a rune.
	got, err = fuzzseed.Parse([]byte("go test fuzz v1\nbyte('\\x01')\nrune('x')\n[]byte(\"\")\n"))
	if err != nil || !cmp.Equal(got, []any{byte(1), rune('x'), []byte("")}) {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := fuzzseed.Parse([]byte("not a corpus\n")); err == nil {
		t.Fatal("accepted a file without header")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	d := filepath.Join(dir, "testdata", "fuzz", "FuzzX")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "a"), fuzzseed.Format([]byte{1}), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := fuzzseed.Load(dir, "FuzzX")
	if err != nil || !cmp.Equal(got, [][]any{{[]byte{1}}}) {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := fuzzseed.Load(dir, "FuzzNone"); err != nil || got != nil {
		t.Fatalf("missing dir: %v %v", got, err)
	}
}

// TestEveryFuzzTargetHasASeedCheck: every fuzz target of the module (func
// FuzzXxx in a _test.go file) is named in a TestFuzz… function (or a
// fuzzSeed… helper) of its own package's tests, the check in the normal
// suite that its seed corpus holds accepted and refused inputs.
func TestEveryFuzzTargetHasASeedCheck(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	targets := map[string][]string{} // dir -> targets
	checks := map[string]string{}    // dir -> text of the check functions
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv != nil {
				continue
			}
			name := fd.Name.Name
			switch {
			case strings.HasPrefix(name, "Fuzz"):
				targets[dir] = append(targets[dir], name)
			case strings.HasPrefix(name, "TestFuzz") || strings.HasPrefix(name, "fuzzSeed"):
				start := fd.Pos()
				if fd.Doc != nil {
					start = fd.Doc.Pos()
				}
				checks[dir] += string(src[fset.Position(start).Offset:fset.Position(fd.End()).Offset])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) == 0 {
		t.Fatal("found no fuzz targets; the walk is broken")
	}
	for dir, names := range targets {
		for _, name := range names {
			if !regexp.MustCompile(`\b` + name + `\b`).MatchString(checks[dir]) {
				t.Errorf("%s: fuzz target %s has no seed check (a TestFuzz… function naming it)", dir, name)
			}
		}
	}
}
