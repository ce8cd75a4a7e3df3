package coordserver_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Every write the server makes to its store goes through commitTx, which
// publishes the commit's events to the subscriptions' shared feed: a
// store.Update anywhere else would commit events that live subscriptions
// might not see until an unrelated commit.
func TestStoreWritesGoThroughCommitTx(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			fn, ok := n.(*ast.FuncDecl)
			if !ok {
				return true
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Update" {
					return true
				}
				if x, ok := sel.X.(*ast.SelectorExpr); ok && x.Sel.Name == "store" {
					found++
					if fn.Name.Name != "commitTx" {
						t.Errorf("%s: %s calls store.Update; write through commitTx", fset.Position(sel.Pos()), fn.Name.Name)
					}
				}
				return true
			})
			return false
		})
	}
	if found != 1 {
		t.Fatalf("%d store.Update calls, want exactly commitTx's", found)
	}
}
