package edcases

import (
	"errors"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/coordwire/edstrict"
)

// TestSmallOrderPoints: the copy of the 8-torsion table is the one
// edstrict refuses.
func TestSmallOrderPoints(t *testing.T) {
	sig := make([]byte, 64)
	for _, p := range smallOrderPoints {
		if err := edstrict.Check(p[:], nil, sig); !errors.Is(err, edstrict.ErrSmallOrderA) {
			t.Errorf("Check(%x) = %v, want ErrSmallOrderA", p, err)
		}
	}
	s := orderL
	if err := edstrict.Check(RFC8032Cases()[0].PublicKey, nil, append(RFC8032Cases()[0].Signature[:32:32], s[:]...)); !errors.Is(err, edstrict.ErrScalarNotReduced) {
		t.Errorf("S = L: %v, want ErrScalarNotReduced", err)
	}
}

// fixturePackages are the packages that hold published test keys and
// cases; only test files and the vector tooling may import them.
var fixturePackages = []string{
	"github.com/phuxcoord/coord/internal/testkit/edcases",
	"github.com/phuxcoord/coord/internal/testkit/workloadvectors",
	"github.com/phuxcoord/coord/internal/testkit/certvectors",
}

// TestFixturesStayOutOfProduction scans every non-test Go file of the
// module: no production package imports the fixture packages (the vector
// tooling under vectors/ does, by design), and the production packages
// that used to hold the fixtures no longer declare them.
func TestFixturesStayOutOfProduction(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	moved := map[string]bool{ // names that left production packages
		"Case": true, "ErrCaseData": true, "SpeccheckCases": true, "RFC8032Cases": true, "RFC8032Seeds": true,
		"ExtraSeedPrefix": true, "ExtraCases": true, "VectorAuthorityKey": true, "VectorWorkloadKey": true,
		"VectorAuthoritySeedLabel": true, "VectorWorkloadSeedLabel": true, "VectorChallenge": true,
		"VectorResponse": true, "VectorGrant": true, "TranscriptVectorCases": true, "GrantVectorCases": true,
		"ScopeVectorCases": true, "CertificateVector": true, "VectorCases": true, "VectorWitnessKey": true,
		"VectorWitnessKeySeed": true, "VectorOtherWitnessKeySeed": true,
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		tooling := rel == "vectors" || strings.HasPrefix(rel, "vectors/") ||
			strings.HasPrefix(rel, "internal/testkit/edcases/") || strings.HasPrefix(rel, "internal/testkit/workloadvectors/") ||
			strings.HasPrefix(rel, "internal/testkit/certvectors/")
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, fp := range fixturePackages {
				if p == fp && !tooling {
					t.Errorf("%s imports the test fixtures %s", rel, fp)
				}
			}
		}
		if strings.HasPrefix(rel, "workload/") || strings.HasPrefix(rel, "coordwire/edstrict/") || strings.HasPrefix(rel, "coordwire/cert/") {
			full, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			for name := range full.Scope.Objects {
				if moved[name] {
					t.Errorf("%s declares the fixture %s again", rel, name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
