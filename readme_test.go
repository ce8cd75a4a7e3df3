//go:build unix

package coord_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// maxReadmeBytes bounds README.md: a newcomer reads it in one sitting;
// tables and measurements live in docs/.
const maxReadmeBytes = 15 << 10

// readmeMarker precedes each ```sh block of README.md that
// TestReadmeOperatorPath runs.
const readmeMarker = "<!-- readme-test -->"

// readmeBlocks returns the marked shell blocks of the README, in order.
func readmeBlocks(t *testing.T, text string) []string {
	t.Helper()
	var blocks []string
	for rest := text; ; {
		i := strings.Index(rest, readmeMarker)
		if i < 0 {
			break
		}
		rest = strings.TrimLeft(rest[i+len(readmeMarker):], "\n")
		body, ok := strings.CutPrefix(rest, "```sh\n")
		if !ok {
			t.Fatalf("%s is not followed by a ```sh block", readmeMarker)
		}
		end := strings.Index(body, "\n```")
		if end < 0 {
			t.Fatal("an unterminated ```sh block")
		}
		blocks = append(blocks, body[:end+1])
		rest = body[end:]
	}
	return blocks
}

// README.md stays under maxReadmeBytes and every relative link in it
// names a file or directory of the repository.
func TestReadmeSizeAndLinks(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > maxReadmeBytes {
		t.Errorf("README.md is %d bytes, over %d: move detail to docs/", len(b), maxReadmeBytes)
	}
	for _, m := range regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`).FindAllStringSubmatch(string(b), -1) {
		if strings.Contains(m[1], "://") {
			continue
		}
		if _, err := os.Stat(m[1]); err != nil {
			t.Errorf("README.md links to %s: %v", m[1], err)
		}
	}
	for _, doc := range []string{"docs/status.md", "docs/performance.md", "docs/postgres-standby.md", "docs/ffi.md", "docs/ffi-cost.md"} {
		d, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`).FindAllStringSubmatch(string(d), -1) {
			if strings.Contains(m[1], "://") {
				continue
			}
			if _, err := os.Stat(filepath.Join("docs", m[1])); err != nil {
				t.Errorf("%s links to %s: %v", doc, m[1], err)
			}
		}
	}
}

// TestReadmeOperatorPath runs the README's marked shell blocks, as
// written, one after the other in one POSIX shell in a new directory,
// with the four binaries built from this checkout first on PATH and a
// home and config directory of its own: the five-minute operator path
// must work when pasted. Whatever the blocks leave running is killed at
// the end (they run in a process group of their own).
func TestReadmeOperatorPath(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the four binaries and runs daemons")
	}
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, string(text))
	if len(blocks) < 3 {
		t.Fatalf("%d marked blocks in README.md", len(blocks))
	}
	// A short directory: Unix socket paths are short.
	dir, err := os.MkdirTemp("", "readme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/phux-coordd", "./cmd/phux-coordctl", "./cmd/phux-coordkey", "./witness/cmd/phux-witness")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	work := filepath.Join(dir, "w")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	script := "set -eu\n" + strings.Join(blocks, "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "PHUX_COORDCTL_PROFILE=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything the blocks left running
	}
	if err != nil {
		logs := ""
		for _, l := range []string{"witness.log", "coord.log"} {
			b, _ := os.ReadFile(filepath.Join(work, "phux-demo", l))
			logs += "\n--- " + l + "\n" + string(b)
		}
		t.Fatalf("the README's operator path failed: %v\n%s%s", err, out.String(), logs)
	}
	// What the README says the path shows.
	for _, want := range []string{"authority fingerprint: sha256:", "healthy:", `outcome="exit status 3"`, "FAILED", "backup:            verified"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}
