//go:build unix

package atomicfile_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/internal/atomicfile"
)

// TestModeRefusalSaysWhatToChange (B.5 file rules): a refused mode still
// matches ErrInsecurePermissions, and its cause says whether the
// directory or the file is wrong, the mode found and the chmod that meets
// the rule — so every command printing it tells its user what to do —
// without the path (which callers name by their flag).
func TestModeRefusalSaysWhatToChange(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	shut := filepath.Join(base, "shut")
	if err := atomicfile.EnsureDir(shut); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shut, "loose"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(shut, "loose"), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		dir, file string
		want      []string
	}{
		{"directory", open, "f", []string{"the directory has mode 0755", "chmod 700"}},
		{"file", shut, "loose", []string{"the file has mode 0640", "chmod 600"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := atomicfile.ReadFile(c.dir, c.file, 64)
			var pe *fs.PathError
			if !errors.Is(err, atomicfile.ErrInsecurePermissions) || !errors.As(err, &pe) {
				t.Fatalf("ReadFile = %v, want an *fs.PathError matching ErrInsecurePermissions", err)
			}
			for _, w := range c.want {
				if !strings.Contains(pe.Err.Error(), w) {
					t.Errorf("cause %q does not say %q", pe.Err, w)
				}
			}
			if strings.Contains(pe.Err.Error(), base) {
				t.Errorf("cause %q names the path", pe.Err)
			}
		})
	}
	if err := atomicfile.EnsureDir(open); !errors.Is(err, atomicfile.ErrInsecurePermissions) || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("EnsureDir of a 0755 directory = %v, want the refusal saying chmod 700", err)
	}
}
