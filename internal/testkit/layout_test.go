// Package testkit_test checks the module's one-way layout: test support
// lives under internal/testkit and only tests, the vector tooling
// (vectors/) and other test support import it, so that no production
// package — the library, its internal helpers (internal/atomicfile,
// cmdline, lograte, peercred, redact), the daemons, the CLI, the examples
// — ever ships test code.
package testkit_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/phuxcoord/coord/"

// mayImportTestkit reports whether the non-test files of the package in
// dir (slash-separated, relative to the module root) may import test
// support.
func mayImportTestkit(dir string) bool {
	for _, p := range []string{"internal/testkit", "vectors", "internal/tools", "cmd/phux-coordcheck"} {
		if dir == p || strings.HasPrefix(dir, p+"/") {
			return true
		}
	}
	return false
}

func TestProductionNeverImportsTestSupport(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	var checked int
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir // another module (bench/peers)
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || mayImportTestkit(filepath.ToSlash(filepath.Dir(rel))) {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, module+"internal/testkit") {
				t.Errorf("%s imports %s: production code must not import test support", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d production files: the walk is broken", checked)
	}
}
