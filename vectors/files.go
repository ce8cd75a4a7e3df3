package vectors

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ModulePath is the module whose root GenerateDir and the commands look for.
const ModulePath = "github.com/phuxcoord/coord"

// FindModuleRoot returns the nearest directory at or above dir whose
// go.mod declares ModulePath.
func FindModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.TrimSpace(line) == "module "+ModulePath {
					return dir, nil
				}
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("vectors: no go.mod of module %s at or above the working directory", ModulePath)
		}
		dir = parent
	}
}

// Rendered is one vector file as bytes.
type Rendered struct {
	Name string
	Data []byte
}

// Render generates every vector file from the module rooted at root (which
// supplies the speccheck input) and returns the files' exact bytes.
func Render(root string) ([]Rendered, error) {
	spec, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(SpeccheckPath)))
	if err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	files, err := Generate(Inputs{SpeccheckJSON: spec})
	if err != nil {
		return nil, err
	}
	var out []Rendered
	for _, f := range files {
		b, err := Marshal(f.Vectors)
		if err != nil {
			return nil, fmt.Errorf("vectors: %s: %w", f.Name, err)
		}
		out = append(out, Rendered{Name: f.Name, Data: b})
	}
	return out, nil
}

// ErrStale is wrapped by Compare when the files on disk differ from the
// generator's output.
var ErrStale = errors.New("vector files differ from the generator output; run `go run ./vectors/cmd/genvectors`")

// Compare checks that dir holds exactly the rendered files, byte for
// byte, and no other *.json file. The error names every differing,
// missing or extra file and wraps ErrStale.
func Compare(dir string, files []Rendered) error {
	var problems []string
	want := map[string]bool{}
	for _, f := range files {
		want[f.Name] = true
		got, err := os.ReadFile(filepath.Join(dir, f.Name))
		switch {
		case errors.Is(err, os.ErrNotExist):
			problems = append(problems, f.Name+" is missing")
		case err != nil:
			return err
		case !bytes.Equal(got, f.Data):
			problems = append(problems, f.Name+" differs")
		}
	}
	extra, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	for _, p := range extra {
		if !want[filepath.Base(p)] {
			problems = append(problems, filepath.Base(p)+" is not produced by the generator")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrStale, strings.Join(problems, "; "))
	}
	return nil
}
